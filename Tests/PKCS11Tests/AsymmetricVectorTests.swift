import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// The asymmetric additions of issue 13 against published vectors, through
/// the Runtime (the C layer adds only argument decoding): keys given by
/// value with C_CreateObject, then C_Sign / C_Verify / C_DeriveKey, and the
/// answers compared with the RFC's or NIST's.
struct AsymmetricVectorTests {
    func bytes(_ r: OutputResult) -> [UInt8] {
        if case .bytes(let b) = r { return b }
        Issue.record("expected bytes, got \(r)")
        return []
    }

    func value(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ h: CK_OBJECT_HANDLE, _ t: CK_ATTRIBUTE_TYPE) throws -> [UInt8] {
        guard case .value(let v) = try f.rt.getAttributeValue(session: s, object: h, types: [t])[0] else {
            Issue.record("no value for 0x\(String(t, radix: 16))")
            return []
        }
        return v
    }

    func eddsaParams(prehash: Bool, context: [UInt8]) throws -> Mechanism {
        var ctx = context
        return try ctx.withUnsafeMutableBufferPointer { c in
            var p = CK_EDDSA_PARAMS(phFlag: prehash ? 1 : 0, ulContextDataLen: CK_ULONG(c.count),
                                    pContextData: c.count == 0 ? nil : c.baseAddress)
            return try withUnsafeBytes(of: &p) { try Mechanism(type: CKM_EDDSA, parameter: $0) }
        }
    }

    func ecdh(_ type: CK_MECHANISM_TYPE, peer: [UInt8]) throws -> Mechanism {
        var pt = peer
        return try pt.withUnsafeMutableBufferPointer { b in
            var p = CK_ECDH1_DERIVE_PARAMS(kdf: CK_ULONG(CKD_NULL), ulSharedDataLen: 0, pSharedData: nil,
                                           ulPublicDataLen: CK_ULONG(b.count), pPublicData: b.baseAddress)
            return try withUnsafeBytes(of: &p) { try Mechanism(type: type, parameter: $0) }
        }
    }

