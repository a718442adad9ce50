import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing
import Tokens

/// The CKA_PRIVATE rule (ObjectRules.alwaysPrivate; issues 12 and 13): private
/// and secret keys are always private on every path that makes or changes
/// one, logged in or not; public keys, certificates and data objects may be
/// public; no key operation works after C_Logout, and one on a private key
/// says CKR_USER_NOT_LOGGED_IN.
struct PrivateKeyRuleTests {
    let ecGen = try! Mechanism(type: CKM_EC_KEY_PAIR_GEN, parameter: nil)
    let aesGen = try! Mechanism(type: CKM_AES_KEY_GEN, parameter: nil)
    let digest = [UInt8](repeating: 1, count: 32)

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

    /// Issue 13: both halves asking CKA_PRIVATE=false in a public R/W session
    /// was CKR_USER_NOT_LOGGED_IN; logged in it made a public private key.
    @Test func generateKeyPairAskingForAPublicPrivateKey() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        let asks: Template = [.bool(CKA_PRIVATE, false)]
        #expect(rv { _ = try ecPair(f, s, priv: asks, pub: asks) } == CKR_TEMPLATE_INCONSISTENT)
        #expect(rv { _ = try ecPair(f, s, token: false, priv: asks, pub: asks) } == CKR_TEMPLATE_INCONSISTENT)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        #expect(rv { _ = try ecPair(f, s, priv: asks, pub: asks) } == CKR_TEMPLATE_INCONSISTENT)
        #expect(rv { _ = try ecPair(f, s, token: false, priv: asks) } == CKR_TEMPLATE_INCONSISTENT)
        // The public half may be public; the private half is private by default.
        let (pub, priv) = try ecPair(f, s, pub: asks)
        #expect(try !isPrivate(f, s, pub))
        #expect(try isPrivate(f, s, priv))
        #expect(try f.rt.store.find(ItemQuery(itemClass: .privateKey), key: nil).isEmpty, "no key is stored as public")
    }

    @Test func everyCreatingPathRefusesAPublicKey() throws {
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
                #expect(rv { _ = try f.rt.createObject(session: s, template: ecPrivate + asks) } == CKR_TEMPLATE_INCONSISTENT)
                #expect(rv { _ = try f.rt.createObject(session: s, template: aes + asks) } == CKR_TEMPLATE_INCONSISTENT)
                #expect(rv { _ = try f.rt.generateKey(session: s, mechanism: aesGen, template: [.ulong(CKA_VALUE_LEN, 32)] + asks) }
                        == CKR_TEMPLATE_INCONSISTENT)
                // Public keys and data objects may be public, in a public R/W session too.
                let p = try f.rt.createObject(session: s, template: pub + asks)
                #expect(try !isPrivate(f, s, p))
                _ = try f.rt.createObject(session: s, template: data + asks)
            }
        }
        // Unwrap and derive, logged in (they need a key to start from).
        // A KEK that cannot also decrypt: the wrap/decrypt separation refuses to
        // wrap a sensitive key under one that can (KeyUsagePolicy).
        let kek = try f.rt.generateKey(session: s, mechanism: aesGen, template: [
            .ulong(CKA_VALUE_LEN, 32), .bool(CKA_WRAP, true), .bool(CKA_UNWRAP, true),
            .bool(CKA_ENCRYPT, false), .bool(CKA_DECRYPT, false)])
        // ... and a target that cannot wrap itself (a wrapping key is wrapped only under a trusted one).
        let target = try f.rt.generateKey(session: s, mechanism: aesGen, template: [
            .ulong(CKA_VALUE_LEN, 32), .bool(CKA_EXTRACTABLE, true), .bool(CKA_WRAP, false), .bool(CKA_UNWRAP, false)])
        let wrap = try Mechanism(type: CKM_AES_KEY_WRAP, parameter: nil)
        guard case .bytes(let wrapped) = try f.rt.wrapKey(session: s, mechanism: wrap, wrappingKey: kek, key: target, capacity: 40) else {
            Issue.record("no wrapped key"); return
        }
        let unwrapT: Template = [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES)]
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: wrap, unwrappingKey: kek, wrapped: wrapped,
                                             template: unwrapT + [.bool(CKA_PRIVATE, false)]) } == CKR_TEMPLATE_INCONSISTENT)
        let unwrapped = try f.rt.unwrapKey(session: s, mechanism: wrap, unwrappingKey: kek, wrapped: wrapped, template: unwrapT)
        #expect(try isPrivate(f, s, unwrapped))
        let (_, base) = try ecPair(f, s, priv: [.bool(CKA_DERIVE, true)])
        let peer = try PrivateKey.generateEC(.p256)
        var point = peer.publicKey.ecPoint ?? []
        let derive = try point.withUnsafeMutableBufferPointer { p in
            var params = CK_ECDH1_DERIVE_PARAMS(kdf: CK_ULONG(CKD_NULL), ulSharedDataLen: 0, pSharedData: nil,
                                                ulPublicDataLen: CK_ULONG(p.count), pPublicData: p.baseAddress)
            return try withUnsafeBytes(of: &params) { try Mechanism(type: CKM_ECDH1_DERIVE, parameter: $0) }
        }
        #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: derive, baseKey: base, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET), .bool(CKA_PRIVATE, false)]) }
                == CKR_TEMPLATE_INCONSISTENT)
    }

    /// Issue 12: C_CopyObject with CKA_PRIVATE=false made a key visible,
    /// destroyable and (as a session copy) usable without login.
    @Test func copyAndSetNeverMakeAKeyPublic() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let (pub, priv) = try ecPair(f, s)
        let aes = try f.rt.generateKey(session: s, mechanism: aesGen, template: [.ulong(CKA_VALUE_LEN, 32), .bool(CKA_TOKEN, true)])
        for key in [priv, aes] {
            for token in [false, true] {
                #expect(rv { _ = try f.rt.copyObject(session: s, object: key, template: [.bool(CKA_PRIVATE, false), .bool(CKA_TOKEN, token)]) }
                        == CKR_TEMPLATE_INCONSISTENT)
            }
            #expect(rv { try f.rt.setAttributeValue(session: s, object: key, template: [.bool(CKA_PRIVATE, false)]) }
                    == CKR_TEMPLATE_INCONSISTENT)
        }
        // A public key may become private in a copy.
        let pubCopy = try f.rt.copyObject(session: s, object: pub, template: [.bool(CKA_PRIVATE, true), .bool(CKA_TOKEN, false)])
        #expect(try isPrivate(f, s, pubCopy))
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
