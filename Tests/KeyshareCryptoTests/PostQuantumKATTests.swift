import Foundation
import Testing
import KeyshareCrypto

/// ML-DSA (FIPS 204) and ML-KEM (FIPS 203) against NIST's ACVP vectors (issue 18): a subset of
/// ACVP-Server's internalProjection.json files, cut by Tests/Fixtures/vectors/make_pq_subset.py
/// (source and counts in Tests/Fixtures/vectors/README.md). Skipped where the engine has no
/// post-quantum algorithms (`make OPENSSL=system` on Debian 12); there `unsupportedOnOldEngine` runs.
@Suite struct PostQuantumKATTests {
    struct Vectors: @unchecked Sendable { let json: [String: Any] }
    static let vectors: Vectors = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/vectors/ACVP_PQ_subset.json")
        let data = (try? Data(contentsOf: url)) ?? Data()
        return Vectors(json: ((try? JSONSerialization.jsonObject(with: data)) as? [String: Any]) ?? [:])
    }()

    static func rows(_ kind: String) -> [[String: Any]] { vectors.json[kind] as? [[String: Any]] ?? [] }

    static func hex(_ row: [String: Any], _ key: String) -> [UInt8] {
        let s = Array(((row[key] as? String) ?? "").utf8)
        var out: [UInt8] = []
        out.reserveCapacity(s.count / 2)
        func nib(_ c: UInt8) -> UInt8 { c <= 57 ? c - 48 : (c | 0x20) - 87 }
        var i = 0
        while i + 1 < s.count { out.append(nib(s[i]) << 4 | nib(s[i + 1])); i += 2 }
        return out
    }

    static func dsaSet(_ row: [String: Any]) -> MLDSAParameterSet? { MLDSAParameterSet(name: row["set"] as? String ?? "") }
    static func kemSet(_ row: [String: Any]) -> MLKEMParameterSet? { MLKEMParameterSet(name: row["set"] as? String ?? "") }

    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func mldsaKeyGen() throws {
        let rows = Self.rows("mldsa_keygen")
        #expect(rows.count == 6)
        for r in rows {
            let set = try #require(Self.dsaSet(r))
            let key = try MLDSAKey.generate(set, seed: Self.hex(r, "seed"))
            #expect(try key.publicKeyBytes() == Self.hex(r, "pk"), "keyGen tcId \(r["tcId"] ?? "?") pk")
            #expect(try key.privateKeyBytes() == Self.hex(r, "sk"), "keyGen tcId \(r["tcId"] ?? "?") sk")
        }
    }

    /// ACVP's sigGen (internal interface): deterministic (rnd = 0) and hedged with the given rnd.
    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func mldsaSigGen() throws {
        let rows = Self.rows("mldsa_siggen")
        #expect(rows.count == 9)
        for r in rows {
            let set = try #require(Self.dsaSet(r))
            let key = try MLDSAKey(privateKey: Self.hex(r, "sk"), set)
            let rnd = Self.hex(r, "rnd")
            let sig = try key.sign(Self.hex(r, "message"), deterministic: rnd.isEmpty, encoding: .internal,
                                   testEntropy: rnd.isEmpty ? nil : rnd)
            #expect(sig == Self.hex(r, "signature"), "sigGen tgId \(r["tgId"] ?? "?") tcId \(r["tcId"] ?? "?")")
            #expect(sig.count == set.signatureLength)
        }
    }

    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func mldsaSigVer() throws {
        let rows = Self.rows("mldsa_sigver")
        #expect(rows.count == 12)
        for r in rows {
            let set = try #require(Self.dsaSet(r))
            let key = try MLDSAKey(publicKey: Self.hex(r, "pk"), set)
            let ok = try key.verify(Self.hex(r, "signature"), message: Self.hex(r, "message"), encoding: .internal)
            #expect(ok == (r["passed"] as? Bool), "sigVer tcId \(r["tcId"] ?? "?")")
        }
    }

    /// The external (pure) interface round trip with a context, and what must fail.
    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func mldsaPureWithContext() throws {
        for set in MLDSAParameterSet.allCases {
            let key = try MLDSAKey.generate(set)
            let pub = try MLDSAKey(publicKey: key.publicKeyBytes(), set)
            let msg = Array("keyshare".utf8), ctx = Array("issue 18".utf8)
            let sig = try key.sign(msg, context: ctx)
            #expect(sig.count == set.signatureLength)
            #expect(try pub.verify(sig, message: msg, context: ctx))
            #expect(try !pub.verify(sig, message: msg), "another context must not verify")
            #expect(try !pub.verify(sig, message: msg + [0], context: ctx))
            #expect(try !pub.verify(Array(sig.dropLast()), message: msg, context: ctx))
            #expect(try key.sign(msg, context: ctx, deterministic: true) == key.sign(msg, context: ctx, deterministic: true))
            #expect(throws: CryptoError.self) { try key.sign(msg, context: [UInt8](repeating: 1, count: 256)) }
            #expect(throws: CryptoError.self) { try pub.sign(msg) }
        }
        #expect(throws: CryptoError.self) { try MLDSAKey(publicKey: [1, 2, 3], .mlDSA65) }
        #expect(throws: CryptoError.self) { try MLDSAKey.generate(.mlDSA44, seed: [0]) }
    }

    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func mlkemKeyGen() throws {
        let rows = Self.rows("mlkem_keygen")
        #expect(rows.count == 6)
        for r in rows {
            let set = try #require(Self.kemSet(r))
            let key = try MLKEMKey.generate(set, seed: Self.hex(r, "d") + Self.hex(r, "z"))
            #expect(try key.encapsulationKeyBytes() == Self.hex(r, "ek"), "keyGen tcId \(r["tcId"] ?? "?") ek")
            #expect(try key.decapsulationKeyBytes() == Self.hex(r, "dk"), "keyGen tcId \(r["tcId"] ?? "?") dk")
        }
    }

    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func mlkemEncapsulation() throws {
        let rows = Self.rows("mlkem_encap")
        #expect(rows.count == 6)
        for r in rows {
            let set = try #require(Self.kemSet(r))
            let key = try MLKEMKey(encapsulationKey: Self.hex(r, "ek"), set)
            let (c, k) = try key.encapsulate(testEntropy: Self.hex(r, "m"))
            #expect(c == Self.hex(r, "c"), "encap tcId \(r["tcId"] ?? "?") c")
            #expect(k == Self.hex(r, "k"), "encap tcId \(r["tcId"] ?? "?") k")
        }
    }

    /// Includes ACVP's modified ciphertexts: those give the implicit-rejection secret, not an error.
    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func mlkemDecapsulation() throws {
        let rows = Self.rows("mlkem_decap")
        #expect(rows.count == 9)
        for r in rows {
            let set = try #require(Self.kemSet(r))
            let key = try MLKEMKey(decapsulationKey: Self.hex(r, "dk"), set)
            #expect(try key.decapsulate(Self.hex(r, "c")) == Self.hex(r, "k"), "decap tcId \(r["tcId"] ?? "?")")
        }
    }

    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func mlkemRoundTripAndBadInput() throws {
        for set in MLKEMParameterSet.allCases {
            let key = try MLKEMKey.generate(set)
            let pub = try MLKEMKey(encapsulationKey: key.encapsulationKeyBytes(), set)
            let (c, k) = try pub.encapsulate()
            #expect(c.count == set.ciphertextLength && k.count == MLKEMParameterSet.sharedSecretLength)
            #expect(try key.decapsulate(c) == k)
            #expect(throws: CryptoError.self) { try key.decapsulate(Array(c.dropLast())) }
            #expect(throws: CryptoError.self) { try pub.decapsulate(c) }
        }
    }

    /// The parked contexts (MLKEMKey: one initialised EVP_PKEY_CTX per direction kept between
    /// calls): a known-answer encapsulation after random ones still gives the vector (its m is
    /// not left in a parked context, nor taken from one), random ones after it differ, the
    /// buffer entry points agree with the array ones, and one key shared by concurrent callers
    /// round-trips every time.
    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func mlkemParkedContexts() async throws {
        let r = try #require(Self.rows("mlkem_encap").first { Self.kemSet($0) == .mlKEM768 })
        let pub = try MLKEMKey(encapsulationKey: Self.hex(r, "ek"), .mlKEM768)
        let (c0, k0) = try pub.encapsulate()
        for _ in 0..<2 {
            let (c, k) = try pub.encapsulate(testEntropy: Self.hex(r, "m"))
            #expect(c == Self.hex(r, "c") && k == Self.hex(r, "k"))
        }
        let (c1, k1) = try pub.encapsulate()
        #expect(c1 != c0 && k1 != k0 && c1 != Self.hex(r, "c"))

        let key = try MLKEMKey.generate(.mlKEM768)
        var ct = [UInt8](repeating: 0, count: 1088)
        let short = try ct.withUnsafeMutableBytes { try key.encapsulate(into: $0, secretLength: 16) }
        let whole = try key.decapsulate(ct)
        #expect(short.count == 16 && Array(whole.prefix(16)) == short)
        #expect(try ct.withUnsafeBytes { try key.decapsulate($0, secretLength: 24) } == Array(whole.prefix(24)))
        #expect(throws: CryptoError.self) { try ct.withUnsafeMutableBytes { try key.encapsulate(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<1087]), secretLength: 32) } }
        #expect(throws: CryptoError.self) { try ct.withUnsafeBytes { try key.decapsulate($0, secretLength: 33) } }

        try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<25 {
                        let (c, k) = try key.encapsulate()
                        guard try key.decapsulate(c) == k else { return false }
                    }
                    return true
                }
            }
            for try await ok in group { #expect(ok) }
        }
    }

    /// On an engine without them (Debian 12's 3.0): a clear `.unsupported`, nothing else.
    @Test(.enabled(if: !CryptoEngine.hasPostQuantum)) func unsupportedOnOldEngine() {
        #expect { try MLDSAKey.generate(.mlDSA65) } throws: { ($0 as? CryptoError)?.kind == .unsupported }
        #expect { try MLKEMKey.generate(.mlKEM768) } throws: { ($0 as? CryptoError)?.kind == .unsupported }
    }
}