    /// C_DeriveKey to a readable generic secret; its value.
    func derive(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ m: Mechanism, base: CK_OBJECT_HANDLE) throws -> [UInt8] {
        let k = try f.rt.deriveKey(session: s, mechanism: m, baseKey: base, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET), .bool(CKA_SENSITIVE, false),
            .bool(CKA_EXTRACTABLE, true)])
        return try value(f, s, k, CKA_VALUE)
    }

    func createPrivate(_ f: Fixture, _ s: CK_SESSION_HANDLE, type: CK_KEY_TYPE, params: [UInt8], value: [UInt8],
                       _ usage: CK_ATTRIBUTE_TYPE) throws -> CK_OBJECT_HANDLE {
        try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_PRIVATE_KEY), .ulong(CKA_KEY_TYPE, type), Attribute(CKA_EC_PARAMS, params),
            Attribute(CKA_VALUE, value), .bool(usage, true)])
    }

    func createPublic(_ f: Fixture, _ s: CK_SESSION_HANDLE, type: CK_KEY_TYPE, params: [UInt8], point: [UInt8])
        throws -> CK_OBJECT_HANDLE {
        try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_PUBLIC_KEY), .ulong(CKA_KEY_TYPE, type), Attribute(CKA_EC_PARAMS, params),
            Attribute(CKA_EC_POINT, point), .bool(CKA_VERIFY, true)])
    }

    /// DER PrintableString, the curve-name form of CKA_EC_PARAMS.
    func printable(_ name: String) -> [UInt8] { [0x13, UInt8(name.utf8.count)] + Array(name.utf8) }

    // MARK: - Ed448 (RFC 8032 §7.4, §7.5)

    /// The 8 pure Ed448 vectors sign to the RFC's signatures from the RFC's
    /// secret keys (Ed448 is deterministic) and verify with its public keys;
    /// the context and Ed448ph vectors are EdDSAInstanceTests' (issue 29),
    /// refused only with an OpenSSL 3.0 engine (CKR_MECHANISM_PARAM_INVALID).
    @Test func ed448RFC8032() throws {
        let (f, s) = try loggedIn()
        var signed = 0, refused = 0
        for v in AsymmetricVectors.ed448 {
            let sk = vecHex(v.secretKey), pk = vecHex(v.publicKey), msg = vecHex(v.message), sig = vecHex(v.signature)
            // Alternate the OID and the curve name as CKA_EC_PARAMS.
            let params = signed % 2 == 0 ? ECXCurve.ed448.paramsDER : printable("edwards448")
            let priv = try createPrivate(f, s, type: CKK_EC_EDWARDS, params: params, value: sk, CKA_SIGN)
            let pub = try createPublic(f, s, type: CKK_EC_EDWARDS, params: params, point: ECXCurve.octetString(pk))
            // The private key's own public half is the RFC's public key.
            #expect(Array(try value(f, s, priv, CKA_PUBLIC_KEY_INFO).suffix(57)) == pk, "\(v.name)")
            #expect(try value(f, s, pub, CKA_EC_POINT) == ECXCurve.octetString(pk))
            #expect(try value(f, s, priv, CKA_EC_PARAMS) == ECXCurve.ed448.paramsDER)
            if v.prehash || !v.context.isEmpty {
                refused += 1
                if CryptoEngine.hasEdDSAInstances { continue }
                let m = try eddsaParams(prehash: v.prehash, context: vecHex(v.context))
                #expect(rv { try f.rt.signInit(session: s, mechanism: m, key: priv) } == CKR_MECHANISM_PARAM_INVALID, "\(v.name)")
                #expect(rv { try f.rt.verifyInit(session: s, mechanism: m, key: pub) } == CKR_MECHANISM_PARAM_INVALID)
                continue
            }
            for m in [Mechanism.eddsa, try eddsaParams(prehash: false, context: [])] {
                try f.rt.signInit(session: s, mechanism: m, key: priv)
                #expect(try f.rt.sign(session: s, data: msg, capacity: nil) == .length(114))
                #expect(bytes(try f.rt.sign(session: s, data: msg, capacity: 114)) == sig, "\(v.name)")
                try f.rt.verifyInit(session: s, mechanism: m, key: pub)
                try f.rt.verify(session: s, data: msg, signature: sig)
            }
            var bad = sig
            bad[5] ^= 0x01
            try f.rt.verifyInit(session: s, mechanism: .eddsa, key: pub)
            #expect(rv { try f.rt.verify(session: s, data: msg, signature: bad) } == CKR_SIGNATURE_INVALID)
            signed += 1
        }
        #expect(signed == 8 && refused == 3)
    }

    /// Ed25519ctx with an empty context is refused (RFC 8032 §5.1), Ed25519ctx
    /// with one and Ed25519ph only by an OpenSSL 3.0 engine (EdDSAInstanceTests),
    /// and malformed parameters never reach a key.
    @Test func eddsaParameterRules() throws {
        let (f, s) = try loggedIn()
        let (_, ed) = try f.rt.generateKeyPair(
            session: s, mechanism: try Mechanism(type: CKM_EC_EDWARDS_KEY_PAIR_GEN, parameter: nil),
            publicTemplate: [Attribute(CKA_EC_PARAMS, ECXCurve.ed25519.paramsDER)], privateTemplate: [.bool(CKA_SIGN, true)])
        for (ph, ctx) in [(false, [UInt8]()), (false, Array("foo".utf8)), (true, [])] {
            let refused = ctx.isEmpty && !ph || !CryptoEngine.hasEdDSAInstances
            #expect(rv {
                try f.rt.signInit(session: s, mechanism: try eddsaParams(prehash: ph, context: ctx), key: ed)
                _ = try f.rt.sign(session: s, data: [1], capacity: 64)
            } == (refused ? CKR_MECHANISM_PARAM_INVALID : CKR_OK))
        }
        // A wrong size, a NULL context with a length, a context over RFC 8032's 255 bytes.
        #expect(rv { _ = try [UInt8](repeating: 0, count: 3).withUnsafeBytes { try Mechanism(type: CKM_EDDSA, parameter: $0) } }
                == CKR_MECHANISM_PARAM_INVALID)
        var p = CK_EDDSA_PARAMS(phFlag: 0, ulContextDataLen: 4, pContextData: nil)
        #expect(rv { _ = try withUnsafeBytes(of: &p) { try Mechanism(type: CKM_EDDSA, parameter: $0) } } == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv { _ = try eddsaParams(prehash: false, context: [UInt8](repeating: 1, count: 256)) } == CKR_MECHANISM_PARAM_INVALID)
        // An Ed448 key made here signs 114 bytes; an Ed25519 one still 64.
        let (pub448, priv448) = try f.rt.generateKeyPair(
            session: s, mechanism: try Mechanism(type: CKM_EC_EDWARDS_KEY_PAIR_GEN, parameter: nil),
            publicTemplate: [Attribute(CKA_EC_PARAMS, printable("Ed448"))], privateTemplate: [.bool(CKA_SIGN, true)])
        try f.rt.signInit(session: s, mechanism: .eddsa, key: priv448)
        let sig = bytes(try f.rt.sign(session: s, data: [1, 2, 3], capacity: 200))
        #expect(sig.count == 114)
        try f.rt.verifyInit(session: s, mechanism: .eddsa, key: pub448)
        try f.rt.verify(session: s, data: [1, 2, 3], signature: sig)
        #expect(try value(f, s, pub448, CKA_EC_PARAMS) == ECXCurve.ed448.paramsDER)
        #expect(try value(f, s, pub448, CKA_EC_POINT).count == 59)
        // ECDSA on an Edwards key, EdDSA on an EC key: the wrong family.
        #expect(rv { try f.rt.signInit(session: s, mechanism: .ecdsa, key: priv448) } == CKR_KEY_TYPE_INCONSISTENT)
    }

    // MARK: - X25519 / X448 (RFC 7748)

    /// Every RFC 7748 scalar multiplication through C_DeriveKey (CKD_NULL),
    /// with the peer's u-coordinate raw and in an OCTET STRING, by
    /// CKM_ECDH1_DERIVE and CKM_ECDH1_COFACTOR_DERIVE; the §6 key pairs'
    /// public keys come out of the private keys.
    @Test func montgomeryRFC7748() throws {
        let (f, s) = try loggedIn()
        var n = 0
        for (curve, vectors) in [(ECXCurve.x25519, AsymmetricVectors.x25519), (.x448, AsymmetricVectors.x448)] {
            for v in vectors {
                let priv = try createPrivate(f, s, type: CKK_EC_MONTGOMERY, params: curve.paramsDER, value: vecHex(v.scalar),
                                             CKA_DERIVE)
                let u = vecHex(v.u)
                #expect(try derive(f, s, try ecdh(CKM_ECDH1_DERIVE, peer: u), base: priv) == vecHex(v.output))
                #expect(try derive(f, s, try ecdh(CKM_ECDH1_DERIVE, peer: ECXCurve.octetString(u)), base: priv)
                        == vecHex(v.output))
                #expect(try derive(f, s, try ecdh(CKM_ECDH1_COFACTOR_DERIVE, peer: u), base: priv) == vecHex(v.output))
                n += 1
            }
        }
        #expect(n == 8)
        for (curve, pairs) in [(ECXCurve.x25519, AsymmetricVectors.x25519PublicKeys), (.x448, AsymmetricVectors.x448PublicKeys)] {
            for (sk, pk) in pairs {
                let priv = try createPrivate(f, s, type: CKK_EC_MONTGOMERY, params: curve.paramsDER, value: vecHex(sk), CKA_DERIVE)
                #expect(Array(try value(f, s, priv, CKA_PUBLIC_KEY_INFO).suffix(curve.keyLength)) == vecHex(pk))
                let pub = try createPublic(f, s, type: CKK_EC_MONTGOMERY, params: curve.paramsDER, point: vecHex(pk))
                #expect(try value(f, s, pub, CKA_EC_POINT) == ECXCurve.octetString(vecHex(pk)))
            }
        }
        // A small-order peer (u = 0) gives the all-zero secret: refused.
        let priv = try createPrivate(f, s, type: CKK_EC_MONTGOMERY, params: ECXCurve.x25519.paramsDER,
                                     value: vecHex(AsymmetricVectors.x25519[0].scalar), CKA_DERIVE)
        #expect(rv { _ = try derive(f, s, try ecdh(CKM_ECDH1_DERIVE, peer: [UInt8](repeating: 0, count: 32)), base: priv) }
                == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv { _ = try derive(f, s, try ecdh(CKM_ECDH1_DERIVE, peer: [1, 2, 3]), base: priv) } == CKR_MECHANISM_PARAM_INVALID)
        // An X25519 key does not sign, an Edwards OID is no Montgomery curve.
        #expect(rv { try f.rt.signInit(session: s, mechanism: .eddsa, key: priv) } == CKR_KEY_FUNCTION_NOT_PERMITTED)
        #expect(rv { _ = try createPrivate(f, s, type: CKK_EC_MONTGOMERY, params: ECXCurve.ed25519.paramsDER,
                                           value: [UInt8](repeating: 1, count: 32), CKA_DERIVE) } == CKR_CURVE_NOT_SUPPORTED)
    }

    /// CKM_EC_MONTGOMERY_KEY_PAIR_GEN: both curves by OID and by name, and
    /// two generated pairs agree.
    @Test func montgomeryGeneration() throws {
        let (f, s) = try loggedIn()
        let gen = try Mechanism(type: CKM_EC_MONTGOMERY_KEY_PAIR_GEN, parameter: nil)
        for (curve, name) in [(ECXCurve.x25519, "curve25519"), (.x448, "X448")] {
            let (aPub, a) = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: [Attribute(CKA_EC_PARAMS, curve.paramsDER)],
                                                     privateTemplate: [.bool(CKA_DERIVE, true)])
            let (bPub, b) = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: [Attribute(CKA_EC_PARAMS, printable(name))],
                                                     privateTemplate: [.bool(CKA_DERIVE, true)])
            #expect(try value(f, s, a, CKA_KEY_TYPE) == ulong(CKK_EC_MONTGOMERY))
            #expect(try value(f, s, a, CKA_KEY_GEN_MECHANISM) == ulong(CKM_EC_MONTGOMERY_KEY_PAIR_GEN))
            #expect(try value(f, s, bPub, CKA_EC_PARAMS) == curve.paramsDER)
            let ab = try derive(f, s, try ecdh(CKM_ECDH1_DERIVE, peer: try value(f, s, bPub, CKA_EC_POINT)), base: a)
            let ba = try derive(f, s, try ecdh(CKM_ECDH1_DERIVE, peer: try value(f, s, aPub, CKA_EC_POINT)), base: b)
            #expect(ab == ba && ab.count == curve.keyLength)
        }
        #expect(rv { _ = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: [Attribute(CKA_EC_PARAMS, ECXCurve.ed448.paramsDER)],
                                                  privateTemplate: []) } == CKR_CURVE_NOT_SUPPORTED)
        // OpenSC 0.23's pkcs11-tool sends "curve25519" with a length byte of 11: that exact string is X25519;
        // other malformed names are not.
        let openSC: [UInt8] = [0x13, 0x0B] + Array("curve25519".utf8)
        let (q, _) = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: [Attribute(CKA_EC_PARAMS, openSC)],
                                              privateTemplate: [.bool(CKA_DERIVE, true)])
        #expect(try value(f, s, q, CKA_EC_PARAMS) == ECXCurve.x25519.paramsDER)
        #expect(rv { _ = try f.rt.generateKeyPair(session: s, mechanism: gen,
                                                  publicTemplate: [Attribute(CKA_EC_PARAMS, [0x13, 0x09] + Array("curve448".utf8))],
                                                  privateTemplate: []) } == CKR_CURVE_NOT_SUPPORTED)
        #expect(rv { _ = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: [], privateTemplate: []) }
                == CKR_TEMPLATE_INCOMPLETE)
    }

    // MARK: - brainpool (RFC 7027 / RFC 8734 Appendix A), secp256k1

    /// Both parties' keys by value: each private key's public point is the
    /// RFC's, and C_DeriveKey from either side gives the RFC's Z; the keys
    /// sign and verify ECDSA.
    @Test func brainpoolRFC7027() throws {
        let (f, s) = try loggedIn()
        for v in AsymmetricVectors.brainpool {
            guard let curve = ECCurve(rawValue: v.curve) else { Issue.record("no curve \(v.curve)"); continue }
            let a = try createPrivate(f, s, type: CKK_EC, params: curve.paramsDER, value: vecHex(v.dA), CKA_DERIVE)
            let b = try createPrivate(f, s, type: CKK_EC, params: printable(v.curve), value: vecHex(v.dB), CKA_DERIVE)
            let qa = [0x04] + vecHex(v.xA) + vecHex(v.yA), qb = [0x04] + vecHex(v.xB) + vecHex(v.yB)
            #expect(Array(try value(f, s, a, CKA_PUBLIC_KEY_INFO).suffix(qa.count)) == qa)
            #expect(Array(try value(f, s, b, CKA_PUBLIC_KEY_INFO).suffix(qb.count)) == qb)
            #expect(try value(f, s, b, CKA_EC_PARAMS) == curve.paramsDER)
            #expect(try derive(f, s, try ecdh(CKM_ECDH1_DERIVE, peer: qb), base: a) == vecHex(v.z))
            #expect(try derive(f, s, try ecdh(CKM_ECDH1_COFACTOR_DERIVE, peer: ECXCurve.octetString(qa)), base: b) == vecHex(v.z))
            // ECDSA with the same key: a signature the public key object verifies.
            let signer = try createPrivate(f, s, type: CKK_EC, params: curve.paramsDER, value: vecHex(v.dA), CKA_SIGN)
            let pub = try createPublic(f, s, type: CKK_EC, params: curve.paramsDER, point: ECXCurve.octetString(qa))
            try f.rt.signInit(session: s, mechanism: .ecdsaWith(.sha256), key: signer)
            let sig = bytes(try f.rt.sign(session: s, data: [7, 7], capacity: 2 * curve.byteSize))
            #expect(sig.count == 2 * curve.byteSize)
            try f.rt.verifyInit(session: s, mechanism: .ecdsaWith(.sha256), key: pub)
            try f.rt.verify(session: s, data: [7, 7], signature: sig)
        }
    }

    /// k·G for known k: the created key's public point is the published
    /// one, ECDH of 2 with 3·G is 6·G's x, and ECDSA verifies with the
    /// published point.
    @Test func secp256k1KnownKeys() throws {
        let (f, s) = try loggedIn()
        let params = ECCurve.secp256k1.paramsDER
        func scalar(_ k: Int) -> [UInt8] { [UInt8](repeating: 0, count: 31) + [UInt8(k)] }
        var points: [Int: [UInt8]] = [:]
        for (k, x, y) in AsymmetricVectors.secp256k1Multiples {
            let q = [0x04] + vecHex(x) + vecHex(y)
            points[k] = q
            let priv = try createPrivate(f, s, type: CKK_EC, params: k == 1 ? printable("secp256k1") : params,
                                         value: scalar(k), CKA_SIGN)
            #expect(Array(try value(f, s, priv, CKA_PUBLIC_KEY_INFO).suffix(65)) == q, "k=\(k)")
            let pub = try createPublic(f, s, type: CKK_EC, params: params, point: q)
            try f.rt.signInit(session: s, mechanism: .ecdsaWith(.sha256), key: priv)
            let sig = bytes(try f.rt.sign(session: s, data: [UInt8(k)], capacity: 64))
            try f.rt.verifyInit(session: s, mechanism: .ecdsaWith(.sha256), key: pub)
            try f.rt.verify(session: s, data: [UInt8(k)], signature: sig)
        }
        let two = try createPrivate(f, s, type: CKK_EC, params: params, value: scalar(2), CKA_DERIVE)
        guard let g3 = points[3], let g6 = points[6] else { Issue.record("vectors"); return }
        #expect(try derive(f, s, try ecdh(CKM_ECDH1_DERIVE, peer: g3), base: two) == Array(g6[1...32]))
        // A point off the curve is refused at creation.
        var off = g3
        off[64] ^= 1
        #expect(rv { _ = try createPublic(f, s, type: CKK_EC, params: params, point: off) } == CKR_ATTRIBUTE_VALUE_INVALID)
    }

    /// CKA_EC_PARAMS as explicit ECParameters of a named curve (python-pkcs11's
    /// test_import_key_params; SoftHSM2 takes them): the key is created, its
    /// CKA_EC_PARAMS reads back byte for byte as given, and it verifies a
    /// signature of the same key made under the named-curve OID. Before:
    /// CKR_CURVE_NOT_SUPPORTED.
    @Test func explicitCurveParameters() throws {
        let (f, s) = try loggedIn()
        let explicit = try #require(Self.explicitP256)
        func scalar(_ k: Int) -> [UInt8] { [UInt8](repeating: 0, count: 31) + [UInt8(k)] }
        let priv = try createPrivate(f, s, type: CKK_EC, params: ECCurve.p256.paramsDER, value: scalar(7), CKA_SIGN)
        let q = Array(try value(f, s, priv, CKA_PUBLIC_KEY_INFO).suffix(65))
        let pub = try createPublic(f, s, type: CKK_EC, params: explicit, point: [0x04, 0x41] + q)
        #expect(try value(f, s, pub, CKA_EC_PARAMS) == explicit)
        try f.rt.signInit(session: s, mechanism: .ecdsaWith(.sha256), key: priv)
        let sig = bytes(try f.rt.sign(session: s, data: [7], capacity: 64))
        try f.rt.verifyInit(session: s, mechanism: .ecdsaWith(.sha256), key: pub)
        try f.rt.verify(session: s, data: [7], signature: sig)
        // A set of parameters that is no named curve stays refused.
        var other = explicit
        other[other.count - 40] ^= 1
        #expect(rv { _ = try createPublic(f, s, type: CKK_EC, params: other, point: [0x04, 0x41] + q) } == CKR_CURVE_NOT_SUPPORTED)
    }

    /// `openssl ecparam -name prime256v1 -param_enc explicit -outform DER`.
    static let explicitP256: [UInt8]? = {
        let h = "3081f7020101302c06072a8648ce3d0101022100ffffffff00000001000000000000000000000000ffffffffffffffffffffffff"
            + "305b0420ffffffff00000001000000000000000000000000fffffffffffffffffffffffc04205ac635d8aa3a93e7b3ebbd557698"
            + "86bc651d06b0cc53b0f63bce3c3e27d2604b031500c49d360886e704936a6678e1139d26b7819f7e900441046b17d1f2e12c4247"
            + "f8bce6e563a440f277037d812deb33a0f4a13945d898c2964fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb64068"
            + "37bf51f5022100ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551020101"
        let c = Array(h.utf8)
        return stride(from: 0, to: c.count, by: 2).map { UInt8(String(decoding: c[$0..<$0 + 2], as: UTF8.self), radix: 16) ?? 0 }
    }()

    // MARK: - P-192 / P-224 (NIST CAVP)

    /// The 30 FIPS 186-2 SigGen signatures verify with CKM_ECDSA_SHA1 over
    /// the message and with CKM_ECDSA over its SHA-1; each altered one fails.
    @Test func nistP192P224Signatures() throws {
        let (f, s) = try loggedIn()
        var verified = 0
        for v in AsymmetricVectors.nistECDSA {
            let curve: ECCurve = v.curve == "P-192" ? .p192 : .p224
            let pub = try createPublic(f, s, type: CKK_EC, params: curve.paramsDER,
                                       point: [0x04] + vecHex(v.qx) + vecHex(v.qy))
            let msg = vecHex(v.msg), sig = vecHex(v.r) + vecHex(v.s)
            #expect(sig.count == 2 * curve.byteSize)
            try f.rt.verifyInit(session: s, mechanism: .ecdsaWith(.sha1), key: pub)
            try f.rt.verify(session: s, data: msg, signature: sig)
            try f.rt.verifyInit(session: s, mechanism: .ecdsa, key: pub)
            try f.rt.verify(session: s, data: DigestAlgorithm.sha1.hash(msg), signature: sig)
            var bad = sig
            bad[bad.count - 1] ^= 0x01
            try f.rt.verifyInit(session: s, mechanism: .ecdsaWith(.sha1), key: pub)
            #expect(rv { try f.rt.verify(session: s, data: msg, signature: bad) } == CKR_SIGNATURE_INVALID)
            verified += 1
        }
        #expect(verified == 30)
    }

    // MARK: - generation, sizes

    /// Every new curve generates, signs (r||s of twice the field bytes) and
    /// verifies; C_GetMechanismInfo's ranges hold what generation accepts.
    @Test func newCurvesGenerateAndMechanismInfo() throws {
        let (f, s) = try loggedIn()
        let gen = try Mechanism(type: CKM_EC_KEY_PAIR_GEN, parameter: nil)
        let slot = try f.rt.sessionInfo(s).slotID
        let info = try f.rt.mechanismInfo(slot: slot, type: CKM_EC_KEY_PAIR_GEN)
        for c in [ECCurve.p192, .p224, .secp256k1, .brainpoolP256r1, .brainpoolP384r1, .brainpoolP512r1] {
            let (pub, priv) = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: [Attribute(CKA_EC_PARAMS, c.paramsDER)],
                                                       privateTemplate: [.bool(CKA_SIGN, true)])
            #expect((info.minKeySize...info.maxKeySize).contains(CK_ULONG(c.bits)))
            try f.rt.signInit(session: s, mechanism: .ecdsaWith(.sha384), key: priv)
            #expect(try f.rt.sign(session: s, data: [1], capacity: nil) == .length(2 * c.byteSize))
            let sig = bytes(try f.rt.sign(session: s, data: [1], capacity: 200))
            try f.rt.verifyInit(session: s, mechanism: .ecdsaWith(.sha384), key: pub)
            try f.rt.verify(session: s, data: [1], signature: sig)
        }
        #expect(info.minKeySize == 192 && info.maxKeySize == 521)
        for (t, lo, hi) in [(CKM_ECDSA, 192, 521), (CKM_ECDH1_DERIVE, 192, 521), (CKM_ECDH1_COFACTOR_DERIVE, 192, 521),
                            (CKM_EC_EDWARDS_KEY_PAIR_GEN, 256, 456), (CKM_EDDSA, 256, 456),
                            (CKM_EC_MONTGOMERY_KEY_PAIR_GEN, 256, 448)] as [(CK_MECHANISM_TYPE, CK_ULONG, CK_ULONG)] {
            let i = try f.rt.mechanismInfo(slot: slot, type: t)
            #expect(i.minKeySize == lo && i.maxKeySize == hi, "0x\(String(t, radix: 16))")
        }
        let rsa = try f.rt.mechanismInfo(slot: slot, type: CKM_RSA_PKCS)
        #expect(rsa.flags & (CKF_SIGN_RECOVER | CKF_VERIFY_RECOVER | CKF_WRAP | CKF_UNWRAP)
                == CKF_SIGN_RECOVER | CKF_VERIFY_RECOVER | CKF_WRAP | CKF_UNWRAP)
        #expect(try f.rt.mechanismInfo(slot: slot, type: CKM_RSA_AES_KEY_WRAP).flags == CKF_WRAP | CKF_UNWRAP)
        // Explicit curve parameters and unknown OIDs stay unsupported.
        #expect(rv { _ = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: [Attribute(CKA_EC_PARAMS, [0x05, 0x00])],
                                                  privateTemplate: []) } == CKR_CURVE_NOT_SUPPORTED)
        #expect(rv { _ = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: [Attribute(CKA_EC_PARAMS, printable("secp160r1"))],
                                                  privateTemplate: []) } == CKR_CURVE_NOT_SUPPORTED)
    }
}

/// Hex to bytes, ignoring whitespace and line breaks (the vectors are wrapped).
func vecHex(_ s: String) -> [UInt8] {
    let digits = Array(s.unicodeScalars.compactMap { c -> UInt8? in
        switch c.value {
        case 0x30...0x39: UInt8(c.value - 0x30)
        case 0x41...0x46: UInt8(c.value - 0x41 + 10)
        case 0x61...0x66: UInt8(c.value - 0x61 + 10)
        default: nil
        }
    })
    return stride(from: 0, to: digits.count - 1, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }
}
