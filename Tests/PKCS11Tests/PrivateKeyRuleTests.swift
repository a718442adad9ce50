import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing
import Tokens

/// The CKA_PRIVATE rule (ObjectRules.alwaysPrivate; issues 12, 13 and 29):
/// private and secret token keys are always private, logged in or not; a
/// session key may be born public (issue 29) and is then usable without a
/// login and outlives C_Logout; no private key ever becomes public (copy,
/// set, or a key made from its material); public keys, certificates and data
/// objects may be public; no operation on a private key works after C_Logout,
/// and one says CKR_USER_NOT_LOGGED_IN.
struct PrivateKeyRuleTests {
    let ecGen = try! Mechanism(type: CKM_EC_KEY_PAIR_GEN, parameter: nil)
    let aesGen = try! Mechanism(type: CKM_AES_KEY_GEN, parameter: nil)
    let wrap = try! Mechanism(type: CKM_AES_KEY_WRAP, parameter: nil)
    let digest = [UInt8](repeating: 1, count: 32)
    let publicKey: Template = [.bool(CKA_PRIVATE, false)]

    func ecPair(_ f: Fixture, _ s: CK_SESSION_HANDLE, token: Bool = true, priv: Template = [], pub: Template = [])
        throws -> (CK_OBJECT_HANDLE, CK_OBJECT_HANDLE) {
        try f.rt.generateKeyPair(session: s, mechanism: ecGen,
                                 publicTemplate: [Attribute(CKA_EC_PARAMS, ECCurve.p256.paramsDER), .bool(CKA_TOKEN, token)] + pub,
                                 privateTemplate: [.bool(CKA_SIGN, true), .bool(CKA_TOKEN, token)] + priv)
    }

    func signs(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ key: CK_OBJECT_HANDLE) -> CK_RV {
        rv {
            try f.rt.signInit(session: s, mechanism: .ecdsa, key: key)
            _ = try f.rt.sign(session: s, data: digest, capacity: 64)
        }
    }

    func isPrivate(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ h: CK_OBJECT_HANDLE) throws -> Bool {
        try f.rt.getAttributeValue(session: s, object: h, types: [CKA_PRIVATE]) == [.value(bool(true))]
    }

    func aesKey(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ t: Template) throws -> CK_OBJECT_HANDLE {
        try f.rt.generateKey(session: s, mechanism: aesGen, template: [.ulong(CKA_VALUE_LEN, 32)] + t)
    }

    func ecdh(_ peer: PrivateKey) throws -> Mechanism {
        var point = peer.publicKey.ecPoint ?? []
        return try point.withUnsafeMutableBufferPointer { p in
            var params = CK_ECDH1_DERIVE_PARAMS(kdf: CK_ULONG(CKD_NULL), ulSharedDataLen: 0, pSharedData: nil,
                                                ulPublicDataLen: CK_ULONG(p.count), pPublicData: p.baseAddress)
            return try withUnsafeBytes(of: &params) { try Mechanism(type: CKM_ECDH1_DERIVE, parameter: $0) }
        }
    }

    /// Nothing stored is a public private or secret key.
    func noPublicKeyStored(_ f: Fixture) throws -> Bool {
        try (f.rt.store.find(ItemQuery(itemClass: .privateKey), key: nil) + f.rt.store.find(ItemQuery(itemClass: .secretKey), key: nil))
            .allSatisfy { $0.isPrivate }
    }

