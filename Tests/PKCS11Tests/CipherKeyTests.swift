import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// Encrypt/decrypt, key generation, wrap/unwrap, derive and HMAC through the
/// Runtime, including the bad-parameter and wrong-state answers.
struct CipherKeyTests {
    func mech<T>(_ type: CK_MECHANISM_TYPE, _ param: T) throws -> Mechanism {
        var p = param
        return try withUnsafeBytes(of: &p) { try Mechanism(type: type, parameter: $0) }
    }

    func raw(_ type: CK_MECHANISM_TYPE, _ bytes: [UInt8]) throws -> Mechanism {
        try bytes.withUnsafeBytes { try Mechanism(type: type, parameter: $0) }
    }

    func aesKey(_ f: Fixture, _ s: CK_SESSION_HANDLE, wrap: Bool = false, extractable: Bool = false) throws -> CK_OBJECT_HANDLE {
        try f.rt.generateKey(session: s, mechanism: try Mechanism(type: CKM_AES_KEY_GEN, parameter: nil), template: [
            // A KEK neither encrypts nor decrypts (KeyUsagePolicy: the wrap/decrypt and encrypt/unwrap rules).
            .ulong(CKA_VALUE_LEN, 32), .bool(CKA_ENCRYPT, !wrap), .bool(CKA_DECRYPT, !wrap), .bool(CKA_WRAP, wrap),
            .bool(CKA_UNWRAP, wrap), .bool(CKA_EXTRACTABLE, extractable), .bool(CKA_SIGN, true), .bool(CKA_VERIFY, true),
        ])
    }

    func bytes(_ r: OutputResult) -> [UInt8] {
        if case .bytes(let b) = r { return b }
        Issue.record("expected bytes, got \(r)")
        return []
    }

