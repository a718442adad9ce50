import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// ResolvedKeyMemo.swift: a session keeps the key its last key-taking Init
/// resolved, and KeyedCipherCache.swift its keyed contexts. Every change
/// that could make the memo wrong must show at the very next Init, from
/// any session or another process, and the key bytes and key schedules
/// must go at destroy, attribute change, logout and close. Outputs are
/// checked against a fresh EVP context (KeyshareCrypto's one-shots).
struct ResolvedKeyMemoTests {
    func loggedIn() throws -> (Fixture, CK_SESSION_HANDLE, CK_SLOT_ID) {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        return (f, s, slot)
    }

    func key(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ value: [UInt8], token: Bool = false,
             type: CK_KEY_TYPE = CKK_AES) throws -> CK_OBJECT_HANDLE {
        try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, type), Attribute(CKA_VALUE, value),
            .bool(CKA_ENCRYPT, true), .bool(CKA_DECRYPT, true), .bool(CKA_TOKEN, token)])
    }

    func gcm(_ iv: UInt8) -> Mechanism { .aesGCM(GCMParameters(iv: [UInt8](repeating: iv, count: 12), aad: [], tagBytes: 16)) }

    /// The C layer passes the caller's mechanism number for CKA_ALLOWED_MECHANISMS.
    let gcmType = CK_MECHANISM_TYPE(CKM_AES_GCM)

    /// C_EncryptInit + the copy-free C_Encrypt, as the C layer runs them.
    func seal(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ m: Mechanism, _ k: CK_OBJECT_HANDLE, _ plain: [UInt8]) throws -> [UInt8] {
        try f.rt.encryptInit(session: s, mechanism: m, key: k, allowing: gcmType)
        var out = [UInt8](repeating: 0, count: plain.count + 16)
        let session = try f.rt.session(s)
        let r = try plain.withUnsafeBytes { i in
            try out.withUnsafeMutableBytes { o in
                try f.rt.cipherDirect(.encrypt, session: session, input: i, output: o.baseAddress, capacity: o.count)
            }
        }
        guard case .written(let n)? = r else { throw PKCS11Error.generalError }
        return Array(out[..<n])
    }

    func want(_ k: [UInt8], _ iv: UInt8, _ plain: [UInt8]) throws -> [UInt8] {
        let (ct, t) = try AESGCM.encrypt(key: k, iv: [UInt8](repeating: iv, count: 12), plaintext: plain, aad: [], tagLength: 16)
        return ct + t
    }

    func dropped(_ f: Fixture, _ s: CK_SESSION_HANDLE) throws -> Bool {
        let session = try f.rt.session(s)
        return session.keyMemo.isEmpty && session.cipherCache.isEmpty
    }

    /// Same key, new IV each time, then another key with the same
    /// mechanism, then back, then decryption under each (the memo serves
    /// C_DecryptInit too): every output is what a fresh context gives.
    @Test func sameAndOtherKeysGiveFreshContextOutputs() throws {
        let (f, s, _) = try loggedIn()
        let k1 = [UInt8](repeating: 0x11, count: 32), k2 = [UInt8](repeating: 0x22, count: 32)
        let h1 = try key(f, s, k1), h2 = try key(f, s, k2)
        let plain = (0..<77).map { UInt8($0) }
        for (h, k, iv) in [(h1, k1, UInt8(1)), (h1, k1, 2), (h1, k1, 3), (h2, k2, 3), (h2, k2, 4), (h1, k1, 4)] {
            #expect(try seal(f, s, gcm(iv), h, plain) == (try want(k, iv, plain)), "key \(h) IV \(iv)")
        }
        for (h, k) in [(h1, k1), (h2, k2), (h1, k1)] {
            try f.rt.decryptInit(session: s, mechanism: gcm(9), key: h)
            #expect(try f.rt.decrypt(session: s, data: try want(k, 9, plain), capacity: 200) == .bytes(plain))
        }
        // The wrong key's ciphertext does not decrypt under the memoized key.
        try f.rt.decryptInit(session: s, mechanism: gcm(9), key: h1)
        #expect(rv { _ = try f.rt.decrypt(session: s, data: try want(k2, 9, plain), capacity: 200) } == CKR_ENCRYPTED_DATA_INVALID)
    }

    /// C_DestroyObject from another session: the next Init in the session
    /// that used the key is CKR_KEY_HANDLE_INVALID, and neither session
    /// keeps the key's bytes or key schedule.
    @Test func destroyedKeyIsGoneEverywhere() throws {
        let (f, s, slot) = try loggedIn()
        let t = try f.rw(slot)
        let k = [UInt8](repeating: 0x33, count: 32)
        for token in [false, true] {
            let h = try key(f, s, k, token: token)
            let plain = [UInt8](repeating: 0xAB, count: 40)
            #expect(try seal(f, s, gcm(1), h, plain) == (try want(k, 1, plain)))
            #expect(try seal(f, t, gcm(2), h, plain) == (try want(k, 2, plain)))
            #expect(try !dropped(f, s))
            try f.rt.destroyObject(session: t, object: h)
            #expect(try dropped(f, s), "token \(token)")
            #expect(try dropped(f, t), "token \(token)")
            #expect(rv { try f.rt.encryptInit(session: s, mechanism: gcm(3), key: h) } == CKR_KEY_HANDLE_INVALID, "token \(token)")
        }
    }

    /// CKA_ALLOWED_MECHANISMS narrowed and widened again, and CKA_SIGN set
    /// false (secret keys' CKA_ENCRYPT/DECRYPT are fixed, KeyUsagePolicy
    /// rule 3), on session and token keys, from another session: each
    /// change shows at the very next Init, encrypt, decrypt and sign.
    @Test func changedAttributesShowAtTheNextInit() throws {
        let (f, s, slot) = try loggedIn()
        let t = try f.rw(slot)
        let k = [UInt8](repeating: 0x44, count: 16)
        let plain = [UInt8](repeating: 1, count: 16)
        func only(_ m: CK_MECHANISM_TYPE) -> Attribute {
            Attribute(CKA_ALLOWED_MECHANISMS, withUnsafeBytes(of: m) { Array($0) })
        }
        for token in [false, true] {
            let h = try key(f, s, k, token: token)
            _ = try seal(f, s, gcm(1), h, plain)
            try f.rt.setAttributeValue(session: t, object: h, template: [only(CK_MECHANISM_TYPE(CKM_AES_CBC))])
            #expect(try dropped(f, s))
            #expect(rv { try f.rt.encryptInit(session: s, mechanism: gcm(2), key: h, allowing: gcmType) } == CKR_MECHANISM_INVALID, "token \(token)")
            #expect(rv { try f.rt.decryptInit(session: s, mechanism: gcm(2), key: h, allowing: gcmType) } == CKR_MECHANISM_INVALID, "token \(token)")
            try f.rt.setAttributeValue(session: t, object: h, template: [only(CK_MECHANISM_TYPE(CKM_AES_GCM))])
            #expect(try seal(f, s, gcm(3), h, plain) == (try want(k, 3, plain)), "token \(token)")

            let mac = try f.rt.createObject(session: s, template: [
                .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET), Attribute(CKA_VALUE, k),
                .bool(CKA_SIGN, true), .bool(CKA_TOKEN, token)])
            for _ in 0..<2 {
                try f.rt.signInit(session: s, mechanism: .hmac(.sha256), key: mac)
                #expect(try f.rt.sign(session: s, data: plain, capacity: 32) == .bytes(try HMAC.mac(.sha256, key: k, data: plain)))
            }
            try f.rt.setAttributeValue(session: t, object: mac, template: [.bool(CKA_SIGN, false)])
            #expect(rv { try f.rt.signInit(session: s, mechanism: .hmac(.sha256), key: mac) } == CKR_KEY_FUNCTION_NOT_PERMITTED,
                    "token \(token)")
        }
    }

    /// A token key changed by another process (a second runtime on the
    /// same store, as the CLI or another application would be): the store's
    /// counter moves, so the memo is not used.
    @Test func changeByAnotherProcessShowsAtTheNextInit() throws {
        let (f, s, slot) = try loggedIn()
        let k = [UInt8](repeating: 0x55, count: 32)
        let h = try key(f, s, k, token: true)
        let plain = [UInt8](repeating: 2, count: 32)
        #expect(try seal(f, s, gcm(1), h, plain) == (try want(k, 1, plain)))
        let other = try Runtime(home: f.home)
        defer { other.shutdown() }
        let o = try other.openSession(slot: slot, flags: CKF_SERIAL_SESSION | CKF_RW_SESSION)
        try other.login(session: o, userType: CKU_USER, pin: userPIN)
        try other.findObjectsInit(session: o, template: [.ulong(CKA_CLASS, CKO_SECRET_KEY)])
        let found = try other.findObjects(session: o, max: 10)
        try other.findObjectsFinal(session: o)
        #expect(found.count == 1)
        let cbcOnly = withUnsafeBytes(of: CK_MECHANISM_TYPE(CKM_AES_CBC)) { Array($0) }
        try other.setAttributeValue(session: o, object: found[0], template: [Attribute(CKA_ALLOWED_MECHANISMS, cbcOnly)])
        #expect(rv { try f.rt.encryptInit(session: s, mechanism: gcm(2), key: h, allowing: gcmType) } == CKR_MECHANISM_INVALID)
        try other.destroyObject(session: o, object: found[0])
        #expect(rv { try f.rt.decryptInit(session: s, mechanism: gcm(2), key: h, allowing: gcmType) } == CKR_KEY_HANDLE_INVALID)
    }

    /// C_Logout drops the memo and contexts of every session of the token,
    /// and the key is then CKR_USER_NOT_LOGGED_IN; C_CloseSession drops a
    /// closed session's session keys from the other sessions' memos.
    @Test func logoutAndCloseDropEverything() throws {
        let (f, s, slot) = try loggedIn()
        let t = try f.rw(slot)
        let k = [UInt8](repeating: 0x66, count: 32)
        let h = try key(f, s, k)
        let plain = [UInt8](repeating: 3, count: 20)
        _ = try seal(f, s, gcm(1), h, plain)
        _ = try seal(f, t, gcm(1), h, plain)
        try f.rt.logout(session: s)
        #expect(try dropped(f, s))
        #expect(try dropped(f, t))
        #expect(rv { try f.rt.encryptInit(session: t, mechanism: gcm(2), key: h) } == CKR_USER_NOT_LOGGED_IN)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let u = try f.rw(slot)
        let h2 = try key(f, u, k)  // a session object of u
        #expect(try seal(f, s, gcm(3), h2, plain) == (try want(k, 3, plain)))
        try f.rt.closeSession(u)
        #expect(try dropped(f, s))
        #expect(rv { try f.rt.encryptInit(session: s, mechanism: gcm(4), key: h2) } == CKR_KEY_HANDLE_INVALID)
    }

    /// The checked key (CheckedCipherKey.swift) serves only the mechanism
    /// type and direction it was checked for: an encrypt-only key still
    /// refuses C_DecryptInit after many C_EncryptInits, a ChaCha20 key
    /// still refuses CKM_AES_GCM, another AES mode goes the full way and
    /// gives a fresh context's output.
    @Test func checkedKeyServesOnlyItsTypeAndDirection() throws {
        let (f, s, _) = try loggedIn()
        let k = [UInt8](repeating: 0x77, count: 32)
        let h = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), Attribute(CKA_VALUE, k),
            .bool(CKA_ENCRYPT, true), .bool(CKA_DECRYPT, false)])
        let plain = (0..<50).map { UInt8($0 * 3 & 0xFF) }
        for iv in UInt8(1)...3 { #expect(try seal(f, s, gcm(iv), h, plain) == (try want(k, iv, plain))) }
        #expect(rv { try f.rt.decryptInit(session: s, mechanism: gcm(1), key: h, allowing: gcmType) } == CKR_KEY_FUNCTION_NOT_PERMITTED)
        let cb = [UInt8](repeating: 5, count: 16)
        for _ in 0..<2 {
            try f.rt.encryptInit(session: s, mechanism: .aesCTR(counterBlock: cb, counterBits: 128), key: h,
                                 allowing: CK_MECHANISM_TYPE(CKM_AES_CTR))
            #expect(try f.rt.encrypt(session: s, data: plain, capacity: 100)
                    == .bytes(try AESMode.ctr.context(key: k, iv: cb, encrypt: true).update(plain)))
        }
        #expect(try seal(f, s, gcm(4), h, plain) == (try want(k, 4, plain)))

        let chacha = try key(f, s, k, type: CKK_CHACHA20)
        let chachaType = CK_MECHANISM_TYPE(CKM_CHACHA20_POLY1305)
        let nonce = [UInt8](repeating: 6, count: 12)
        for _ in 0..<2 {
            try f.rt.encryptInit(session: s, mechanism: .chacha20Poly1305(ChaChaPolyParameters(nonce: nonce, aad: [])), key: chacha,
                                 allowing: chachaType)
            let (ct, tag) = try ChaCha20Poly1305.encrypt(key: k, nonce: nonce, plaintext: plain, aad: [])
            #expect(try f.rt.encrypt(session: s, data: plain, capacity: 100) == .bytes(ct + tag))
        }
        #expect(rv { try f.rt.encryptInit(session: s, mechanism: gcm(5), key: chacha, allowing: gcmType) } == CKR_KEY_TYPE_INCONSISTENT)
        // And an invalid parameter on the fast path is the same error as on the full one.
        #expect(rv { try f.rt.encryptInit(session: s, mechanism: .aesGCM(GCMParameters(iv: [1], aad: [], tagBytes: 16)), key: h,
                                          allowing: gcmType) } == CKR_OK)
        _ = try f.rt.encrypt(session: s, data: plain, capacity: 100)
        #expect(rv { try f.rt.encryptInit(session: s, mechanism: .aesCTR(counterBlock: [1, 2], counterBits: 128), key: h,
                                          allowing: CK_MECHANISM_TYPE(CKM_AES_CTR)) } == CKR_MECHANISM_PARAM_INVALID)
    }
}