    /// Issue 13: a token pair asking CKA_PRIVATE=false made a public private key. Issue 29: a
    /// session pair may (pkcs11test generates its keys so, without a login).
    @Test func generateKeyPairAskingForAPublicPrivateKey() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        #expect(rv { _ = try ecPair(f, s, priv: publicKey, pub: publicKey) } == CKR_TEMPLATE_INCONSISTENT)
        // A session pair born public, no login: it signs, and its private half says CKA_PRIVATE false.
        let (sp, sk) = try ecPair(f, s, token: false, priv: publicKey, pub: publicKey)
        #expect(try !isPrivate(f, s, sk) && !isPrivate(f, s, sp))
        #expect(signs(f, s, sk) == CKR_OK)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        #expect(rv { _ = try ecPair(f, s, priv: publicKey, pub: publicKey) } == CKR_TEMPLATE_INCONSISTENT)
        let (_, sk2) = try ecPair(f, s, token: false, priv: publicKey)
        #expect(try !isPrivate(f, s, sk2))
        // The public half may be public; the private half is private by default.
        let (pub, priv) = try ecPair(f, s, pub: publicKey)
        #expect(try !isPrivate(f, s, pub))
        #expect(try isPrivate(f, s, priv))
        // Without a CKA_PRIVATE the session private key is private (the default), so it needs the login.
        try f.rt.logout(session: s)
        #expect(rv { _ = try ecPair(f, s, token: false) } == CKR_USER_NOT_LOGGED_IN)
        // The public session keys outlive the logout; nothing public was stored.
        #expect(signs(f, s, sk) == CKR_OK && signs(f, s, sk2) == CKR_OK)
        #expect(try noPublicKeyStored(f), "no key is stored as public")
    }

    @Test func everyCreatingPathRefusesAPublicTokenKey() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        let k = try PrivateKey.generateEC(.p256)
        let ecPrivate: Template = [
            .ulong(CKA_CLASS, CKO_PRIVATE_KEY), .ulong(CKA_KEY_TYPE, CKK_EC), Attribute(CKA_EC_PARAMS, ECCurve.p256.paramsDER),
            Attribute(CKA_VALUE, try k.ecPrivateScalar()), .bool(CKA_SIGN, true),
        ]
        let aes: Template = [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES),
                             Attribute(CKA_VALUE, [UInt8](repeating: 7, count: 32))]
        let pub: Template = [.ulong(CKA_CLASS, CKO_PUBLIC_KEY), .ulong(CKA_KEY_TYPE, CKK_EC),
                             Attribute(CKA_EC_PARAMS, ECCurve.p256.paramsDER), Attribute(CKA_EC_POINT, k.publicKey.ecPoint ?? [])]
        let data: Template = [.ulong(CKA_CLASS, CKO_DATA), Attribute(CKA_VALUE, [1])]
        for loggedIn in [false, true] {
            if loggedIn { try f.rt.login(session: s, userType: CKU_USER, pin: userPIN) }
            for token in [false, true] {
                let asks: Template = [.bool(CKA_PRIVATE, false), .bool(CKA_TOKEN, token)]
                let want = token ? CKR_TEMPLATE_INCONSISTENT : CKR_OK
                #expect(rv { _ = try f.rt.createObject(session: s, template: ecPrivate + asks) } == want)
                #expect(rv { _ = try f.rt.createObject(session: s, template: aes + asks) } == want)
                #expect(rv { _ = try aesKey(f, s, asks) } == want)
                // Public keys and data objects may be public, in a public R/W session too.
                let p = try f.rt.createObject(session: s, template: pub + asks)
                #expect(try !isPrivate(f, s, p))
                _ = try f.rt.createObject(session: s, template: data + asks)
            }
        }
        #expect(try noPublicKeyStored(f))
    }

    /// Issue 29: a key made from a private key's material (unwrapped, derived, decapsulated) is
    /// private; from a public session key it may be public.
    @Test func keysMadeFromPrivateKeysArePrivate() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let unwrapT: Template = [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES)]
        for kekPublic in [false, true] {
            // A KEK that cannot also decrypt: the wrap/decrypt separation refuses to
            // wrap a sensitive key under one that can (KeyUsagePolicy) ...
            let kek = try aesKey(f, s, [.bool(CKA_WRAP, true), .bool(CKA_UNWRAP, true), .bool(CKA_ENCRYPT, false),
                                        .bool(CKA_DECRYPT, false)] + (kekPublic ? publicKey : []))
            // ... and a target that cannot wrap itself, as public as the KEK (rule 8: a private key under a public KEK is not wrapped).
            let target = try aesKey(f, s, [.bool(CKA_EXTRACTABLE, true), .bool(CKA_WRAP, false), .bool(CKA_UNWRAP, false)]
                                        + (kekPublic ? publicKey : []))
            guard case .bytes(let wrapped) = try f.rt.wrapKey(session: s, mechanism: wrap, wrappingKey: kek, key: target, capacity: 40) else {
                Issue.record("no wrapped key"); return
            }
            #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: wrap, unwrappingKey: kek, wrapped: wrapped,
                                                 template: unwrapT + publicKey) } == (kekPublic ? CKR_OK : CKR_TEMPLATE_INCONSISTENT))
            // A public token key stays refused whatever the KEK.
            #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: wrap, unwrappingKey: kek, wrapped: wrapped,
                                                 template: unwrapT + publicKey + [.bool(CKA_TOKEN, true)]) } == CKR_TEMPLATE_INCONSISTENT)
            let unwrapped = try f.rt.unwrapKey(session: s, mechanism: wrap, unwrappingKey: kek, wrapped: wrapped, template: unwrapT)
            #expect(try isPrivate(f, s, unwrapped))

            let (_, base) = try ecPair(f, s, token: false, priv: [.bool(CKA_DERIVE, true)] + (kekPublic ? publicKey : []))
            let derived: Template = [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET)] + publicKey
            #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: try ecdh(try PrivateKey.generateEC(.p256)), baseKey: base,
                                                 template: derived) } == (kekPublic ? CKR_OK : CKR_TEMPLATE_INCONSISTENT))
        }
        // The derive attacks on a private key's value: a public key of its value is refused.
        let secret = try aesKey(f, s, [.bool(CKA_DERIVE, true), .bool(CKA_TOKEN, true)])
        var zeros = [UInt8](repeating: 0, count: 32)
        let xor = try zeros.withUnsafeMutableBufferPointer { z in
            var p = CK_KEY_DERIVATION_STRING_DATA(pData: z.baseAddress, ulLen: CK_ULONG(z.count))
            return try withUnsafeBytes(of: &p) { try Mechanism(type: CKM_XOR_BASE_AND_DATA, parameter: $0) }
        }
        var bit: CK_ULONG = 0
        let extract = try withUnsafeBytes(of: &bit) { try Mechanism(type: CKM_EXTRACT_KEY_FROM_KEY, parameter: $0) }
        let other = try aesKey(f, s, [.bool(CKA_DERIVE, true)] + publicKey)
        var otherHandle = other
        let concat = try withUnsafeBytes(of: &otherHandle) { try Mechanism(type: CKM_CONCATENATE_BASE_AND_KEY, parameter: $0) }
        for m in [xor, extract] {
            #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: m, baseKey: secret, template: [
                .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), .ulong(CKA_VALUE_LEN, 32)] + publicKey) }
                    == CKR_TEMPLATE_INCONSISTENT)
        }
        // A public base concatenated with a private key's value is private too.
        let publicBase = try aesKey(f, s, [.bool(CKA_DERIVE, true)] + publicKey)
        var secretHandle = secret
        let concatPrivate = try withUnsafeBytes(of: &secretHandle) { try Mechanism(type: CKM_CONCATENATE_BASE_AND_KEY, parameter: $0) }
        let generic: Template = [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET)] + publicKey
        #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: concatPrivate, baseKey: publicBase, template: generic) }
                == CKR_TEMPLATE_INCONSISTENT)
        #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: concat, baseKey: publicBase, template: generic) } == CKR_OK)
        #expect(try noPublicKeyStored(f))
    }

    /// Rule 8 of the wrap rules (issue 29): a private key is never wrapped under a public session
    /// KEK, which outlives C_Logout and would unwrap it again as a key usable without the login.
    @Test func privateKeysAreNotWrappedUnderPublicKeys() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let kekT: Template = [.bool(CKA_WRAP, true), .bool(CKA_UNWRAP, true), .bool(CKA_ENCRYPT, false), .bool(CKA_DECRYPT, false)]
        let publicKEK = try aesKey(f, s, kekT + publicKey)
        let privateKEK = try aesKey(f, s, kekT)
        let targetT: Template = [.bool(CKA_EXTRACTABLE, true), .bool(CKA_WRAP, false), .bool(CKA_UNWRAP, false)]
        let privateTarget = try aesKey(f, s, targetT + [.bool(CKA_TOKEN, true)])
        let publicTarget = try aesKey(f, s, targetT + publicKey)
        func wraps(_ kek: CK_OBJECT_HANDLE, _ key: CK_OBJECT_HANDLE) -> CK_RV {
            rv { _ = try f.rt.wrapKey(session: s, mechanism: wrap, wrappingKey: kek, key: key, capacity: 40) }
        }
        #expect(wraps(publicKEK, privateTarget) == CKR_KEY_NOT_WRAPPABLE)
        #expect(wraps(privateKEK, privateTarget) == CKR_OK)
        #expect(wraps(publicKEK, publicTarget) == CKR_OK)
        #expect(wraps(privateKEK, publicTarget) == CKR_OK)
    }

    /// Issue 12: C_CopyObject with CKA_PRIVATE=false made a key visible,
    /// destroyable and (as a session copy) usable without login. Issue 29: a
    /// public session key copies as public in a session, as private to the token.
    @Test func copyAndSetNeverMakeAKeyPublic() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let (pub, priv) = try ecPair(f, s)
        let aes = try aesKey(f, s, [.bool(CKA_TOKEN, true)])
        let (_, sessionPriv) = try ecPair(f, s, token: false)
        for key in [priv, aes, sessionPriv] {
            for token in [false, true] {
                #expect(rv { _ = try f.rt.copyObject(session: s, object: key, template: publicKey + [.bool(CKA_TOKEN, token)]) }
                        == CKR_TEMPLATE_INCONSISTENT)
            }
            #expect(rv { try f.rt.setAttributeValue(session: s, object: key, template: publicKey) } == CKR_TEMPLATE_INCONSISTENT)
        }
        // A public key may become private in a copy.
        let pubCopy = try f.rt.copyObject(session: s, object: pub, template: [.bool(CKA_PRIVATE, true), .bool(CKA_TOKEN, false)])
        #expect(try isPrivate(f, s, pubCopy))
        // A public session key: a session copy stays public, a token copy is private (public: refused).
        let (_, born) = try ecPair(f, s, token: false, priv: publicKey)
        #expect(try !isPrivate(f, s, try f.rt.copyObject(session: s, object: born, template: [])))
        #expect(try isPrivate(f, s, try f.rt.copyObject(session: s, object: born, template: [.bool(CKA_PRIVATE, true)])))
        let tokenCopy = try f.rt.copyObject(session: s, object: born, template: [.bool(CKA_TOKEN, true)])
        #expect(try isPrivate(f, s, tokenCopy))
        #expect(rv { _ = try f.rt.copyObject(session: s, object: born, template: [.bool(CKA_TOKEN, true)] + publicKey) }
                == CKR_TEMPLATE_INCONSISTENT)
        // Its CKA_PRIVATE is fixed like any key's.
        #expect(rv { try f.rt.setAttributeValue(session: s, object: born, template: [.bool(CKA_PRIVATE, true)]) } == CKR_ATTRIBUTE_READ_ONLY)
        try f.rt.logout(session: s)
        #expect(signs(f, s, born) == CKR_OK)
        #expect(signs(f, s, tokenCopy) == CKR_USER_NOT_LOGGED_IN)
        #expect(try noPublicKeyStored(f))
    }

    /// pkcs11-provider caches keys as session copies (CKA_TOKEN=false): every
    /// key type copies, the copy stays private and works until C_Logout.
    @Test func sessionCopiesOfEveryKeyTypeWorkUntilLogout() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let (ecPub, ec) = try ecPair(f, s)
        let (_, rsa) = try f.rt.generateKeyPair(session: s, mechanism: try Mechanism(type: CKM_RSA_PKCS_KEY_PAIR_GEN, parameter: nil),
                                                publicTemplate: [.ulong(CKA_MODULUS_BITS, 2048), .bool(CKA_TOKEN, true)],
                                                privateTemplate: [.bool(CKA_SIGN, true), .bool(CKA_TOKEN, true)])
        let (_, ed) = try f.rt.generateKeyPair(session: s, mechanism: try Mechanism(type: CKM_EC_EDWARDS_KEY_PAIR_GEN, parameter: nil),
                                               publicTemplate: [Attribute(CKA_EC_PARAMS, ObjectTemplates.ed25519Params), .bool(CKA_TOKEN, true)],
                                               privateTemplate: [.bool(CKA_SIGN, true), .bool(CKA_TOKEN, true)])
        let aes = try f.rt.generateKey(session: s, mechanism: aesGen, template: [
            .ulong(CKA_VALUE_LEN, 32), .bool(CKA_TOKEN, true), .bool(CKA_SIGN, true)])
        let mechanisms: [(CK_OBJECT_HANDLE, Mechanism, [UInt8])] = [
            (ec, .ecdsa, digest), (rsa, .rsaPKCSWith(.sha256), [1, 2, 3]), (ed, try Mechanism(type: CKM_EDDSA, parameter: nil), [1]),
            (aes, .hmac(.sha256), [1]),
        ]
        var copies: [CK_OBJECT_HANDLE] = []
        for (key, m, data) in mechanisms {
            let copy = try f.rt.copyObject(session: s, object: key, template: [.bool(CKA_TOKEN, false)])
            #expect(try isPrivate(f, s, copy))
            #expect(rv {
                try f.rt.signInit(session: s, mechanism: m, key: copy)
                _ = try f.rt.sign(session: s, data: data, capacity: 4096)
            } == CKR_OK)
            copies.append(copy)
        }
        let pubCopy = try f.rt.copyObject(session: s, object: ecPub, template: [.bool(CKA_TOKEN, false)])

        try f.rt.logout(session: s)
        for (h, (_, m, _)) in zip(copies + [ec, rsa, ed, aes], mechanisms + mechanisms) {
            #expect(rv { try f.rt.signInit(session: s, mechanism: m, key: h) } == CKR_USER_NOT_LOGGED_IN)
            // The object functions see no such object.
            #expect(rv { _ = try f.rt.getAttributeValue(session: s, object: h, types: [CKA_LABEL]) } == CKR_OBJECT_HANDLE_INVALID)
            #expect(rv { try f.rt.destroyObject(session: s, object: h) } == CKR_OBJECT_HANDLE_INVALID)
            #expect(rv { _ = try f.rt.copyObject(session: s, object: h, template: [.bool(CKA_TOKEN, false)]) } == CKR_OBJECT_HANDLE_INVALID)
        }
        // Public keys stay usable.
        #expect(rv { try f.rt.verifyInit(session: s, mechanism: .ecdsa, key: pubCopy) } == CKR_OK)
        // After the next login the old handles are invalid (PKCS #11 3.0 §5.6, C_Logout).
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        #expect(signs(f, s, copies[0]) == CKR_KEY_HANDLE_INVALID)
        #expect(signs(f, s, ec) == CKR_KEY_HANDLE_INVALID)
    }

    /// A key an older store holds as public (made by a copy before the rule)
    /// is treated as private: hidden before login, no operation without it.
    @Test func keysStoredAsPublicByOlderVersionsArePrivate() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        guard let token = try f.rt.store.tokens().first?.tokenID, let userKey = f.rt.userKey(for: token) else {
            Issue.record("no token"); return
        }
        var a = try ObjectTemplates.privateKey(try PrivateKey.generateEC(.p256), label: "old", id: [9], extractable: false, local: false)
        a[CKA_PRIVATE] = bool(false)
        _ = try f.rt.store.add(token: token, itemClass: .privateKey, attributes: a, key: userKey)
        let find: Template = [.ulong(CKA_CLASS, CKO_PRIVATE_KEY)]
        try f.rt.findObjectsInit(session: s, template: find)
        let found = try f.rt.findObjects(session: s, max: 10)
        try f.rt.findObjectsFinal(session: s)
        #expect(found.count == 1)
        guard let old = found.first else { return }
        #expect(try isPrivate(f, s, old))
        #expect(signs(f, s, old) == CKR_OK)
        #expect(rv { try f.rt.setAttributeValue(session: s, object: old, template: [.bool(CKA_PRIVATE, false)]) } == CKR_TEMPLATE_INCONSISTENT)
        let copy = try f.rt.copyObject(session: s, object: old, template: [.bool(CKA_TOKEN, false)])
        #expect(try isPrivate(f, s, copy))

        try f.rt.logout(session: s)
        #expect(signs(f, s, old) == CKR_USER_NOT_LOGGED_IN)
        #expect(signs(f, s, copy) == CKR_USER_NOT_LOGGED_IN)
        #expect(rv { try f.rt.destroyObject(session: s, object: old) } == CKR_OBJECT_HANDLE_INVALID)
        try f.rt.findObjectsInit(session: s, template: find)
        #expect(try f.rt.findObjects(session: s, max: 10).isEmpty)
        try f.rt.findObjectsFinal(session: s)
    }
}
