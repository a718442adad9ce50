import CPKCS11
import KeyshareCrypto
@testable import PKCS11
import Testing

/// CKM_EDDSA with CK_EDDSA_PARAMS (issue 29): every RFC 8032 instance the PKCS #11 3.0 §2.3.14
/// table names, against the RFC's own vectors (§7.2 Ed25519ctx, §7.3 Ed25519ph from
/// Tests/Fixtures/vectors/rfc-8032-ed25519ctx-ph.txt; §7.4 Ed448 with a context and §7.5 Ed448ph
/// from AsymmetricVectors.ed448). The keys are the RFC's, given by value: the signatures are
/// deterministic, so each must be the RFC's byte for byte, verify, and fail when altered or
/// checked as another instance. Before issue 29 every one of them was CKR_MECHANISM_PARAM_INVALID
/// at C_SignInit. With an OpenSSL 3.0 engine (`make OPENSSL=system` on Debian 12) they still are.
struct EdDSAInstanceTests {
    struct Vector {
        let name: String
        let curve: ECXCurve
        let prehash: Bool
        let secretKey, publicKey, message, context, signature: [UInt8]
    }

    static var vectors: [Vector] {
        var out: [Vector] = []
        for line in VectorFiles.text("rfc-8032-ed25519ctx-ph.txt").split(separator: "\n") where !line.hasPrefix("#") {
            let f = line.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            guard f.count == 6 else { continue }
            out.append(Vector(name: "\(f[0]) \(out.count + 1)", curve: .ed25519, prehash: f[0] == "Ed25519ph",
                              secretKey: vecHex(f[1]), publicKey: vecHex(f[2]), message: vecHex(f[3]), context: vecHex(f[4]),
                              signature: vecHex(f[5])))
        }
        for v in AsymmetricVectors.ed448 where v.prehash || !v.context.isEmpty {
            out.append(Vector(name: "Ed448 \(v.name)", curve: .ed448, prehash: v.prehash, secretKey: vecHex(v.secretKey),
                              publicKey: vecHex(v.publicKey), message: vecHex(v.message), context: vecHex(v.context),
                              signature: vecHex(v.signature)))
        }
        return out
    }

    func params(prehash: Bool, context: [UInt8]) throws -> Mechanism {
        try AsymmetricVectorTests().eddsaParams(prehash: prehash, context: context)
    }

    func sign(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ m: Mechanism, _ key: CK_OBJECT_HANDLE, _ data: [UInt8]) throws -> [UInt8] {
        try f.rt.signInit(session: s, mechanism: m, key: key)
        guard case .bytes(let b) = try f.rt.sign(session: s, data: data, capacity: 200) else { return [] }
        return b
    }

    @Test func rfc8032Vectors() throws {
        let all = Self.vectors
        #expect(all.count == 8, "4 Ed25519ctx, 1 Ed25519ph, 1 Ed448 with a context, 2 Ed448ph")
        let t = AsymmetricVectorTests()
        let (f, s) = try loggedIn()
        var signed = 0
        for v in all {
            let priv = try t.createPrivate(f, s, type: CKK_EC_EDWARDS, params: v.curve.paramsDER, value: v.secretKey, CKA_SIGN)
            let pub = try t.createPublic(f, s, type: CKK_EC_EDWARDS, params: v.curve.paramsDER, point: ECXCurve.octetString(v.publicKey))
            let m = try params(prehash: v.prehash, context: v.context)
            guard CryptoEngine.hasEdDSAInstances else {
                #expect(rv { try f.rt.signInit(session: s, mechanism: m, key: priv) } == CKR_MECHANISM_PARAM_INVALID, "\(v.name)")
                #expect(rv { try f.rt.verifyInit(session: s, mechanism: m, key: pub) } == CKR_MECHANISM_PARAM_INVALID)
                continue
            }
            #expect(try sign(f, s, m, priv, v.message) == v.signature, "\(v.name)")
            try f.rt.verifyInit(session: s, mechanism: m, key: pub)
            try f.rt.verify(session: s, data: v.message, signature: v.signature)
            var bad = v.signature
            bad[3] ^= 0x10
            try f.rt.verifyInit(session: s, mechanism: m, key: pub)
            #expect(rv { try f.rt.verify(session: s, data: v.message, signature: bad) } == CKR_SIGNATURE_INVALID, "\(v.name)")
            // The same signature is not one of the pure instance, nor of the other flag, nor of another context.
            for other in [Mechanism.eddsa, try params(prehash: !v.prehash, context: v.context.isEmpty ? [1] : v.context),
                          try params(prehash: v.prehash, context: v.context + [0x21])] {
                try f.rt.verifyInit(session: s, mechanism: other, key: pub)
                #expect(rv { try f.rt.verify(session: s, data: v.message, signature: v.signature) } == CKR_SIGNATURE_INVALID,
                        "\(v.name) checked as another instance")
            }
            // Multi-part gives the same signature (the input is buffered, as for pure EdDSA).
            try f.rt.signInit(session: s, mechanism: m, key: priv)
            try f.rt.signUpdate(session: s, part: Array(v.message.prefix(1)))
            try f.rt.signUpdate(session: s, part: Array(v.message.dropFirst(1)))
            guard case .bytes(let multi) = try f.rt.signFinal(session: s, capacity: 200) else { Issue.record("no signature"); continue }
            #expect(multi == v.signature, "\(v.name) multi-part")
            signed += 1
        }
        #expect(signed == (CryptoEngine.hasEdDSAInstances ? 8 : 0))
    }

    /// RFC 8032 §5.1 defines Ed25519ctx with a non-empty context: {phFlag false, empty context} on
    /// an Ed25519 key stays refused (the docs say so); on an Ed448 key it is Ed448 itself.
    @Test func emptyContextRules() throws {
        let (f, s) = try loggedIn()
        let gen = try Mechanism(type: CKM_EC_EDWARDS_KEY_PAIR_GEN, parameter: nil)
        let (pub, ed) = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: [Attribute(CKA_EC_PARAMS, ECXCurve.ed25519.paramsDER)],
                                                 privateTemplate: [.bool(CKA_SIGN, true)])
        #expect(rv { try f.rt.signInit(session: s, mechanism: try params(prehash: false, context: []), key: ed) }
                == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv { try f.rt.verifyInit(session: s, mechanism: try params(prehash: false, context: []), key: pub) }
                == CKR_MECHANISM_PARAM_INVALID)
        guard CryptoEngine.hasEdDSAInstances else { return }
        // Ed25519ph without a context, and with the largest one RFC 8032 allows.
        for ctx in [[UInt8](), [UInt8](repeating: 0x5a, count: 255)] {
            let m = try params(prehash: true, context: ctx)
            let sig = try sign(f, s, m, ed, [1, 2, 3])
            #expect(sig.count == 64)
            try f.rt.verifyInit(session: s, mechanism: m, key: pub)
            try f.rt.verify(session: s, data: [1, 2, 3], signature: sig)
        }
    }
}
