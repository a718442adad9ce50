import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// RSA sign/verify recover and RSA wrapping (CKM_RSA_PKCS, CKM_RSA_PKCS_OAEP,
/// CKM_RSA_AES_KEY_WRAP) through the Runtime, with their policy and error answers.
struct RSARecoverWrapTests {
    func bytes(_ r: OutputResult) -> [UInt8] {
        if case .bytes(let b) = r { return b }
        Issue.record("expected bytes, got \(r)")
        return []
    }

    func rsaPair(_ f: Fixture, _ s: CK_SESSION_HANDLE, pub: Template = [], priv: Template = [])
        throws -> (CK_OBJECT_HANDLE, CK_OBJECT_HANDLE) {
        try f.rt.generateKeyPair(session: s, mechanism: try Mechanism(type: CKM_RSA_PKCS_KEY_PAIR_GEN, parameter: nil),
                                 publicTemplate: [.ulong(CKA_MODULUS_BITS, 1024)] + pub, privateTemplate: priv)
    }

    func oaep(_ d: CK_MECHANISM_TYPE = CKM_SHA256, _ mgf: CK_ULONG = CK_ULONG(CKG_MGF1_SHA256)) -> CK_RSA_PKCS_OAEP_PARAMS {
        CK_RSA_PKCS_OAEP_PARAMS(hashAlg: d, mgf: mgf, source: 0, pSourceData: nil, ulSourceDataLen: 0)
    }

    func oaepMechanism() throws -> Mechanism {
        var p = oaep()
        return try withUnsafeBytes(of: &p) { try Mechanism(type: CKM_RSA_PKCS_OAEP, parameter: $0) }
    }

    func rsaAES(bits: CK_ULONG = 256) throws -> Mechanism {
        var o = oaep()
        return try withUnsafeMutablePointer(to: &o) { op in
            var p = CK_RSA_AES_KEY_WRAP_PARAMS(ulAESKeyBits: bits, pOAEPParams: op)
            return try withUnsafeBytes(of: &p) { try Mechanism(type: CKM_RSA_AES_KEY_WRAP, parameter: $0) }
        }
    }

