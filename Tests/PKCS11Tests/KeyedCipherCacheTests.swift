import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// KeyedCipherCache.swift: a session reuses its last keyed AES-GCM /
/// ChaCha20-Poly1305 context for the next single-part C_Encrypt under the
/// same key value. Every output is checked against a fresh context
/// (KeyshareCrypto's one-shot AESGCM / ChaCha20Poly1305), across IV, AAD,
/// tag length and key changes, interleaved keys and algorithms, a logout,
/// and a call that fails.
struct KeyedCipherCacheTests {
    func key(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ type: CK_KEY_TYPE, _ value: [UInt8]) throws -> CK_OBJECT_HANDLE {
        try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, type), Attribute(CKA_VALUE, value), .bool(CKA_ENCRYPT, true)])
    }

    /// C_EncryptInit + the copy-free C_Encrypt, as the C layer runs them.
    func seal(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ m: Mechanism, _ k: CK_OBJECT_HANDLE, _ plain: [UInt8]) throws -> [UInt8] {
        try f.rt.encryptInit(session: s, mechanism: m, key: k)
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

    @Test func reusedContextsGiveWhatAFreshContextGives() throws {
        let (f, s) = try loggedIn()
        let k1 = [UInt8](repeating: 0x11, count: 32), k2 = [UInt8](repeating: 0x22, count: 32)
        let a1 = try key(f, s, CKK_AES, k1), a2 = try key(f, s, CKK_AES, k2)
        let c1 = try key(f, s, CKK_CHACHA20, k1)
        let plain = (0..<100).map { UInt8($0) }
        // Same key many times (the cached context restarted), other IV lengths
        // and tag lengths, AAD on and off, then another key, then the other algorithm, and back.
        let steps: [(CK_OBJECT_HANDLE, [UInt8], Bool, [UInt8], [UInt8], Int)] = [
            (a1, k1, true, [UInt8](repeating: 1, count: 12), [], 16),
            (a1, k1, true, [UInt8](repeating: 2, count: 12), [9, 9], 16),
            (a1, k1, true, [UInt8](repeating: 3, count: 16), [], 12),
            (a1, k1, true, [UInt8](repeating: 4, count: 12), [], 16),
            (a2, k2, true, [UInt8](repeating: 4, count: 12), [], 16),
            (c1, k1, false, [UInt8](repeating: 5, count: 12), [7], 16),
            (c1, k1, false, [UInt8](repeating: 6, count: 12), [], 16),
            (a1, k1, true, [UInt8](repeating: 4, count: 12), [], 16),
        ]
        for (h, k, gcm, iv, aad, tag) in steps {
            let got: [UInt8]
            let want: [UInt8]
            if gcm {
                got = try seal(f, s, .aesGCM(GCMParameters(iv: iv, aad: aad, tagBytes: tag)), h, plain)
                let (ct, t) = try AESGCM.encrypt(key: k, iv: iv, plaintext: plain, aad: aad, tagLength: tag)
                want = ct + t
            } else {
                got = try seal(f, s, .chacha20Poly1305(ChaChaPolyParameters(nonce: iv, aad: aad)), h, plain)
                let (ct, t) = try ChaCha20Poly1305.encrypt(key: k, nonce: iv, plaintext: plain, aad: aad)
                want = ct + t
            }
            #expect(got == want, "key \(h), IV \(iv.count) bytes, AAD \(aad.count), tag \(tag)")
        }
        // The same after a logout and login (the cache was dropped), and
        // with a multi-part encryption in between (which does not use it).
        try f.rt.logout(session: s)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let a3 = try key(f, s, CKK_AES, k1)
        let iv = [UInt8](repeating: 8, count: 12)
        try f.rt.encryptInit(session: s, mechanism: .aesGCM(GCMParameters(iv: iv, aad: [], tagBytes: 16)), key: a3)
        _ = try f.rt.encryptUpdate(session: s, part: plain, capacity: 200)
        _ = try f.rt.encryptFinal(session: s, capacity: 16)
        let got = try seal(f, s, .aesGCM(GCMParameters(iv: iv, aad: [], tagBytes: 16)), a3, plain)
        let (ct, t) = try AESGCM.encrypt(key: k1, iv: iv, plaintext: plain, aad: [], tagLength: 16)
        #expect(got == ct + t)
    }

    /// Two sessions, each with its own cache, interleaved on one key: no
    /// session sees the other's state.
    @Test func sessionsDoNotShareContexts() throws {
        let (f, s) = try loggedIn()
        let t = try f.rw(CK_SLOT_ID(try f.rt.session(s).slotID))
        let k = [UInt8](repeating: 0x33, count: 16)
        let h = try key(f, s, CKK_AES, k)
        let plain = [UInt8](repeating: 0xAB, count: 33)
        for i in 0..<6 {
            let iv = [UInt8](repeating: UInt8(i), count: 12)
            let got = try seal(f, i % 2 == 0 ? s : t, .aesGCM(GCMParameters(iv: iv, aad: [], tagBytes: 16)), h, plain)
            let (ct, tag) = try AESGCM.encrypt(key: k, iv: iv, plaintext: plain, aad: [], tagLength: 16)
            #expect(got == ct + tag)
        }
    }

    /// AES-CTR's keyed context: a single-part C_Encrypt restarts the
    /// session's last CTR context at the new counter block. Odd lengths leave
    /// the old context mid-block, so a restart that kept its stream position
    /// would show; every output is checked against a fresh context, across
    /// counter blocks, key sizes, keys, a multi-part CTR encryption (which
    /// makes its own context) and a GCM call in between, and the counter
    /// field's wrap limit still holds on the cached path.
    @Test func reusedCTRContextsGiveWhatAFreshContextGives() throws {
        let (f, s) = try loggedIn()
        let k1 = [UInt8](repeating: 0x41, count: 32), k2 = [UInt8](repeating: 0x42, count: 16)
        let a1 = try key(f, s, CKK_AES, k1), a2 = try key(f, s, CKK_AES, k2)
        func fresh(_ k: [UInt8], _ cb: [UInt8], _ p: [UInt8]) throws -> [UInt8] {
            try AESMode.ctr.context(key: k, iv: cb, encrypt: true).update(p)
        }
        let steps: [(CK_OBJECT_HANDLE, [UInt8], UInt8, Int)] = [
            (a1, k1, 1, 37), (a1, k1, 2, 5), (a1, k1, 2, 5), (a1, k1, 3, 100), (a2, k2, 3, 17), (a1, k1, 4, 16), (a1, k1, 5, 1),
        ]
        for (h, k, c, n) in steps {
            let cb = [UInt8](repeating: c, count: 15) + [0xFE]  // the counter crosses a byte boundary in a 37-byte message
            let plain = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let got = try seal(f, s, .aesCTR(counterBlock: cb, counterBits: 128), h, plain)
            #expect(got == (try fresh(k, cb, plain)), "counter \(c), \(n) bytes")
        }
        // A multi-part CTR encryption and a GCM message in between.
        let cb = [UInt8](repeating: 9, count: 16)
        let plain = [UInt8](repeating: 0x5A, count: 45)
        try f.rt.encryptInit(session: s, mechanism: .aesCTR(counterBlock: cb, counterBits: 128), key: a1)
        guard case .bytes(let first) = try f.rt.encryptUpdate(session: s, part: Array(plain[..<20]), capacity: 64),
              case .bytes(let second) = try f.rt.encryptUpdate(session: s, part: Array(plain[20...]), capacity: 64) else {
            throw PKCS11Error.generalError
        }
        _ = try f.rt.encryptFinal(session: s, capacity: 16)
        #expect(first + second == (try fresh(k1, cb, plain)))
        _ = try seal(f, s, .aesGCM(GCMParameters(iv: [UInt8](repeating: 1, count: 12), aad: [], tagBytes: 16)), a1, plain)
        #expect(try seal(f, s, .aesCTR(counterBlock: cb, counterBits: 128), a1, plain) == (try fresh(k1, cb, plain)))
        // The wrap limit: an 8-bit counter field at 0xFE has 2 blocks left.
        let nearWrap = [UInt8](repeating: 0, count: 15) + [0xFE]
        #expect(rv { _ = try seal(f, s, .aesCTR(counterBlock: nearWrap, counterBits: 8), a1, [UInt8](repeating: 0, count: 33)) }
                == CKR_DATA_LEN_RANGE)
        #expect(try seal(f, s, .aesCTR(counterBlock: nearWrap, counterBits: 8), a1, [UInt8](repeating: 0, count: 32))
                == (try fresh(k1, nearWrap, [UInt8](repeating: 0, count: 32))))
    }
}
