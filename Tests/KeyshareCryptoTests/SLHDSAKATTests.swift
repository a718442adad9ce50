import Foundation
import Testing
import KeyshareCrypto

/// SLH-DSA (FIPS 205) key generation against NIST's ACVP vectors (issue 18): the first test of each
/// 128-bit group of usnistgov/ACVP-Server `gen-val/json-files/SLH-DSA-keyGen-FIPS205/internalProjection.json`
/// (commit 3a7333f638a031c6ed35b6ee31064686eb88c1ec; tcId 1, 11, 21, 31), copied unchanged: from
/// SK.seed, SK.prf and PK.seed the key must come out as the vector's sk and pk. Signing: 8 of ACVP's
/// sigGen tests (external interface, vsId 53) in Tests/Fixtures/vectors/ACVP_SLHDSA_subset.json
/// (source and commit in that folder's README.md), and against raw OpenSSL EVP in 33-pq.sh.
/// Verification: 10 of ACVP's sigVer tests (internal interface, vsId 53) in
/// Tests/Fixtures/vectors/ACVP_SLHDSA_sigver_subset.json, valid and invalid.
@Suite struct SLHDSAKATTests {
    struct Vector: Sendable {
        let set: SLHDSAParameterSet, tcId: Int, skSeed: String, skPrf: String, pkSeed: String, sk: String, pk: String
    }

    static let vectors: [Vector] = [
        Vector(set: .sha2_128s, tcId: 1, skSeed: "AA9CC7DCA491FC86BCB15A709A15E9B3", skPrf: "905C800B6E2FB9B54B6B050EE5E4DE9A",
               pkSeed: "FA5464D1C661FED38B2A51CA3EAE71BA",
               sk: "AA9CC7DCA491FC86BCB15A709A15E9B3905C800B6E2FB9B54B6B050EE5E4DE9AFA5464D1C661FED38B2A51CA3EAE71BACAE3D1865215E3D3850E8C1B8292BF42",
               pk: "FA5464D1C661FED38B2A51CA3EAE71BACAE3D1865215E3D3850E8C1B8292BF42"),
        Vector(set: .shake_128s, tcId: 11, skSeed: "ECD0A05696C2EC6BFE85B8B1B2022486", skPrf: "BFD8732B1A42CEA236E9822AA9E724E6",
               pkSeed: "37D664792198176C12E8121CCF69E684",
               sk: "ECD0A05696C2EC6BFE85B8B1B2022486BFD8732B1A42CEA236E9822AA9E724E637D664792198176C12E8121CCF69E684FCF6FFE2A04243DC3E8ED3EE6E44CDEF",
               pk: "37D664792198176C12E8121CCF69E684FCF6FFE2A04243DC3E8ED3EE6E44CDEF"),
        Vector(set: .sha2_128f, tcId: 21, skSeed: "E2BDAA37C8CFFE5E8D5676C23267890C", skPrf: "31441758F573285881CDC82AB911DD84",
               pkSeed: "72DC8D26DF6EF708F4C41AF9FD04B65A",
               sk: "E2BDAA37C8CFFE5E8D5676C23267890C31441758F573285881CDC82AB911DD8472DC8D26DF6EF708F4C41AF9FD04B65A8927927229891D47A60D67ECEF3D2C17",
               pk: "72DC8D26DF6EF708F4C41AF9FD04B65A8927927229891D47A60D67ECEF3D2C17"),
        Vector(set: .shake_128f, tcId: 31, skSeed: "BBC74306F75DC2DAF7372B3C9841A4D6", skPrf: "852C17B459F1692B8E9A1A0DACE5BA26",
               pkSeed: "380C99304A0DDD32F344B95144E1FDEF",
               sk: "BBC74306F75DC2DAF7372B3C9841A4D6852C17B459F1692B8E9A1A0DACE5BA26380C99304A0DDD32F344B95144E1FDEF60BBC2340E08770FB41A80A76CB08E34",
               pk: "380C99304A0DDD32F344B95144E1FDEF60BBC2340E08770FB41A80A76CB08E34"),
    ]

    static func hex(_ s: String) -> [UInt8] {
        let c = Array(s.utf8)
        func nib(_ x: UInt8) -> UInt8 { x <= 57 ? x - 48 : (x | 0x20) - 87 }
        return stride(from: 0, to: c.count - 1, by: 2).map { nib(c[$0]) << 4 | nib(c[$0 + 1]) }
    }

    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func keyGenFromSeeds() throws {
        for v in Self.vectors {
            let k = try SLHDSAKey.generate(v.set, seed: Self.hex(v.skSeed) + Self.hex(v.skPrf) + Self.hex(v.pkSeed))
            #expect(try k.publicKeyBytes() == Self.hex(v.pk), "tcId \(v.tcId) pk")
            #expect(try k.privateKeyBytes() == Self.hex(v.sk), "tcId \(v.tcId) sk")
            // The private key imports to the same key, which signs for the vector's public key.
            let imported = try SLHDSAKey(privateKey: Self.hex(v.sk), v.set)
            let pub = try SLHDSAKey(publicKey: Self.hex(v.pk), v.set)
            let sig = try imported.sign(Array("acvp".utf8), context: [7])
            #expect(try pub.verify(sig, message: Array("acvp".utf8), context: [7]), "tcId \(v.tcId) sign/verify")
        }
    }

