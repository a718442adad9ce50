import Foundation
import Testing
import KeyshareCrypto

/// ML-DSA's external interface against NIST's ACVP sigVer vectors (issue 18): pure ML-DSA with a
/// context (FIPS 204 Algorithm 3) and HashML-DSA (Algorithm 5, "preHash" groups, every ACVP hash but
/// SHA-1). A subset of usnistgov/ACVP-Server `gen-val/json-files/ML-DSA-sigVer-FIPS204/prompt.json`
/// + `expectedResults.json` (vsId 42; commit 203f667c26e10a1be89dfe8da7a54498fde2d848, as copied in
/// mjosaarinen/py-acvp-pqc `json-copy/` at 1c859956c0217b04fa5ae76e338e5570aba622c5), cut by
/// Tests/Fixtures/vectors/make_mldsa_external_subset.py: per parameter set and interface the valid
/// test and the two invalid tests with the shortest messages (18). PostQuantumKATTests covers the internal
/// interface (ACVP's older sigGen/sigVer files); ACVP's external sigGen prompts are not in the
/// stored copies, so signing with a context or a pre-hash is checked here by verify only.
@Suite struct MLDSAExternalKATTests {
    struct Vectors: @unchecked Sendable { let rows: [[String: Any]] }
    static let vectors: Vectors = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/vectors/ACVP_MLDSA_external_subset.json")
        let data = (try? Data(contentsOf: url)) ?? Data()
        let json = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
        return Vectors(rows: json?["mldsa_sigver_external"] as? [[String: Any]] ?? [])
    }()

    static func hex(_ row: [String: Any], _ key: String) -> [UInt8] { PostQuantumKATTests.hex(row, key) }

    /// ACVP's hashAlg names.
    static func preHash(_ name: String) -> PreHash? {
        switch name {
        case "SHA2-224": .digest(.sha224)
        case "SHA2-256": .digest(.sha256)
        case "SHA2-384": .digest(.sha384)
        case "SHA2-512": .digest(.sha512)
        case "SHA2-512/224": .digest(.sha512_224)
        case "SHA2-512/256": .digest(.sha512_256)
        case "SHA3-224": .digest(.sha3_224)
        case "SHA3-256": .digest(.sha3_256)
        case "SHA3-384": .digest(.sha3_384)
        case "SHA3-512": .digest(.sha3_512)
        case "SHAKE-128": .shake128
        case "SHAKE-256": .shake256
        default: nil
        }
    }

    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func pureWithContextSigVer() throws {
        let rows = Self.vectors.rows.filter { $0["preHash"] as? String == "pure" }
        #expect(rows.count == 9)
        #expect(rows.filter { $0["passed"] as? Bool == true }.count == 3)
        for r in rows {
            let set = try #require(MLDSAParameterSet(name: r["set"] as? String ?? ""))
            let pub = try MLDSAKey(publicKey: Self.hex(r, "pk"), set)
            let (msg, ctx, sig) = (Self.hex(r, "message"), Self.hex(r, "context"), Self.hex(r, "signature"))
            let ok = try pub.verify(sig, message: msg, context: ctx)
            #expect(ok == (r["passed"] as? Bool), "sigVer external pure tcId \(r["tcId"] ?? "?")")
            if ok {
                // The context is bound: another one (or none) must not verify the same signature.
                let otherCtx = ctx.isEmpty ? [0] : Array(ctx.dropLast()) + [ctx[ctx.count - 1] ^ 1]
                #expect(try !pub.verify(sig, message: msg, context: otherCtx), "tcId \(r["tcId"] ?? "?") other context")
                #expect(try !pub.verify(sig, message: msg, encoding: .internal), "tcId \(r["tcId"] ?? "?") internal")
            }
        }
    }

    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func hashMLDSASigVer() throws {
        let rows = Self.vectors.rows.filter { $0["preHash"] as? String == "preHash" }
        #expect(rows.count == 9)
        #expect(rows.filter { $0["passed"] as? Bool == true }.count == 3)
        for r in rows {
            let set = try #require(MLDSAParameterSet(name: r["set"] as? String ?? ""))
            let ph = try #require(Self.preHash(r["hashAlg"] as? String ?? ""), "hashAlg \(r["hashAlg"] ?? "?")")
            let pub = try MLDSAKey(publicKey: Self.hex(r, "pk"), set)
            let (msg, ctx, sig) = (Self.hex(r, "message"), Self.hex(r, "context"), Self.hex(r, "signature"))
            let digest = try ph.hash(msg)
            let ok = try pub.verify(sig, digest: digest, preHash: ph, context: ctx)
            #expect(ok == (r["passed"] as? Bool), "sigVer HashML-DSA \(r["hashAlg"] ?? "?") tcId \(r["tcId"] ?? "?")")
            if ok {
                // The hash's OID is signed: the same digest bytes under another hash of that size fail,
                // and HashML-DSA is not pure ML-DSA over the message.
                let other = PreHash.all.first { $0 != ph && $0.outputSize == ph.outputSize }
                if let other { #expect(try !pub.verify(sig, digest: digest, preHash: other, context: ctx), "tcId \(r["tcId"] ?? "?") other hash") }
                #expect(try !pub.verify(sig, message: msg, context: ctx), "tcId \(r["tcId"] ?? "?") as pure")
            }
        }
    }

    /// Every ACVP hash name in the subset maps to a FIPS 204 pre-hash whose PH(M) has the size the
    /// OID table says (SHAKE128: 256 bits, SHAKE256: 512).
    @Test func hashNamesAndSizes() {
        let sizes = ["SHA2-224": 28, "SHA2-256": 32, "SHA2-384": 48, "SHA2-512": 64, "SHA2-512/224": 28, "SHA2-512/256": 32,
                     "SHA3-224": 28, "SHA3-256": 32, "SHA3-384": 48, "SHA3-512": 64, "SHAKE-128": 32, "SHAKE-256": 64]
        for (name, size) in sizes { #expect(Self.preHash(name)?.outputSize == size, "\(name)") }
        #expect(Self.preHash("SHA-1") == nil)
    }
}