    func aes(_ f: Fixture, _ s: CK_SESSION_HANDLE, value: [UInt8], sensitive: Bool) throws -> CK_OBJECT_HANDLE {
        try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), Attribute(CKA_VALUE, value),
            .bool(CKA_SENSITIVE, sensitive), .bool(CKA_EXTRACTABLE, true), .bool(CKA_WRAP, false), .bool(CKA_UNWRAP, false)])
    }

    /// AES-CBC of one zero block: equal for two keys exactly when their values are.
    func fingerprint(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ k: CK_OBJECT_HANDLE) throws -> [UInt8] {
        try f.rt.encryptInit(session: s, mechanism: .aesCBC(iv: [UInt8](repeating: 0, count: 16), pad: false), key: k)
        return bytes(try f.rt.encrypt(session: s, data: [UInt8](repeating: 0, count: 16), capacity: 16))
    }

    // MARK: - recovery

    @Test func signRecoverAndVerifyRecover() throws {
        let (f, s) = try loggedIn()
        let (pub, priv) = try rsaPair(f, s, pub: [.bool(CKA_VERIFY_RECOVER, true)],
                                      priv: [.bool(CKA_SIGN_RECOVER, true), .bool(CKA_SIGN, true)])
        let data = Array("recover me".utf8)
        try f.rt.signRecoverInit(session: s, mechanism: .rsaPKCS, key: priv)
        #expect(rv { try f.rt.signRecoverInit(session: s, mechanism: .rsaPKCS, key: priv) } == CKR_OPERATION_ACTIVE)
        #expect(try f.rt.signRecover(session: s, data: data, capacity: nil) == .length(128))
        #expect(try f.rt.signRecover(session: s, data: data, capacity: 10) == .tooSmall(128))
        let sig = bytes(try f.rt.signRecover(session: s, data: data, capacity: 128))
        #expect(rv { _ = try f.rt.signRecover(session: s, data: data, capacity: 128) } == CKR_OPERATION_NOT_INITIALIZED)
        // The same PKCS #1 v1.5 signature C_Sign makes (the scheme is deterministic).
        try f.rt.signInit(session: s, mechanism: .rsaPKCS, key: priv)
        #expect(bytes(try f.rt.sign(session: s, data: data, capacity: 128)) == sig)

        try f.rt.verifyRecoverInit(session: s, mechanism: .rsaPKCS, key: pub)
        #expect(try f.rt.verifyRecover(session: s, signature: sig, capacity: nil) == .length(128))
        #expect(try f.rt.verifyRecover(session: s, signature: sig, capacity: 3) == .tooSmall(data.count))
        #expect(bytes(try f.rt.verifyRecover(session: s, signature: sig, capacity: 128)) == data)
        // A bad signature ends the operation; a short one is CKR_SIGNATURE_LEN_RANGE.
        var bad = sig
        bad[10] ^= 1
        try f.rt.verifyRecoverInit(session: s, mechanism: .rsaPKCS, key: pub)
        #expect(rv { _ = try f.rt.verifyRecover(session: s, signature: bad, capacity: 128) } == CKR_SIGNATURE_INVALID)
        #expect(rv { _ = try f.rt.verifyRecover(session: s, signature: sig, capacity: 128) } == CKR_OPERATION_NOT_INITIALIZED)
        try f.rt.verifyRecoverInit(session: s, mechanism: .rsaPKCS, key: pub)
        #expect(rv { _ = try f.rt.verifyRecover(session: s, signature: Array(sig.dropFirst()), capacity: 128) } == CKR_SIGNATURE_LEN_RANGE)

        // Raw RSA: the whole block comes back, leading zeros kept.
        try f.rt.signRecoverInit(session: s, mechanism: .rsaX509, key: priv)
        let raw = bytes(try f.rt.signRecover(session: s, data: [1, 2, 3], capacity: 128))
        try f.rt.verifyRecoverInit(session: s, mechanism: .rsaX509, key: pub)
        #expect(bytes(try f.rt.verifyRecover(session: s, signature: raw, capacity: 128))
                == [UInt8](repeating: 0, count: 125) + [1, 2, 3])

        // Input limits, flags, key classes and mechanisms.
        try f.rt.signRecoverInit(session: s, mechanism: .rsaPKCS, key: priv)
        #expect(rv { _ = try f.rt.signRecover(session: s, data: [UInt8](repeating: 1, count: 118), capacity: 128) } == CKR_DATA_LEN_RANGE)
        try f.rt.signRecoverInit(session: s, mechanism: .rsaX509, key: priv)
        #expect(rv { _ = try f.rt.signRecover(session: s, data: [UInt8](repeating: 0xFF, count: 128), capacity: 128) } == CKR_DATA_INVALID)
        let (_, plain) = try rsaPair(f, s, priv: [.bool(CKA_SIGN, true)])
        #expect(rv { try f.rt.signRecoverInit(session: s, mechanism: .rsaPKCS, key: plain) } == CKR_KEY_FUNCTION_NOT_PERMITTED)
        #expect(rv { try f.rt.signRecoverInit(session: s, mechanism: .rsaPKCS, key: pub) } == CKR_KEY_TYPE_INCONSISTENT)
        #expect(rv { try f.rt.verifyRecoverInit(session: s, mechanism: .rsaPKCS, key: priv) } == CKR_KEY_TYPE_INCONSISTENT)
        #expect(rv { try f.rt.signRecoverInit(session: s, mechanism: .rsaPKCSWith(.sha256), key: priv) } == CKR_MECHANISM_INVALID)
        #expect(rv { try f.rt.signRecoverInit(session: s, mechanism: .rsaPKCS, key: 999_999) } == CKR_KEY_HANDLE_INVALID)
        #expect(rv { _ = try f.rt.verifyRecover(session: s, signature: sig, capacity: 128) } == CKR_OPERATION_NOT_INITIALIZED)
    }

    // MARK: - wrapping

    /// Secret keys wrap under an RSA public key with PKCS #1 v1.5 and OAEP
    /// and come back with the private key; private keys only with RSA-AES.
    @Test func rsaWrapRoundTrips() throws {
        let (f, s) = try loggedIn()
        let (pub, priv) = try rsaPair(f, s, pub: [.bool(CKA_WRAP, true)], priv: [.bool(CKA_UNWRAP, true), .bool(CKA_DECRYPT, false)])
        let value = (0..<32).map { UInt8($0) }
        let target = try aes(f, s, value: value, sensitive: false)
        for m in [Mechanism.rsaPKCS, try oaepMechanism(), try rsaAES(bits: 128), try rsaAES(bits: 256)] {
            let needed: Int = if case .rsaAESKeyWrap = m { 128 + 40 } else { 128 }
            #expect(try f.rt.wrapKey(session: s, mechanism: m, wrappingKey: pub, key: target, capacity: nil) == .length(needed))
            #expect(try f.rt.wrapKey(session: s, mechanism: m, wrappingKey: pub, key: target, capacity: 8) == .tooSmall(needed))
            let blob = bytes(try f.rt.wrapKey(session: s, mechanism: m, wrappingKey: pub, key: target, capacity: 4096))
            #expect(blob.count == needed)
            let back = try f.rt.unwrapKey(session: s, mechanism: m, unwrappingKey: priv, wrapped: blob, template: [
                .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), .bool(CKA_ENCRYPT, true)])
            #expect(try fingerprint(f, s, back) == (try fingerprint(f, s, target)))
            #expect(try f.rt.getAttributeValue(session: s, object: back, types: [CKA_LOCAL, CKA_ALWAYS_SENSITIVE])
                    == [.value([0]), .value([0])])
            var tampered = blob
            tampered[blob.count - 3] ^= 1
            // PKCS #1 v1.5 decrypts with implicit rejection (OpenSSL 3.2+, kept against Bleichenbacher
            // oracles): a tampered block gives a pseudo-random message, which is a key whenever its
            // synthetic length is 16, 24 or 32 (a few percent of key pairs). Never the wrapped key.
            var unwrapped: CK_OBJECT_HANDLE?
            let tamperedRV = rv { unwrapped = try f.rt.unwrapKey(session: s, mechanism: m, unwrappingKey: priv, wrapped: tampered,
                                                                 template: [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES)]) }
            if case .rsaPKCS = m, tamperedRV == CKR_OK, let unwrapped {
                #expect(try fingerprint(f, s, unwrapped) != (try fingerprint(f, s, target)))
            } else {
                #expect(tamperedRV == CKR_WRAPPED_KEY_INVALID)
            }
            #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: m, unwrappingKey: priv, wrapped: Array(blob.dropLast(8)),
                                                template: [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES)]) }
                    == (needed == 128 ? CKR_WRAPPED_KEY_LEN_RANGE : CKR_WRAPPED_KEY_INVALID))
            // Rule 4: nothing unwrapped with a private key is readable.
            #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: m, unwrappingKey: priv, wrapped: blob, template: [
                .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), .bool(CKA_SENSITIVE, false),
                .bool(CKA_EXTRACTABLE, true)]) } == CKR_TEMPLATE_INCONSISTENT)
        }
        // A private key (non-sensitive, so no trust is needed) with RSA-AES only.
        let (ecPub, ecPriv) = try f.rt.generateKeyPair(
            session: s, mechanism: try Mechanism(type: CKM_EC_KEY_PAIR_GEN, parameter: nil),
            publicTemplate: [Attribute(CKA_EC_PARAMS, ECCurve.brainpoolP256r1.paramsDER)],
            privateTemplate: [.bool(CKA_EXTRACTABLE, true), .bool(CKA_SENSITIVE, false), .bool(CKA_SIGN, true)])
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: try oaepMechanism(), wrappingKey: pub, key: ecPriv, capacity: 4096) }
                == CKR_KEY_NOT_WRAPPABLE)
        let blob = bytes(try f.rt.wrapKey(session: s, mechanism: try rsaAES(), wrappingKey: pub, key: ecPriv, capacity: 4096))
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: try oaepMechanism(), unwrappingKey: priv, wrapped: Array(blob.prefix(128)),
                                            template: [.ulong(CKA_CLASS, CKO_PRIVATE_KEY), .ulong(CKA_KEY_TYPE, CKK_EC)]) }
                == CKR_TEMPLATE_INCONSISTENT)
        let k = try f.rt.unwrapKey(session: s, mechanism: try rsaAES(), unwrappingKey: priv, wrapped: blob, template: [
            .ulong(CKA_CLASS, CKO_PRIVATE_KEY), .ulong(CKA_KEY_TYPE, CKK_EC), .bool(CKA_SIGN, true)])
        try f.rt.signInit(session: s, mechanism: .ecdsaWith(.sha256), key: k)
        let sig = bytes(try f.rt.sign(session: s, data: [5], capacity: 64))
        try f.rt.verifyInit(session: s, mechanism: .ecdsaWith(.sha256), key: ecPub)
        try f.rt.verify(session: s, data: [5], signature: sig)
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: try rsaAES(), unwrappingKey: priv, wrapped: blob, template: [
            .ulong(CKA_CLASS, CKO_PRIVATE_KEY), .ulong(CKA_KEY_TYPE, CKK_RSA)]) } == CKR_TEMPLATE_INCONSISTENT)
    }

    /// The wrap/decrypt separation rules under public keys
    /// (KeyUsagePolicy+PublicKeyWrap.swift), and the key-role errors.
    @Test func rsaWrapPolicy() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let (pub, _) = try rsaPair(f, s, pub: [.bool(CKA_WRAP, true), .bool(CKA_TOKEN, true)],
                                      priv: [.bool(CKA_UNWRAP, true), .bool(CKA_DECRYPT, false), .bool(CKA_TOKEN, true)])
        let value = [UInt8](repeating: 0x5A, count: 16)
        // An untrusted public key wraps no sensitive key.
        let early = try aes(f, s, value: value, sensitive: true)
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: .rsaPKCS, wrappingKey: pub, key: early, capacity: 512) }
                == CKR_KEY_NOT_WRAPPABLE)
        // The user cannot make a public key trusted: not at creation, not later.
        let outside = try PrivateKey.generateRSA(bits: 1024)
        let created: Template = [
            .ulong(CKA_CLASS, CKO_PUBLIC_KEY), .ulong(CKA_KEY_TYPE, CKK_RSA), .bool(CKA_WRAP, true), .bool(CKA_TOKEN, true),
            Attribute(CKA_MODULUS, outside.publicKey.rsaModulus ?? []), Attribute(CKA_PUBLIC_EXPONENT, [1, 0, 1])]
        #expect(rv { _ = try f.rt.createObject(session: s, template: created + [.bool(CKA_TRUSTED, true)]) } == CKR_ATTRIBUTE_READ_ONLY)
        let escrow = try f.rt.createObject(session: s, template: created)
        #expect(rv { try f.rt.setAttributeValue(session: s, object: escrow, template: [.bool(CKA_TRUSTED, true)]) }
                == CKR_ATTRIBUTE_READ_ONLY)
        // The SO trusts both public keys (token objects, public).
        try f.rt.logout(session: s)
        try f.rt.login(session: s, userType: CKU_SO, pin: soPIN)
        try f.rt.setAttributeValue(session: s, object: escrow, template: [.bool(CKA_TRUSTED, true)])
        try f.rt.setAttributeValue(session: s, object: pub, template: [.bool(CKA_TRUSTED, true)])
        try f.rt.logout(session: s)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let secret = try aes(f, s, value: value, sensitive: true)
        // The private key's handle went with the logout: find it again.
        guard case .value(let id) = try f.rt.getAttributeValue(session: s, object: pub, types: [CKA_ID])[0] else {
            Issue.record("no CKA_ID"); return
        }
        try f.rt.findObjectsInit(session: s, template: [.ulong(CKA_CLASS, CKO_PRIVATE_KEY), Attribute(CKA_ID, id)])
        let found = try f.rt.findObjects(session: s, max: 2)
        try f.rt.findObjectsFinal(session: s)
        guard found.count == 1 else { Issue.record("private half not found"); return }
        let priv = found[0]
        // Trusted, but its private half is in this token: refused (it could open the blob).
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: .rsaPKCS, wrappingKey: pub, key: secret, capacity: 512) }
                == CKR_KEY_NOT_WRAPPABLE)
        // Trusted, private half elsewhere: the escrow holder gets the key.
        let blob = bytes(try f.rt.wrapKey(session: s, mechanism: try oaepMechanism(), wrappingKey: escrow, key: secret, capacity: 512))
        #expect(try outside.decrypt(blob, padding: .oaep(.sha256, mgf1: .sha256, label: [])) == value)
        // Key roles.
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: .rsaPKCS, wrappingKey: priv, key: secret, capacity: 512) }
                == CKR_WRAPPING_KEY_TYPE_INCONSISTENT)
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: .rsaPKCS, wrappingKey: secret, key: secret, capacity: 512) }
                == CKR_WRAPPING_KEY_TYPE_INCONSISTENT)
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: .rsaPKCS, wrappingKey: 424_242, key: secret, capacity: 512) }
                == CKR_WRAPPING_KEY_HANDLE_INVALID)
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: .rsaPKCS, unwrappingKey: pub, wrapped: blob, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES)]) } == CKR_UNWRAPPING_KEY_TYPE_INCONSISTENT)
        let (noWrap, _) = try rsaPair(f, s, pub: [.bool(CKA_WRAP, false)])
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: .rsaPKCS, wrappingKey: noWrap, key: secret, capacity: 512) }
                == CKR_KEY_FUNCTION_NOT_PERMITTED)
        // CK_RSA_AES_KEY_WRAP_PARAMS: AES size, NULL OAEP, wrong length.
        #expect(rv { _ = try rsaAES(bits: 100) } == CKR_MECHANISM_PARAM_INVALID)
        var p = CK_RSA_AES_KEY_WRAP_PARAMS(ulAESKeyBits: 256, pOAEPParams: nil)
        #expect(rv { _ = try withUnsafeBytes(of: &p) { try Mechanism(type: CKM_RSA_AES_KEY_WRAP, parameter: $0) } } == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv { _ = try Mechanism(type: CKM_RSA_AES_KEY_WRAP, parameter: nil) } == CKR_MECHANISM_PARAM_INVALID)
    }

    /// Regression: before CKA_TRUSTED was checked at creation, a user made a
    /// trusted AES key of a value it knew and wrapped every sensitive
    /// extractable key under it (rule 2 passes a trusted wrapper).
    @Test func trustedOnlyFromTheSO() throws {
        let (f, s) = try loggedIn()
        let known = [UInt8](repeating: 7, count: 16)
        let wrapper: Template = [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), Attribute(CKA_VALUE, known),
            .bool(CKA_WRAP, true), .bool(CKA_DECRYPT, false), .bool(CKA_ENCRYPT, false), .bool(CKA_TRUSTED, true)]
        #expect(rv { _ = try f.rt.createObject(session: s, template: wrapper) } == CKR_ATTRIBUTE_READ_ONLY)
        if let kek = try? f.rt.createObject(session: s, template: wrapper) {
            // What the check stops: the attack run to its end.
            let victim = try f.rt.generateKey(session: s, mechanism: try Mechanism(type: CKM_AES_KEY_GEN, parameter: nil),
                                              template: [.ulong(CKA_VALUE_LEN, 32), .bool(CKA_EXTRACTABLE, true)])
            let blob = bytes(try f.rt.wrapKey(session: s, mechanism: .aesKeyWrap(pad: false), wrappingKey: kek, key: victim,
                                              capacity: 64))
            let leaked = try AESKeyWrap.unwrap(kek: known, wrapped: blob, padded: false)
            Issue.record("a user-made trusted key exported a sensitive key: \(leaked.count) bytes recovered")
        }
        #expect(rv { _ = try f.rt.generateKey(session: s, mechanism: try Mechanism(type: CKM_AES_KEY_GEN, parameter: nil),
                                              template: [.ulong(CKA_VALUE_LEN, 16), .bool(CKA_TRUSTED, true)]) }
                == CKR_ATTRIBUTE_READ_ONLY)
    }
}