    struct SigGen: @unchecked Sendable { let rows: [[String: Any]] }
    static let sigGen: SigGen = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/vectors/ACVP_SLHDSA_subset.json")
        let data = (try? Data(contentsOf: url)) ?? Data()
        let json = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
        return SigGen(rows: json?["slhdsa_siggen"] as? [[String: Any]] ?? [])
    }()

    /// ACVP sigGen, external interface: pure SLH-DSA with a context (FIPS 205 Algorithm 22) and
    /// HashSLH-DSA (Algorithm 23), deterministic (opt_rand = PK.seed) and hedged with ACVP's
    /// additionalRandomness injected as opt_rand, byte for byte; each signature then verifies with
    /// the vector's pk and not under another context.
    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func sigGenExternal() throws {
        let rows = Self.sigGen.rows
        #expect(rows.count == 8)
        #expect(rows.filter { $0["deterministic"] as? Bool == false }.count == 4)
        #expect(rows.filter { $0["preHash"] as? String == "prehash" }.count == 6)
        for r in rows {
            let id = "tcId \((r["tcId"] as? Int) ?? -1)"
            let set = try #require(SLHDSAParameterSet(name: r["set"] as? String ?? ""), "\(id)")
            let hex = { (k: String) in Self.hex(r[k] as? String ?? "") }
            let key = try SLHDSAKey(privateKey: hex("sk"), set)
            let pub = try SLHDSAKey(publicKey: hex("pk"), set)
            let (msg, ctx, rnd, want) = (hex("message"), hex("context"), hex("rnd"), hex("signature"))
            let det = r["deterministic"] as? Bool ?? true
            #expect(det == rnd.isEmpty, "\(id): hedged tests carry additionalRandomness")
            let sig: [UInt8]
            var otherCtx = ctx.isEmpty ? [UInt8(0)] : ctx
            otherCtx[otherCtx.count - 1] ^= ctx.isEmpty ? 0 : 1
            if r["preHash"] as? String == "prehash" {
                let ph = try #require(MLDSAExternalKATTests.preHash(r["hashAlg"] as? String ?? ""), "\(id)")
                let digest = try ph.hash(msg)
                sig = try key.sign(digest: digest, preHash: ph, context: ctx, deterministic: det, testEntropy: det ? nil : rnd)
                #expect(try pub.verify(sig, digest: digest, preHash: ph, context: ctx), "\(id) verify")
                #expect(try !pub.verify(sig, digest: digest, preHash: ph, context: otherCtx), "\(id) other context")
            } else {
                sig = try key.sign(msg, context: ctx, deterministic: det, testEntropy: det ? nil : rnd)
                #expect(try pub.verify(sig, message: msg, context: ctx), "\(id) verify")
                #expect(try !pub.verify(sig, message: msg, context: otherCtx), "\(id) other context")
            }
            #expect(sig.count == set.signatureLength, "\(id) length")
            let what = "\(set.name) \((r["preHash"] as? String) ?? "?") \(det ? "deterministic" : "hedged")"
            #expect(sig == want, "\(id) \(what) signature")
        }
    }

    struct SigVer: @unchecked Sendable { let rows: [[String: Any]] }
    static let sigVer: SigVer = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/vectors/ACVP_SLHDSA_sigver_subset.json")
        let data = (try? Data(contentsOf: url)) ?? Data()
        let json = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
        return SigVer(rows: json?["slhdsa_sigver"] as? [[String: Any]] ?? [])
    }()

    /// ACVP sigVer (internal interface, slh_verify_internal on the message as given): 10 tests of
    /// Tests/Fixtures/vectors/ACVP_SLHDSA_sigver_subset.json over the five parameter sets the
    /// vector set has (SHA2-192s, SHA2-256f, SHAKE-192s, SHAKE-256f, SHAKE-128f), 5 valid and 5 with
    /// R, SIGHT modified: the verdict must be ACVP's testPassed.
    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func sigVerInternal() throws {
        let rows = Self.sigVer.rows
        #expect(rows.count == 10)
        #expect(rows.filter { $0["testPassed"] as? Bool == true }.count == 5)
        #expect(Set(rows.compactMap { $0["set"] as? String }).count == 5)
        for r in rows {
            let id = "tcId \((r["tcId"] as? Int) ?? -1)"
            let set = try #require(SLHDSAParameterSet(name: r["set"] as? String ?? ""), "\(id)")
            let hex = { (k: String) in Self.hex(r[k] as? String ?? "") }
            let pub = try SLHDSAKey(publicKey: hex("pk"), set)
            let want = try #require(r["testPassed"] as? Bool, "\(id)")
            let got = try pub.verify(hex("signature"), message: hex("message"), encoding: .internal)
            #expect(got == want, "\(id) \(set.name): \((r["reason"] as? String) ?? "")")
            if want {
                // The same signature is no pure (external-interface) signature of the message.
                #expect(try !pub.verify(hex("signature"), message: hex("message")), "\(id) not under the external interface")
            }
        }
    }

    /// HashSLH-DSA / HashML-DSA: what one signs over a digest verifies only with the same hash and
    /// context, and a digest of the wrong size is refused before signing.
    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func preHashSignatures() throws {
        let d = try MLDSAKey.generate(.mlDSA44)
        let digest = DigestAlgorithm.sha256.hash(Array("m".utf8))
        let sig = try d.sign(digest: digest, preHash: .digest(.sha256), context: [1])
        #expect(try d.verify(sig, digest: digest, preHash: .digest(.sha256), context: [1]))
        #expect(try !d.verify(sig, digest: digest, preHash: .digest(.sha3_256), context: [1]))
        #expect(try !d.verify(sig, digest: digest, preHash: .digest(.sha256)))
        #expect(try !d.verify(sig, message: Array("m".utf8), context: [1]))
        #expect(throws: CryptoError.self) { _ = try d.sign(digest: [1, 2, 3], preHash: .digest(.sha256)) }
        #expect(try PreHash.shake256.hash(Array("abc".utf8)).count == 64)
    }
}