    @Test func aesCBCPadMultiPartAndLengthRules() throws {
        let (f, s) = try loggedIn()
        let key = try aesKey(f, s)
        #expect(try f.rt.getAttributeValue(session: s, object: key, types: [CKA_LOCAL, CKA_ALWAYS_SENSITIVE, CKA_VALUE])
                == [.value([1]), .value([1]), .sensitive])
        let iv = [UInt8](repeating: 7, count: 16)
        let m = try raw(CKM_AES_CBC_PAD, Array(iv.prefix(16)))
        let plain = Array("twenty-one bytes long".utf8)
        try f.rt.encryptInit(session: s, mechanism: m, key: key)
        #expect(try f.rt.encrypt(session: s, data: plain, capacity: nil) == .length(32))
        #expect(try f.rt.encrypt(session: s, data: plain, capacity: 4) == .tooSmall(32))
        let ct = bytes(try f.rt.encrypt(session: s, data: plain, capacity: 32))
        #expect(ct.count == 32)
        // Multi-part decryption holds the last block back until the final call.
        try f.rt.decryptInit(session: s, mechanism: m, key: key)
        let a = bytes(try f.rt.decryptUpdate(session: s, part: Array(ct[0..<16]), capacity: 64))
        let b = bytes(try f.rt.decryptUpdate(session: s, part: Array(ct[16...]), capacity: 64))
        let c = bytes(try f.rt.decryptFinal(session: s, capacity: 64))
        #expect(a + b + c == plain)
        // Without padding, a partial block is CKR_DATA_LEN_RANGE and ends the operation.
        let noPad = try raw(CKM_AES_CBC, Array(iv.prefix(16)))
        try f.rt.encryptInit(session: s, mechanism: noPad, key: key)
        #expect(rv { _ = try f.rt.encrypt(session: s, data: plain, capacity: 64) } == CKR_DATA_LEN_RANGE)
        #expect(rv { _ = try f.rt.encrypt(session: s, data: plain, capacity: 64) } == CKR_OPERATION_NOT_INITIALIZED)
        try f.rt.decryptInit(session: s, mechanism: m, key: key)
        #expect(rv { _ = try f.rt.decrypt(session: s, data: Array(ct[0..<20]), capacity: 64) } == CKR_ENCRYPTED_DATA_LEN_RANGE)
        #expect(rv { _ = try raw(CKM_AES_CBC, Array(iv.prefix(8))) }
                == CKR_MECHANISM_PARAM_INVALID)
    }

    @Test func aesGCMWithAADAndBadParameters() throws {
        let (f, s) = try loggedIn()
        let key = try aesKey(f, s)
        var iv = [UInt8](repeating: 1, count: 12)
        var aad = Array("header".utf8)
        let m = try iv.withUnsafeMutableBufferPointer { ivp in
            try aad.withUnsafeMutableBufferPointer { ap in
                try mech(CKM_AES_GCM, CK_GCM_PARAMS(pIv: ivp.baseAddress, ulIvLen: 12, ulIvBits: 96,
                                                    pAAD: ap.baseAddress, ulAADLen: CK_ULONG(ap.count), ulTagBits: 128))
            }
        }
        let plain = Array("gcm plaintext".utf8)
        try f.rt.encryptInit(session: s, mechanism: m, key: key)
        // Updates return their ciphertext at once; the final call gives the tag.
        let c1 = bytes(try f.rt.encryptUpdate(session: s, part: Array(plain[0..<5]), capacity: 64))
        let c2 = bytes(try f.rt.encryptUpdate(session: s, part: Array(plain[5...]), capacity: 64))
        #expect(c1.count == 5 && c2.count == plain.count - 5)
        #expect(try f.rt.encryptFinal(session: s, capacity: nil) == .length(16))
        let ct = c1 + c2 + bytes(try f.rt.encryptFinal(session: s, capacity: 64))
        try f.rt.decryptInit(session: s, mechanism: m, key: key)
        #expect(bytes(try f.rt.decrypt(session: s, data: ct, capacity: 64)) == plain)
        var tampered = ct
        tampered[0] ^= 1
        try f.rt.decryptInit(session: s, mechanism: m, key: key)
        #expect(rv { _ = try f.rt.decrypt(session: s, data: tampered, capacity: 64) } == CKR_ENCRYPTED_DATA_INVALID)
        // NULL IV with a length, no IV, a bad tag size, a short parameter.
        #expect(rv { _ = try mech(CKM_AES_GCM, CK_GCM_PARAMS(pIv: nil, ulIvLen: 12, ulIvBits: 96, pAAD: nil, ulAADLen: 0, ulTagBits: 128)) }
                == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv { _ = try mech(CKM_AES_GCM, CK_GCM_PARAMS(pIv: nil, ulIvLen: 0, ulIvBits: 0, pAAD: nil, ulAADLen: 0, ulTagBits: 128)) }
                == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv {
            _ = try iv.withUnsafeMutableBufferPointer {
                try mech(CKM_AES_GCM, CK_GCM_PARAMS(pIv: $0.baseAddress, ulIvLen: 12, ulIvBits: 96, pAAD: nil, ulAADLen: 0, ulTagBits: 100))
            }
        } == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv { _ = try raw(CKM_AES_GCM, Array(iv.prefix(12))) }
                == CKR_MECHANISM_PARAM_INVALID)
    }

    @Test func rsaOAEPWithLabelAndBadParameters() throws {
        let (f, s) = try loggedIn()
        let (pub, priv) = try f.rt.generateKeyPair(
            session: s, mechanism: try Mechanism(type: CKM_RSA_PKCS_KEY_PAIR_GEN, parameter: nil),
            publicTemplate: [.ulong(CKA_MODULUS_BITS, 2048), .bool(CKA_ENCRYPT, true)],
            privateTemplate: [.bool(CKA_DECRYPT, true), .bool(CKA_SIGN, true)])
        #expect(try f.rt.getAttributeValue(session: s, object: priv, types: [CKA_KEY_GEN_MECHANISM, CKA_PRIVATE_EXPONENT])
                == [.value(AttributeCoding.ulong(CKM_RSA_PKCS_KEY_PAIR_GEN)), .sensitive])
        var label = Array("lbl".utf8)
        let m = try label.withUnsafeMutableBytes {
            try mech(CKM_RSA_PKCS_OAEP, CK_RSA_PKCS_OAEP_PARAMS(hashAlg: CKM_SHA256, mgf: CK_ULONG(CKG_MGF1_SHA256),
                                                                source: CK_ULONG(CKZ_DATA_SPECIFIED),
                                                                pSourceData: $0.baseAddress, ulSourceDataLen: 3))
        }
        let plain = Array("oaep".utf8)
        try f.rt.encryptInit(session: s, mechanism: m, key: pub)
        let ct = bytes(try f.rt.encrypt(session: s, data: plain, capacity: 256))
        try f.rt.decryptInit(session: s, mechanism: m, key: priv)
        #expect(try f.rt.decrypt(session: s, data: ct, capacity: nil) == .length(256))
        #expect(bytes(try f.rt.decrypt(session: s, data: ct, capacity: 256)) == plain)
        // Another label does not decrypt: CKR_ENCRYPTED_DATA_INVALID.
        let noLabel = try mech(CKM_RSA_PKCS_OAEP, CK_RSA_PKCS_OAEP_PARAMS(hashAlg: CKM_SHA256, mgf: CK_ULONG(CKG_MGF1_SHA256),
                                                                         source: 0, pSourceData: nil, ulSourceDataLen: 0))
        try f.rt.decryptInit(session: s, mechanism: noLabel, key: priv)
        #expect(rv { _ = try f.rt.decrypt(session: s, data: ct, capacity: 256) } == CKR_ENCRYPTED_DATA_INVALID)
        try f.rt.decryptInit(session: s, mechanism: noLabel, key: priv)
        #expect(rv { _ = try f.rt.decrypt(session: s, data: [1, 2, 3], capacity: 256) } == CKR_ENCRYPTED_DATA_LEN_RANGE)
        // Bad OAEP parameters.
        #expect(rv { _ = try mech(CKM_RSA_PKCS_OAEP, CK_RSA_PKCS_OAEP_PARAMS(hashAlg: CKM_MD5, mgf: CK_ULONG(CKG_MGF1_SHA256),
                                                                            source: 0, pSourceData: nil, ulSourceDataLen: 0)) }
                == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv { _ = try mech(CKM_RSA_PKCS_OAEP, CK_RSA_PKCS_OAEP_PARAMS(hashAlg: CKM_SHA256, mgf: CK_ULONG(CKG_MGF1_SHA256),
                                                                            source: CK_ULONG(CKZ_DATA_SPECIFIED), pSourceData: nil,
                                                                            ulSourceDataLen: 5)) }
                == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv { _ = try Mechanism(type: CKM_RSA_PKCS_OAEP, parameter: nil) } == CKR_MECHANISM_PARAM_INVALID)
        // A too-long plaintext; the public key cannot decrypt.
        try f.rt.encryptInit(session: s, mechanism: .rsaPKCS, key: pub)
        #expect(rv { _ = try f.rt.encrypt(session: s, data: [UInt8](repeating: 1, count: 250), capacity: 256) } == CKR_DATA_LEN_RANGE)
        #expect(rv { try f.rt.decryptInit(session: s, mechanism: .rsaPKCS, key: pub) } == CKR_KEY_FUNCTION_NOT_PERMITTED)
    }

    @Test func keyPairGenerationCurvesAndEdDSA() throws {
        let (f, s) = try loggedIn()
        let ec = try Mechanism(type: CKM_EC_KEY_PAIR_GEN, parameter: nil)
        let ed = try Mechanism(type: CKM_EC_EDWARDS_KEY_PAIR_GEN, parameter: nil)
        for params in [ECCurve.p384.paramsDER, [0x13, 0x0A] + Array("prime256v1".utf8)] {
            let (_, priv) = try f.rt.generateKeyPair(session: s, mechanism: ec, publicTemplate: [Attribute(CKA_EC_PARAMS, params)],
                                                     privateTemplate: [.bool(CKA_SIGN, true)])
            try f.rt.signInit(session: s, mechanism: .ecdsaWith(.sha256), key: priv)
            _ = bytes(try f.rt.sign(session: s, data: [1, 2, 3], capacity: 200))
        }
        for params in [[0x06, 0x03, 0x2B, 0x65, 0x70], [0x13, 0x0C] + Array("edwards25519".utf8)] {
            let (pub, priv) = try f.rt.generateKeyPair(session: s, mechanism: ed, publicTemplate: [Attribute(CKA_EC_PARAMS, params)],
                                                       privateTemplate: [.bool(CKA_SIGN, true), .bool(CKA_TOKEN, true)])
            try f.rt.signInit(session: s, mechanism: .eddsa, key: priv)
            let sig = bytes(try f.rt.sign(session: s, data: [9, 9], capacity: 64))
            try f.rt.verifyInit(session: s, mechanism: .eddsa, key: pub)
            try f.rt.verify(session: s, data: [9, 9], signature: sig)
        }
        #expect(rv { _ = try f.rt.generateKeyPair(session: s, mechanism: ec, publicTemplate: [Attribute(CKA_EC_PARAMS, [0x06, 0x01, 0x00])],
                                                  privateTemplate: []) } == CKR_CURVE_NOT_SUPPORTED)
        let rsa = try Mechanism(type: CKM_RSA_PKCS_KEY_PAIR_GEN, parameter: nil)
        // 1024-16384 bits, the range C_GetMechanismInfo reports (issue 13).
        #expect(rv { _ = try f.rt.generateKeyPair(session: s, mechanism: rsa, publicTemplate: [.ulong(CKA_MODULUS_BITS, 512)],
                                                  privateTemplate: []) } == CKR_KEY_SIZE_RANGE)
        #expect(rv { _ = try f.rt.generateKeyPair(session: s, mechanism: rsa, publicTemplate: [.ulong(CKA_MODULUS_BITS, 16392)],
                                                  privateTemplate: []) } == CKR_KEY_SIZE_RANGE)
        let (rsaPub, _) = try f.rt.generateKeyPair(session: s, mechanism: rsa, publicTemplate: [.ulong(CKA_MODULUS_BITS, 1024)],
                                                   privateTemplate: [.bool(CKA_SIGN, true)])
        #expect(try f.rt.getAttributeValue(session: s, object: rsaPub, types: [CKA_MODULUS_BITS]) == [.value(ulong(1024))])
        let info = try f.rt.mechanismInfo(slot: f.rt.sessionInfo(s).slotID, type: CKM_RSA_PKCS_KEY_PAIR_GEN)
        #expect(info.minKeySize == 1024 && info.maxKeySize == 16384)
        #expect(rv { _ = try f.rt.generateKeyPair(session: s, mechanism: rsa, publicTemplate: [], privateTemplate: []) }
                == CKR_TEMPLATE_INCOMPLETE)
    }

    @Test func nonSensitiveExtractableComponentsAreReadable() throws {
        let (f, s) = try loggedIn()
        let (_, priv) = try f.rt.generateKeyPair(
            session: s, mechanism: try Mechanism(type: CKM_EC_KEY_PAIR_GEN, parameter: nil),
            publicTemplate: [Attribute(CKA_EC_PARAMS, ECCurve.p256.paramsDER)],
            privateTemplate: [.bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)])
        guard case .value(let d) = try f.rt.getAttributeValue(session: s, object: priv, types: [CKA_VALUE])[0] else {
            Issue.record("no value"); return
        }
        #expect(d.count == 32)
        #expect(try f.rt.getAttributeValue(session: s, object: priv, types: [CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE])
                == [.value([0]), .value([0])])
        try f.rt.setAttributeValue(session: s, object: priv, template: [.bool(CKA_SENSITIVE, true)])
        #expect(try f.rt.getAttributeValue(session: s, object: priv, types: [CKA_VALUE]) == [.sensitive])
        #expect(rv { try f.rt.setAttributeValue(session: s, object: priv, template: [.bool(CKA_SENSITIVE, false)]) }
                == CKR_ATTRIBUTE_READ_ONLY)
        #expect(rv { _ = try f.rt.copyObject(session: s, object: priv, template: [.bool(CKA_SENSITIVE, false)]) }
                == CKR_ATTRIBUTE_READ_ONLY)
    }

    @Test func wrapUnwrapPolicy() throws {
        let (f, s) = try loggedIn()
        let kek = try aesKey(f, s, wrap: true)
        let secret = try aesKey(f, s, extractable: true)
        let locked = try aesKey(f, s)
        let wrap = try Mechanism(type: CKM_AES_KEY_WRAP, parameter: nil)
        #expect(try f.rt.wrapKey(session: s, mechanism: wrap, wrappingKey: kek, key: secret, capacity: nil) == .length(40))
        let wrapped = bytes(try f.rt.wrapKey(session: s, mechanism: wrap, wrappingKey: kek, key: secret, capacity: 40))
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: wrap, wrappingKey: kek, key: locked, capacity: 40) }
                == CKR_KEY_UNEXTRACTABLE)
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: wrap, wrappingKey: secret, key: secret, capacity: 40) }
                == CKR_KEY_FUNCTION_NOT_PERMITTED)
        // The wrapping key cannot decrypt what it wrapped.
        let iv = [UInt8](repeating: 0, count: 16)
        #expect(rv { try f.rt.decryptInit(session: s, mechanism: .aesCBC(iv: iv, pad: false), key: kek) } == CKR_KEY_FUNCTION_NOT_PERMITTED)
        let back = try f.rt.unwrapKey(session: s, mechanism: wrap, unwrappingKey: kek, wrapped: wrapped, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), .bool(CKA_ENCRYPT, true), .bool(CKA_DECRYPT, true),
        ])
        #expect(try f.rt.getAttributeValue(session: s, object: back, types: [CKA_ALWAYS_SENSITIVE, CKA_LOCAL, CKA_VALUE_LEN])
                == [.value([0]), .value([0]), .value(AttributeCoding.ulong(32))])
        var bad = wrapped
        bad[3] ^= 1
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: wrap, unwrappingKey: kek, wrapped: bad, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES)]) } == CKR_WRAPPED_KEY_INVALID)
        // A private key as PKCS #8 with the padded variant.
        let pad = try Mechanism(type: CKM_AES_KEY_WRAP_PAD, parameter: nil)
        let (_, ecPriv) = try f.rt.generateKeyPair(
            session: s, mechanism: try Mechanism(type: CKM_EC_KEY_PAIR_GEN, parameter: nil),
            publicTemplate: [Attribute(CKA_EC_PARAMS, ECCurve.p256.paramsDER)],
            privateTemplate: [.bool(CKA_EXTRACTABLE, true), .bool(CKA_SIGN, true)])
        let w2 = bytes(try f.rt.wrapKey(session: s, mechanism: pad, wrappingKey: kek, key: ecPriv, capacity: 4096))
        let k2 = try f.rt.unwrapKey(session: s, mechanism: pad, unwrappingKey: kek, wrapped: w2, template: [
            .ulong(CKA_CLASS, CKO_PRIVATE_KEY), .ulong(CKA_KEY_TYPE, CKK_EC), .bool(CKA_SIGN, true)])
        try f.rt.signInit(session: s, mechanism: .ecdsa, key: k2)
        _ = bytes(try f.rt.sign(session: s, data: [UInt8](repeating: 1, count: 32), capacity: 64))
    }

    @Test func ecdhDeriveAgreesAndHMAC() throws {
        let (f, s) = try loggedIn()
        let gen = try Mechanism(type: CKM_EC_KEY_PAIR_GEN, parameter: nil)
        let (aPub, a) = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: [Attribute(CKA_EC_PARAMS, ECCurve.p256.paramsDER)],
                                              privateTemplate: [.bool(CKA_DERIVE, true)])
        let peer = try PrivateKey.generateEC(.p256)
        guard let point = peer.publicKey.ecPoint else { Issue.record("no point"); return }
        var pt = point
        let m = try pt.withUnsafeMutableBufferPointer {
            try mech(CKM_ECDH1_DERIVE, CK_ECDH1_DERIVE_PARAMS(kdf: CK_ULONG(CKD_NULL), ulSharedDataLen: 0, pSharedData: nil,
                                                              ulPublicDataLen: CK_ULONG($0.count), pPublicData: $0.baseAddress))
        }
        let derived = try f.rt.deriveKey(session: s, mechanism: m, baseKey: a, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET), .bool(CKA_SENSITIVE, false),
            .bool(CKA_EXTRACTABLE, true), .bool(CKA_SIGN, true), .bool(CKA_VERIFY, true)])
        guard case .value(let z) = try f.rt.getAttributeValue(session: s, object: aPub, types: [CKA_EC_POINT])[0],
              case .value(let secret) = try f.rt.getAttributeValue(session: s, object: derived, types: [CKA_VALUE])[0] else {
            Issue.record("no values"); return
        }
        #expect(try peer.deriveECDH(peerPoint: z) == secret)
        // HMAC with the derived generic secret.
        try f.rt.signInit(session: s, mechanism: .hmac(.sha256), key: derived)
        let mac = bytes(try f.rt.sign(session: s, data: [1, 2], capacity: 32))
        #expect(mac == (try HMAC.mac(.sha256, key: secret, data: [1, 2])))
        try f.rt.verifyInit(session: s, mechanism: .hmac(.sha256), key: derived)
        #expect(rv { try f.rt.verify(session: s, data: [1, 3], signature: mac) } == CKR_SIGNATURE_INVALID)
        #expect(rv { _ = try Mechanism(type: CKM_ECDH1_DERIVE, parameter: nil) } == CKR_MECHANISM_PARAM_INVALID)
        // C_DigestKey digests the key's value.
        try f.rt.digestInit(session: s, mechanism: .digest(.sha256))
        try f.rt.digestKey(session: s, key: derived)
        #expect(bytes(try f.rt.digestFinal(session: s, capacity: 32)) == DigestAlgorithm.sha256.hash(secret))
    }

    @Test func objectsAndSessionsGoingAwayMidOperation() throws {
        let (f, s) = try loggedIn()
        let key = try aesKey(f, s)
        let other = try f.rw(try f.rt.session(s).slotID)
        let iv = [UInt8](repeating: 0, count: 16)
        try f.rt.encryptInit(session: s, mechanism: .aesCBC(iv: iv, pad: true), key: key)
        _ = try f.rt.encryptUpdate(session: s, part: [1, 2, 3], capacity: 64)
        // Another session destroys the key: the running operation holds its own copy and finishes.
        try f.rt.destroyObject(session: other, object: key)
        _ = bytes(try f.rt.encryptFinal(session: s, capacity: 64))
        #expect(rv { try f.rt.encryptInit(session: s, mechanism: .aesCBC(iv: iv, pad: true), key: key) } == CKR_KEY_HANDLE_INVALID)
        // Closing a session mid-operation: later calls see an invalid handle.
        let k2 = try aesKey(f, other)
        try f.rt.encryptInit(session: other, mechanism: .aesCBC(iv: iv, pad: true), key: k2)
        try f.rt.closeSession(other)
        #expect(rv { _ = try f.rt.encryptFinal(session: other, capacity: 64) } == CKR_SESSION_HANDLE_INVALID)
        // Wrong state: update without init, final twice.
        #expect(rv { _ = try f.rt.decryptUpdate(session: s, part: [1], capacity: 8) } == CKR_OPERATION_NOT_INITIALIZED)
    }
}
