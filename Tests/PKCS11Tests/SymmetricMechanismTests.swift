import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// The symmetric mechanisms of issue 13 at the Runtime level: published
/// vectors through C_Encrypt / C_Sign semantics, exact length answers in
/// multi-part use, the parameter checks, the new wrap mechanisms and their
/// rules, DES / 3DES / ChaCha20 keys, and message-based AEAD. The C-level
/// checks (NULL pointers, ulParameterLen, the message entry points) are in
/// Tests/integration/68-symmetric.sh.
struct SymmetricMechanismTests {
    static let key128 = hex("2b7e151628aed2a6abf7158809cf4f3c")
    static let sp80038aPlain = hex("""
        6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51\
        30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710
        """)

    static func hex(_ s: String) -> [UInt8] {
        let c = Array(s.utf8.filter { $0 != 0x20 && $0 != 0x0A })
        return stride(from: 0, to: c.count, by: 2).map { UInt8(String(decoding: c[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
    }

    func secret(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ type: CK_KEY_TYPE, _ value: [UInt8],
                _ extra: Template = []) throws -> CK_OBJECT_HANDLE {
        try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, type), Attribute(CKA_VALUE, value),
        ] + extra)
    }

    func generated(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ flags: [CK_ATTRIBUTE_TYPE: Bool], extractable: Bool = false,
                   sensitive: Bool = true) throws -> CK_OBJECT_HANDLE {
        try f.rt.generateKey(session: s, mechanism: try Mechanism(type: CKM_AES_KEY_GEN, parameter: nil),
                             template: [.ulong(CKA_VALUE_LEN, 16), .bool(CKA_EXTRACTABLE, extractable),
                                        .bool(CKA_SENSITIVE, sensitive)] + flags.map { .bool($0.key, $0.value) })
    }

    func mech<T>(_ type: CK_MECHANISM_TYPE, _ value: T) throws -> Mechanism {
        var v = value
        return try withUnsafeBytes(of: &v) { try Mechanism(type: type, parameter: $0) }
    }

    func mech(_ type: CK_MECHANISM_TYPE, bytes: [UInt8]) throws -> Mechanism {
        try bytes.withUnsafeBytes { try Mechanism(type: type, parameter: $0) }
    }

    func ctrParams(_ cb: [UInt8], bits: CK_ULONG) -> CK_AES_CTR_PARAMS {
        var p = CK_AES_CTR_PARAMS()
        p.ulCounterBits = bits
        withUnsafeMutableBytes(of: &p.cb) { $0.copyBytes(from: cb) }
        return p
    }

    func bytes(_ r: OutputResult) -> [UInt8] {
        if case .bytes(let b) = r { return b }
        Issue.record("expected bytes, got \(r)")
        return []
    }

    /// Encrypt (or decrypt) `data` in parts of `step` bytes, checking that
    /// every length answer is the exact size of the bytes that follow.
    func multipart(_ f: Fixture, _ s: CK_SESSION_HANDLE, encrypt: Bool, _ m: Mechanism, _ key: CK_OBJECT_HANDLE,
                   _ data: [UInt8], step: Int) throws -> [UInt8] {
        if encrypt { try f.rt.encryptInit(session: s, mechanism: m, key: key) } else {
            try f.rt.decryptInit(session: s, mechanism: m, key: key)
        }
        var out: [UInt8] = []
        var i = 0
        while i < data.count {
            let part = Array(data[i..<min(data.count, i + step)])
            let q = encrypt ? try f.rt.encryptUpdate(session: s, part: part, capacity: nil)
                : try f.rt.decryptUpdate(session: s, part: part, capacity: nil)
            guard case .length(let n) = q else { Issue.record("no length"); return [] }
            let got = bytes(encrypt ? try f.rt.encryptUpdate(session: s, part: part, capacity: n)
                                : try f.rt.decryptUpdate(session: s, part: part, capacity: n))
            #expect(got.count == n, "update length answer")
            out += got
            i += step
        }
        let q = encrypt ? try f.rt.encryptFinal(session: s, capacity: nil) : try f.rt.decryptFinal(session: s, capacity: nil)
        guard case .length(let n) = q else { Issue.record("no final length"); return [] }
        let last = bytes(encrypt ? try f.rt.encryptFinal(session: s, capacity: n) : try f.rt.decryptFinal(session: s, capacity: n))
        #expect(last.count <= n)
        return out + last
    }

    func oneShot(_ f: Fixture, _ s: CK_SESSION_HANDLE, encrypt: Bool, _ m: Mechanism, _ key: CK_OBJECT_HANDLE,
                 _ data: [UInt8]) throws -> [UInt8] {
        if encrypt {
            try f.rt.encryptInit(session: s, mechanism: m, key: key)
            guard case .length(let n) = try f.rt.encrypt(session: s, data: data, capacity: nil) else { return [] }
            return bytes(try f.rt.encrypt(session: s, data: data, capacity: n))
        }
        try f.rt.decryptInit(session: s, mechanism: m, key: key)
        guard case .length(let n) = try f.rt.decrypt(session: s, data: data, capacity: nil) else { return [] }
        return bytes(try f.rt.decrypt(session: s, data: data, capacity: n))
    }

    @Test func catalog() throws {
        let info = { (t: CK_MECHANISM_TYPE) in MechanismCatalog.info(t) }
        let ed = CKF_ENCRYPT | CKF_DECRYPT
        for t in [CKM_AES_CTR, CKM_AES_CTS] { #expect(info(t)?.flags == ed) }
        for t in [CKM_AES_ECB, CKM_AES_CBC] { #expect(info(t)?.flags == ed | CKF_WRAP | CKF_UNWRAP) }
        #expect(info(CKM_AES_CMAC)?.flags == CKF_SIGN | CKF_VERIFY)
        #expect(info(CKM_AES_CMAC_GENERAL)?.flags == CKF_SIGN | CKF_VERIFY)
        #expect(info(CKM_AES_CBC_PAD)?.flags == ed | CKF_WRAP | CKF_UNWRAP)
        let msg = CKF_MESSAGE_ENCRYPT | CKF_MESSAGE_DECRYPT | CKF_MULTI_MESSAGE
        #expect(info(CKM_AES_GCM)?.flags == ed | CKF_WRAP | CKF_UNWRAP | msg)
        #expect(info(CKM_CHACHA20_POLY1305)?.flags == ed | msg)
        #expect(info(CKM_CHACHA20_KEY_GEN)?.flags == CKF_GENERATE && info(CKM_CHACHA20_KEY_GEN)?.minKeySize == 32)
        for t in [CKM_DES_ECB, CKM_DES_CBC, CKM_DES_CBC_PAD] { #expect(info(t)?.flags == ed) }
        for t in [CKM_DES3_ECB, CKM_DES3_CBC, CKM_DES3_CBC_PAD] { #expect(info(t)?.flags == ed | CKF_WRAP | CKF_UNWRAP) }
        #expect(info(CKM_DES3_KEY_GEN)?.flags == CKF_GENERATE && info(CKM_DES_KEY_GEN)?.flags == CKF_GENERATE)
        let all = MechanismCatalog.entries.map(\.0)
        #expect(Set(all).count == all.count, "no mechanism listed twice")
    }

    /// SP 800-38A F.1.1 and F.5.1 through C_Encrypt / C_Decrypt, single- and multi-part.
    @Test func aesECBAndCTRVectors() throws {
        let (f, s) = try loggedIn()
        let key = try secret(f, s, CKK_AES, Self.key128)
        let ecb = Self.hex("3ad77bb40d7a3660a89ecaf32466ef97f5d3d58503b9699de785895a96fdbaaf43b1cd7f598ece23881b00e3ed0306887b0c785e27e8ad3f8223207104725dd4")
        let m = try Mechanism(type: CKM_AES_ECB, parameter: nil)
        #expect(try oneShot(f, s, encrypt: true, m, key, Self.sp80038aPlain) == ecb)
        #expect(try multipart(f, s, encrypt: true, m, key, Self.sp80038aPlain, step: 7) == ecb)
        #expect(try multipart(f, s, encrypt: false, m, key, ecb, step: 20) == Self.sp80038aPlain)
        try f.rt.encryptInit(session: s, mechanism: m, key: key)
        #expect(rv { _ = try f.rt.encrypt(session: s, data: [1, 2, 3], capacity: 64) } == CKR_DATA_LEN_RANGE)

        let ctr = try mech(CKM_AES_CTR, ctrParams(Self.hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"), bits: 128))
        let ctrOut = Self.hex("874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff5ae4df3edbd5d35e5b4f09020db03eab1e031dda2fbe03d1792170a0f3009cee")
        #expect(try oneShot(f, s, encrypt: true, ctr, key, Self.sp80038aPlain) == ctrOut)
        #expect(try multipart(f, s, encrypt: true, ctr, key, Self.sp80038aPlain, step: 5) == ctrOut)
        #expect(try multipart(f, s, encrypt: false, ctr, key, ctrOut, step: 13) == Self.sp80038aPlain)
    }

    /// CK_AES_CTR_PARAMS: ulCounterBits 1-128, exactly the struct's size; input
    /// past the counter field's wrap is CKR_DATA_LEN_RANGE and ends the operation.
    @Test func aesCTRParameters() throws {
        let (f, s) = try loggedIn()
        let key = try secret(f, s, CKK_AES, Self.key128)
        let cb = [UInt8](repeating: 0, count: 15) + [0xFE]
        for bits: CK_ULONG in [0, 129, 1 << 40] {
            #expect(rv { _ = try mech(CKM_AES_CTR, ctrParams(cb, bits: bits)) } == CKR_MECHANISM_PARAM_INVALID)
        }
        #expect(rv { _ = try mech(CKM_AES_CTR, bytes: [UInt8](repeating: 0, count: 16)) } == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv { _ = try Mechanism(type: CKM_AES_CTR, parameter: nil) } == CKR_MECHANISM_PARAM_INVALID)
        // 8 counter bits at 0xFE: two blocks left.
        let m = try mech(CKM_AES_CTR, ctrParams(cb, bits: 8))
        #expect(try oneShot(f, s, encrypt: true, m, key, [UInt8](repeating: 1, count: 32)).count == 32)
        try f.rt.encryptInit(session: s, mechanism: m, key: key)
        #expect(rv { _ = try f.rt.encrypt(session: s, data: [UInt8](repeating: 1, count: 33), capacity: 64) } == CKR_DATA_LEN_RANGE)
        #expect(try !f.rt.session(s).isActive(.encrypt))
        try f.rt.encryptInit(session: s, mechanism: m, key: key)
        _ = try f.rt.encryptUpdate(session: s, part: [UInt8](repeating: 1, count: 20), capacity: 64)
        #expect(rv { _ = try f.rt.encryptUpdate(session: s, part: [UInt8](repeating: 1, count: 13), capacity: 64) }
                == CKR_DATA_LEN_RANGE)
        // With all 128 bits counting, the 8-bit case's output is the plain AES-CTR of OpenSSL.
        let full = try oneShot(f, s, encrypt: true, try mech(CKM_AES_CTR, ctrParams(cb, bits: 128)), key, [UInt8](repeating: 1, count: 32))
        #expect(try oneShot(f, s, encrypt: true, m, key, [UInt8](repeating: 1, count: 32)) == full)
    }

    /// CS1 through the module: multi-part equals single-part for every split,
    /// at every length around the block boundaries.
    @Test func aesCTSMultipart() throws {
        let (f, s) = try loggedIn()
        let key = try secret(f, s, CKK_AES, Self.key128)
        let iv = [UInt8](0..<16)
        let m = try mech(CKM_AES_CTS, bytes: iv)
        #expect(rv { _ = try mech(CKM_AES_CTS, bytes: [1, 2, 3]) } == CKR_MECHANISM_PARAM_INVALID)
        for n in [16, 17, 31, 32, 33, 47, 48, 49, 64, 65, 100] {
            let data = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let ct = try oneShot(f, s, encrypt: true, m, key, data)
            #expect(ct.count == n)
            let direct = try AESMode.cbcCTS.context(key: Self.key128, iv: iv, encrypt: true)
            #expect(ct == (try direct.update(data) + direct.finish()), "\(n)")
            for step in [1, 5, 16, 17, 40] {
                #expect(try multipart(f, s, encrypt: true, m, key, data, step: step) == ct, "\(n)/\(step)")
                #expect(try multipart(f, s, encrypt: false, m, key, ct, step: step) == data, "\(n)/\(step) decrypt")
            }
        }
        try f.rt.encryptInit(session: s, mechanism: m, key: key)
        #expect(rv { _ = try f.rt.encrypt(session: s, data: [UInt8](repeating: 0, count: 15), capacity: 64) } == CKR_DATA_LEN_RANGE)
        try f.rt.encryptInit(session: s, mechanism: m, key: key)
        _ = try f.rt.encryptUpdate(session: s, part: [1, 2, 3], capacity: 64)
        #expect(rv { _ = try f.rt.encryptFinal(session: s, capacity: 64) } == CKR_DATA_LEN_RANGE)
    }

    /// RFC 4493 examples 2 and 4 through C_Sign / C_Verify; CMAC_GENERAL truncates.
    @Test func aesCMAC() throws {
        let (f, s) = try loggedIn()
        let key = try secret(f, s, CKK_AES, Self.key128)
        let cmac = try Mechanism(type: CKM_AES_CMAC, parameter: nil)
        try f.rt.signInit(session: s, mechanism: cmac, key: key)
        #expect(try f.rt.sign(session: s, data: Array(Self.sp80038aPlain[..<16]), capacity: nil) == .length(16))
        let mac = bytes(try f.rt.sign(session: s, data: Array(Self.sp80038aPlain[..<16]), capacity: 16))
        #expect(mac == Self.hex("070a16b46b4d4144f79bdd9dd04a287c"))
        try f.rt.signInit(session: s, mechanism: cmac, key: key)
        try f.rt.signUpdate(session: s, part: Array(Self.sp80038aPlain[..<33]))
        try f.rt.signUpdate(session: s, part: Array(Self.sp80038aPlain[33...]))
        #expect(bytes(try f.rt.signFinal(session: s, capacity: 16)) == Self.hex("51f0bebf7e3b9d92fc49741779363cfe"))
        try f.rt.verifyInit(session: s, mechanism: cmac, key: key)
        try f.rt.verify(session: s, data: Array(Self.sp80038aPlain[..<16]), signature: mac)
        try f.rt.verifyInit(session: s, mechanism: cmac, key: key)
        #expect(rv { try f.rt.verify(session: s, data: [0], signature: mac) } == CKR_SIGNATURE_INVALID)

        var eight: CK_ULONG = 8
        let general = try mech(CKM_AES_CMAC_GENERAL, eight)
        try f.rt.signInit(session: s, mechanism: general, key: key)
        #expect(bytes(try f.rt.sign(session: s, data: Array(Self.sp80038aPlain[..<16]), capacity: 8)) == Array(mac[..<8]))
        try f.rt.verifyInit(session: s, mechanism: general, key: key)
        #expect(rv { try f.rt.verify(session: s, data: Array(Self.sp80038aPlain[..<16]), signature: mac) } == CKR_SIGNATURE_LEN_RANGE)
        for bad: CK_ULONG in [0, 17] {
            eight = bad
            #expect(rv { _ = try mech(CKM_AES_CMAC_GENERAL, eight) } == CKR_MECHANISM_PARAM_INVALID)
        }
        #expect(rv { _ = try mech(CKM_AES_CMAC, bytes: [1]) } == CKR_MECHANISM_PARAM_INVALID)
        // Not a key for CMAC: a generic secret.
        let generic = try secret(f, s, CKK_GENERIC_SECRET, [UInt8](repeating: 1, count: 16))
        #expect(rv { try f.rt.signInit(session: s, mechanism: cmac, key: generic) } == CKR_KEY_TYPE_INCONSISTENT)
        let noSign = try secret(f, s, CKK_AES, Self.key128, [.bool(CKA_SIGN, false)])
        #expect(rv { try f.rt.signInit(session: s, mechanism: cmac, key: noSign) } == CKR_KEY_FUNCTION_NOT_PERMITTED)
    }

    /// DES and 3DES keys: generated with odd parity, created or unwrapped only
    /// with it; SP 800-67 and FIPS 81 vectors through the module.
    @Test func desAndTripleDES() throws {
        let (f, s) = try loggedIn()
        for (gen, type, size) in [(CKM_DES3_KEY_GEN, CKK_DES3, 24), (CKM_DES_KEY_GEN, CKK_DES, 8)] {
            let h = try f.rt.generateKey(session: s, mechanism: try Mechanism(type: gen, parameter: nil),
                                         template: [.bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)])
            let got = try f.rt.getAttributeValue(session: s, object: h, types: [CKA_VALUE, CKA_KEY_TYPE, CKA_LOCAL,
                                                                               CKA_KEY_GEN_MECHANISM])
            guard case .value(let v) = got[0] else { Issue.record("no value"); continue }
            #expect(v.count == size && DES.hasOddParity(v))
            #expect(got[1] == .value(AttributeCoding.ulong(type)) && got[2] == .value([1]))
            #expect(got[3] == .value(AttributeCoding.ulong(gen)))
            #expect(rv { _ = try f.rt.generateKey(session: s, mechanism: try Mechanism(type: gen, parameter: nil),
                                                  template: [.ulong(CKA_VALUE_LEN, 16)]) } == CKR_TEMPLATE_INCONSISTENT)
        }
        let k3 = Self.hex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")
        var badParity = k3
        badParity[0] ^= 1
        #expect(rv { _ = try secret(f, s, CKK_DES3, badParity) } == CKR_ATTRIBUTE_VALUE_INVALID)
        #expect(rv { _ = try secret(f, s, CKK_DES3, Array(k3[..<16])) } == CKR_ATTRIBUTE_VALUE_INVALID)
        let tdes = try secret(f, s, CKK_DES3, k3)
        let ecb3 = try Mechanism(type: CKM_DES3_ECB, parameter: nil)
        let p3 = Array("The qufck brown fox jump".utf8)
        #expect(try oneShot(f, s, encrypt: true, ecb3, tdes, p3) == Self.hex("a826fd8ce53b855fcce21c8112256fe668d5c05dd9b6b900"))

        let des = try secret(f, s, CKK_DES, Self.hex("0123456789abcdef"))
        let iv = Self.hex("1234567890abcdef")
        let cbc = try mech(CKM_DES_CBC, bytes: iv)
        let p = Array("Now is the time for all ".utf8)
        let c = Self.hex("e5c7cdde872bf27c43e934008c389c0f683788499a7c05f6")
        #expect(try oneShot(f, s, encrypt: true, cbc, des, p) == c)
        #expect(try multipart(f, s, encrypt: false, cbc, des, c, step: 5) == p)
        // CBC_PAD: multi-part equals single-part; a 3DES key is not a DES key.
        let pad3 = try mech(CKM_DES3_CBC_PAD, bytes: iv)
        let data = [UInt8](repeating: 0x33, count: 29)
        let padded = try oneShot(f, s, encrypt: true, pad3, tdes, data)
        #expect(padded.count == 32)
        #expect(try multipart(f, s, encrypt: true, pad3, tdes, data, step: 3) == padded)
        #expect(try multipart(f, s, encrypt: false, pad3, tdes, padded, step: 8) == data)
        #expect(rv { try f.rt.encryptInit(session: s, mechanism: cbc, key: tdes) } == CKR_KEY_TYPE_INCONSISTENT)
        #expect(rv { _ = try mech(CKM_DES3_CBC, bytes: [UInt8](repeating: 0, count: 16)) } == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv { _ = try mech(CKM_DES_ECB, bytes: [1]) } == CKR_MECHANISM_PARAM_INVALID)
    }

    /// RFC 8439 §2.8.2 through C_Encrypt with CK_SALSA20_CHACHA20_POLY1305_PARAMS.
    @Test func chacha20Poly1305() throws {
        let (f, s) = try loggedIn()
        let gen = try f.rt.generateKey(session: s, mechanism: try Mechanism(type: CKM_CHACHA20_KEY_GEN, parameter: nil),
                                       template: [])
        #expect(try f.rt.getAttributeValue(session: s, object: gen, types: [CKA_KEY_TYPE, CKA_VALUE_LEN])
                == [.value(AttributeCoding.ulong(CKK_CHACHA20)), .value(AttributeCoding.ulong(32))])
        let key = try secret(f, s, CKK_CHACHA20, [UInt8](0x80...0x9f))
        #expect(rv { _ = try secret(f, s, CKK_CHACHA20, [UInt8](repeating: 1, count: 16)) } == CKR_ATTRIBUTE_VALUE_INVALID)
        var nonce = Self.hex("070000004041424344454647"), aad = Self.hex("50515253c0c1c2c3c4c5c6c7")
        let pt = Array("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".utf8)
        let expected = Self.hex("""
            d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b\
            1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc\
            3ff4def08e4b7a9de576d26586cec64b6116\
            1ae10b594f09e26a7e902ecbd0600691
            """)
        let m = try nonce.withUnsafeMutableBufferPointer { n in
            try aad.withUnsafeMutableBufferPointer { a in
                try mech(CKM_CHACHA20_POLY1305, CK_SALSA20_CHACHA20_POLY1305_PARAMS(
                    pNonce: n.baseAddress, ulNonceLen: 12, pAAD: a.baseAddress, ulAADLen: 12))
            }
        }
        #expect(try oneShot(f, s, encrypt: true, m, key, pt) == expected)
        #expect(try multipart(f, s, encrypt: true, m, key, pt, step: 33) == expected)
        #expect(try oneShot(f, s, encrypt: false, m, key, expected) == pt)
        #expect(try multipart(f, s, encrypt: false, m, key, expected, step: 10) == pt)
        var tampered = expected
        tampered[5] ^= 0x80
        try f.rt.decryptInit(session: s, mechanism: m, key: key)
        #expect(rv { _ = try f.rt.decrypt(session: s, data: tampered, capacity: 200) } == CKR_ENCRYPTED_DATA_INVALID)
        // Nonces other than 96 bits, NULL pointers with lengths, a wrong struct size.
        let bad = nonce.withUnsafeMutableBufferPointer { n in
            rv { _ = try mech(CKM_CHACHA20_POLY1305, CK_SALSA20_CHACHA20_POLY1305_PARAMS(
                pNonce: n.baseAddress, ulNonceLen: 8, pAAD: nil, ulAADLen: 0)) }
        }
        #expect(bad == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv { _ = try mech(CKM_CHACHA20_POLY1305, CK_SALSA20_CHACHA20_POLY1305_PARAMS(
            pNonce: nil, ulNonceLen: 12, pAAD: nil, ulAADLen: 0)) } == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv { _ = try mech(CKM_CHACHA20_POLY1305, bytes: [UInt8](repeating: 0, count: 12)) } == CKR_MECHANISM_PARAM_INVALID)
        // An AES key is not a ChaCha20 key.
        let aes = try secret(f, s, CKK_AES, [UInt8](repeating: 1, count: 32))
        #expect(rv { try f.rt.encryptInit(session: s, mechanism: m, key: aes) } == CKR_KEY_TYPE_INCONSISTENT)
    }

    /// CKM_AES_CBC_PAD and CKM_AES_GCM as wrap mechanisms, KW with an
    /// alternative IV, and rules 6 and 7 of KeyUsagePolicy.
    @Test func wrapMechanisms() throws {
        let (f, s) = try loggedIn()
        let wrapOnly = try generated(f, s, [CKA_ENCRYPT: false, CKA_DECRYPT: false, CKA_WRAP: true, CKA_UNWRAP: false])
        let kek = try generated(f, s, [CKA_ENCRYPT: false, CKA_DECRYPT: false, CKA_WRAP: true, CKA_UNWRAP: true])
        let sensitive = try generated(f, s, [CKA_WRAP: false], extractable: true)
        let open = try secret(f, s, CKK_AES, [UInt8](repeating: 7, count: 16),
                              [.bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)])
        let iv = [UInt8](repeating: 3, count: 16)
        let cbcPad = Mechanism.aesCBC(iv: iv, pad: true)
        let aesTemplate: Template = [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES)]

        // CBC_PAD: a sensitive key under a key that cannot unwrap; not under one that can (rule 6).
        let blob = bytes(try f.rt.wrapKey(session: s, mechanism: cbcPad, wrappingKey: wrapOnly, key: sensitive, capacity: 64))
        #expect(blob.count == 32)
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: cbcPad, wrappingKey: kek, key: sensitive, capacity: 64) }
                == CKR_KEY_NOT_WRAPPABLE)
        let openBlob = bytes(try f.rt.wrapKey(session: s, mechanism: cbcPad, wrappingKey: kek, key: open, capacity: 64))
        let back = try f.rt.unwrapKey(session: s, mechanism: cbcPad, unwrappingKey: kek, wrapped: openBlob,
                                      template: aesTemplate + [.bool(CKA_SENSITIVE, false)])
        #expect(try f.rt.getAttributeValue(session: s, object: back, types: [CKA_VALUE_LEN]) == [.value(AttributeCoding.ulong(16))])
        var corrupt = openBlob
        corrupt[31] ^= 0x55  // breaks the padding
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: cbcPad, unwrappingKey: kek, wrapped: corrupt,
                                            template: aesTemplate) } == CKR_WRAPPED_KEY_INVALID)
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: cbcPad, unwrappingKey: kek, wrapped: Array(openBlob[..<20]),
                                            template: aesTemplate) } == CKR_WRAPPED_KEY_LEN_RANGE)
        // CBC without padding wraps too (BlockWrapTests), AES-CTR does not.
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: .aesCTR(counterBlock: iv, counterBits: 128), wrappingKey: kek,
                                          key: open, capacity: 64) } == CKR_MECHANISM_INVALID)

        // GCM: never a sensitive key (rule 7); non-sensitive keys wrap, blobs made elsewhere unwrap.
        let gcm = Mechanism.aesGCM(GCMParameters(iv: [UInt8](repeating: 9, count: 12), aad: [1, 2], tagBytes: 16))
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: gcm, wrappingKey: wrapOnly, key: sensitive, capacity: 64) }
                == CKR_KEY_NOT_WRAPPABLE)
        #expect(try f.rt.wrapKey(session: s, mechanism: gcm, wrappingKey: kek, key: open, capacity: nil) == .length(32))
        let gcmBlob = bytes(try f.rt.wrapKey(session: s, mechanism: gcm, wrappingKey: kek, key: open, capacity: 32))
        _ = try f.rt.unwrapKey(session: s, mechanism: gcm, unwrappingKey: kek, wrapped: gcmBlob, template: aesTemplate)
        var forged = gcmBlob
        forged[0] ^= 1
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: gcm, unwrappingKey: kek, wrapped: forged,
                                            template: aesTemplate) } == CKR_WRAPPED_KEY_INVALID)
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: gcm, unwrappingKey: kek, wrapped: Array(gcmBlob[..<16]),
                                            template: aesTemplate) } == CKR_WRAPPED_KEY_LEN_RANGE)

        // RFC 3394 with an alternative IV: what AESKeyWrap makes; unwrap needs the same IV.
        let alt = [UInt8](0..<8)
        let kwAlt = try mech(CKM_AES_KEY_WRAP, bytes: alt)
        #expect(kwAlt == .aesKeyWrapWithIV(pad: false, iv: alt))
        #expect(try mech(CKM_AES_KEY_WRAP, bytes: [UInt8](repeating: 0xA6, count: 8)) == .aesKeyWrap(pad: false))
        #expect(try mech(CKM_AES_KEY_WRAP_PAD, bytes: [0xA6, 0x59, 0x59, 0xA6]) == .aesKeyWrap(pad: true))
        #expect(rv { _ = try mech(CKM_AES_KEY_WRAP_PAD, bytes: alt) } == CKR_MECHANISM_PARAM_INVALID)
        let kwBlob = bytes(try f.rt.wrapKey(session: s, mechanism: kwAlt, wrappingKey: kek, key: open, capacity: 64))
        #expect(kwBlob.count == 24)
        _ = try f.rt.unwrapKey(session: s, mechanism: kwAlt, unwrappingKey: kek, wrapped: kwBlob, template: aesTemplate)
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: .aesKeyWrap(pad: false), unwrappingKey: kek, wrapped: kwBlob,
                                            template: aesTemplate) } == CKR_WRAPPED_KEY_INVALID)
        let kwpAlt = try mech(CKM_AES_KEY_WRAP_PAD, bytes: [1, 2, 3, 4])
        let kwpBlob = bytes(try f.rt.wrapKey(session: s, mechanism: kwpAlt, wrappingKey: kek, key: open, capacity: 64))
        _ = try f.rt.unwrapKey(session: s, mechanism: kwpAlt, unwrappingKey: kek, wrapped: kwpBlob, template: aesTemplate)

        // DES3 and ChaCha20 keys unwrap (with parity checked for DES3).
        let tdesValue = Self.hex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")
        let tdes = try secret(f, s, CKK_DES3, tdesValue, [.bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)])
        let tdesBlob = bytes(try f.rt.wrapKey(session: s, mechanism: .aesKeyWrap(pad: false), wrappingKey: kek, key: tdes, capacity: 64))
        _ = try f.rt.unwrapKey(session: s, mechanism: .aesKeyWrap(pad: false), unwrappingKey: kek, wrapped: tdesBlob, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_DES3)])
        let generic = try secret(f, s, CKK_GENERIC_SECRET, Array(tdesValue.map { $0 ^ 1 }),
                                 [.bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)])
        let noParity = bytes(try f.rt.wrapKey(session: s, mechanism: .aesKeyWrap(pad: false), wrappingKey: kek, key: generic, capacity: 64))
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: .aesKeyWrap(pad: false), unwrappingKey: kek, wrapped: noParity,
                                            template: [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_DES3)]) }
                == CKR_WRAPPED_KEY_INVALID)
    }

    /// Rule 7's attack run to its end with the module's own calls: with GCM
    /// wrapping allowed for sensitive keys, the same IV for a known key and
    /// the victim would give the victim's value. The first wrap works (the
    /// key is not sensitive), the second is refused.
    @Test func gcmIVReuseAttackIsStopped() throws {
        let (f, s) = try loggedIn()
        let w = try generated(f, s, [CKA_ENCRYPT: false, CKA_DECRYPT: false, CKA_WRAP: true, CKA_UNWRAP: false])
        let known = [UInt8](repeating: 0x42, count: 16)
        let mine = try secret(f, s, CKK_AES, known, [.bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)])
        let victim = try generated(f, s, [CKA_WRAP: false], extractable: true)
        let gcm = Mechanism.aesGCM(GCMParameters(iv: [UInt8](repeating: 1, count: 12), aad: [], tagBytes: 16))
        let b1 = bytes(try f.rt.wrapKey(session: s, mechanism: gcm, wrappingKey: w, key: mine, capacity: 64))
        #expect(b1.count == 32)
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: gcm, wrappingKey: w, key: victim, capacity: 64) }
                == CKR_KEY_NOT_WRAPPABLE)
    }

    // MARK: - Message-based encryption (PKCS #11 3.0 §5.13-5.14)

    func gcmMessage(_ iv: [UInt8], fixed: Int = 0, generator: CK_ULONG = CK_ULONG(CKG_NO_GENERATE), tagBytes: Int = 16,
                    tag: [UInt8] = []) -> MessageParameters {
        MessageParameters(iv: iv, ivFixedBits: fixed, generator: generator, tagBytes: tagBytes, tag: tag)
    }

    /// GCM test case 4 through C_EncryptMessage / C_DecryptMessage and the
    /// Begin/Next forms; errors end the message, not the process.
    @Test func messageGCM() throws {
        let (f, s) = try loggedIn()
        let key = try secret(f, s, CKK_AES, Self.hex("feffe9928665731c6d6a8f9467308308"))
        let iv = Self.hex("cafebabefacedbaddecaf888"), aad = Self.hex("feedfacedeadbeeffeedfacedeadbeefabaddad2")
        let pt = Self.hex("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39")
        let ct = Self.hex("42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091")
        let tag = Self.hex("5bc94fbc3221a5db94fae95ae7121a47")
        #expect(rv { _ = try f.rt.encryptMessage(session: s, parameters: gcmMessage(iv), aad: aad, plaintext: pt, capacity: 64) }
                == CKR_OPERATION_NOT_INITIALIZED)
        try f.rt.messageInit(session: s, encrypt: true, mechanism: .aesGCM, key: key)
        #expect(rv { try f.rt.messageInit(session: s, encrypt: true, mechanism: .aesGCM, key: key) } == CKR_OPERATION_ACTIVE)
        let q = try f.rt.encryptMessage(session: s, parameters: gcmMessage(iv), aad: aad, plaintext: pt, capacity: nil)
        #expect(q == MessageOutput(result: .length(60), iv: nil, tag: nil))
        let one = try f.rt.encryptMessage(session: s, parameters: gcmMessage(iv), aad: aad, plaintext: pt, capacity: 60)
        #expect(one == MessageOutput(result: .bytes(ct), iv: nil, tag: tag))
        // Begin/Next: the same ciphertext and tag; a length query and a short buffer keep the message.
        #expect(try f.rt.messageBegin(session: s, encrypt: true, parameters: gcmMessage(iv), aad: aad) == nil)
        #expect(rv { _ = try f.rt.encryptMessage(session: s, parameters: gcmMessage(iv), aad: aad, plaintext: pt, capacity: 64) }
                == CKR_OPERATION_ACTIVE)
        #expect(try f.rt.messageBegin(session: s, encrypt: true, parameters: gcmMessage(iv), aad: aad) == nil)
        let a = try f.rt.encryptMessageNext(session: s, parameters: gcmMessage(iv), part: Array(pt[..<25]), capacity: 25, last: false)
        #expect(try f.rt.encryptMessageNext(session: s, parameters: gcmMessage(iv), part: Array(pt[25...]), capacity: nil, last: true)
                .result == .length(35))
        #expect(try f.rt.encryptMessageNext(session: s, parameters: gcmMessage(iv), part: Array(pt[25...]), capacity: 3, last: true)
                .result == .tooSmall(35))
        let b = try f.rt.encryptMessageNext(session: s, parameters: gcmMessage(iv), part: Array(pt[25...]), capacity: 35, last: true)
        #expect(bytes(a.result) + bytes(b.result) == ct && b.tag == tag && a.tag == nil)
        #expect(rv { _ = try f.rt.encryptMessageNext(session: s, parameters: gcmMessage(iv), part: pt, capacity: 64, last: true) }
                == CKR_OPERATION_NOT_INITIALIZED)
        // An error inside a message ends it; the process goes on.
        _ = try f.rt.messageBegin(session: s, encrypt: true, parameters: gcmMessage(iv), aad: aad)
        #expect(rv { _ = try f.rt.encryptMessageNext(session: s, parameters: gcmMessage([1, 2, 3]), part: pt, capacity: 64,
                                                     last: false) } == CKR_ARGUMENTS_BAD)
        #expect(rv { _ = try f.rt.encryptMessageNext(session: s, parameters: gcmMessage(iv), part: pt, capacity: 64, last: false) }
                == CKR_OPERATION_NOT_INITIALIZED)
        #expect(try f.rt.encryptMessage(session: s, parameters: gcmMessage(iv), aad: aad, plaintext: pt, capacity: 60) == one)
        try f.rt.messageFinal(session: s, encrypt: true)
        #expect(rv { try f.rt.messageFinal(session: s, encrypt: true) } == CKR_OPERATION_NOT_INITIALIZED)

        // Decryption: the tag from the parameter; nothing before it is verified.
        try f.rt.messageInit(session: s, encrypt: false, mechanism: .aesGCM, key: key)
        #expect(bytes(try f.rt.decryptMessage(session: s, parameters: gcmMessage(iv, tag: tag), aad: aad, ciphertext: ct,
                                              capacity: 60)) == pt)
        var badTag = tag
        badTag[0] ^= 1
        #expect(rv { _ = try f.rt.decryptMessage(session: s, parameters: gcmMessage(iv, tag: badTag), aad: aad, ciphertext: ct,
                                                 capacity: 60) } == CKR_ENCRYPTED_DATA_INVALID)
        _ = try f.rt.messageBegin(session: s, encrypt: false, parameters: gcmMessage(iv), aad: aad)
        #expect(try f.rt.decryptMessageNext(session: s, parameters: gcmMessage(iv), part: Array(ct[..<40]), capacity: 40,
                                            last: false) == .bytes([]))
        #expect(try f.rt.decryptMessageNext(session: s, parameters: gcmMessage(iv, tag: tag), part: Array(ct[40...]), capacity: nil,
                                            last: true) == .length(60))
        #expect(bytes(try f.rt.decryptMessageNext(session: s, parameters: gcmMessage(iv, tag: tag), part: Array(ct[40...]),
                                                  capacity: 60, last: true)) == pt)
        // A ChaCha20 key does not start a GCM process; nor does a key without CKA_DECRYPT.
        try f.rt.messageFinal(session: s, encrypt: false)
        let chacha = try secret(f, s, CKK_CHACHA20, [UInt8](repeating: 1, count: 32))
        #expect(rv { try f.rt.messageInit(session: s, encrypt: false, mechanism: .aesGCM, key: chacha) } == CKR_KEY_TYPE_INCONSISTENT)
        let noDecrypt = try secret(f, s, CKK_AES, [UInt8](repeating: 1, count: 16), [.bool(CKA_DECRYPT, false)])
        #expect(rv { try f.rt.messageInit(session: s, encrypt: false, mechanism: .aesGCM, key: noDecrypt) }
                == CKR_KEY_FUNCTION_NOT_PERMITTED)
    }

    /// CKG_GENERATE_COUNTER and CKG_GENERATE: the fixed bits from the
    /// caller, then a counter from zero; length queries take no IV; the
    /// layout is fixed by the first message; the counter's end is
    /// CKR_DATA_LEN_RANGE. CKG_GENERATE_RANDOM: 96 random bits at least.
    @Test func messageIVGenerators() throws {
        let (f, s) = try loggedIn()
        let key = try secret(f, s, CKK_AES, [UInt8](repeating: 5, count: 16))
        try f.rt.messageInit(session: s, encrypt: true, mechanism: .aesGCM, key: key)
        let fixed: [UInt8] = [0xAA, 0xBB, 0xCC, 0xDD] + [UInt8](repeating: 0xEE, count: 8)
        let counter = gcmMessage(fixed, fixed: 32, generator: CK_ULONG(CKG_GENERATE_COUNTER))
        #expect(try f.rt.encryptMessage(session: s, parameters: counter, aad: [], plaintext: [1, 2, 3], capacity: nil).iv == nil)
        var ivs: [[UInt8]] = []
        for _ in 0..<3 {
            let out = try f.rt.encryptMessage(session: s, parameters: counter, aad: [], plaintext: [1, 2, 3], capacity: 3)
            guard let iv = out.iv, let tag = out.tag else { Issue.record("no IV or tag"); return }
            ivs.append(iv)
            // The output is GCM under the IV handed back.
            let (c, t) = try AESGCM.encrypt(key: [UInt8](repeating: 5, count: 16), iv: iv, plaintext: [1, 2, 3], aad: [])
            #expect(bytes(out.result) == c && tag == t)
        }
        #expect(ivs == (0..<3).map { [0xAA, 0xBB, 0xCC, 0xDD] + [UInt8](repeating: 0, count: 7) + [UInt8($0)] })
        // Begin hands the IV back too, and continues the counter.
        #expect(try f.rt.messageBegin(session: s, encrypt: true, parameters: counter, aad: [])
                == [0xAA, 0xBB, 0xCC, 0xDD] + [UInt8](repeating: 0, count: 7) + [3])
        _ = try f.rt.encryptMessageNext(session: s, parameters: counter, part: [1], capacity: 1, last: true)
        // Another layout in the same process is refused.
        #expect(rv { _ = try f.rt.encryptMessage(session: s, parameters: gcmMessage(fixed, fixed: 64,
            generator: CK_ULONG(CKG_GENERATE_COUNTER)), aad: [], plaintext: [1], capacity: 1) } == CKR_ARGUMENTS_BAD)
        // CKG_NO_GENERATE still uses the caller's IV as is, in the same process.
        #expect(try f.rt.encryptMessage(session: s, parameters: gcmMessage(fixed), aad: [], plaintext: [1], capacity: 1).iv == nil)
        try f.rt.messageFinal(session: s, encrypt: true)

        // A 4-bit counter (1-byte IV, 4 fixed bits): 16 IVs, then CKR_DATA_LEN_RANGE.
        try f.rt.messageInit(session: s, encrypt: true, mechanism: .aesGCM, key: key)
        let small = gcmMessage([0x90], fixed: 4, generator: CK_ULONG(CKG_GENERATE))
        for i in 0..<16 {
            let out = try f.rt.encryptMessage(session: s, parameters: small, aad: [], plaintext: [0], capacity: 1)
            #expect(out.iv == [0x90 | UInt8(i)])
        }
        #expect(rv { _ = try f.rt.encryptMessage(session: s, parameters: small, aad: [], plaintext: [0], capacity: 1) }
                == CKR_DATA_LEN_RANGE)
        try f.rt.messageFinal(session: s, encrypt: true)

        // Random: fewer than 96 generated bits is refused; 96 give distinct IVs that keep the fixed part.
        try f.rt.messageInit(session: s, encrypt: true, mechanism: .aesGCM, key: key)
        #expect(rv { _ = try f.rt.encryptMessage(session: s, parameters: gcmMessage(fixed, fixed: 8,
            generator: CK_ULONG(CKG_GENERATE_RANDOM)), aad: [], plaintext: [1], capacity: 1) } == CKR_ARGUMENTS_BAD)
        let random = gcmMessage([0x11] + [UInt8](repeating: 0, count: 12), fixed: 8, generator: CK_ULONG(CKG_GENERATE_RANDOM))
        let r1 = try f.rt.encryptMessage(session: s, parameters: random, aad: [], plaintext: [1], capacity: 1).iv
        let r2 = try f.rt.encryptMessage(session: s, parameters: random, aad: [], plaintext: [1], capacity: 1).iv
        #expect(r1 != nil && r1 != r2 && r1?.first == 0x11 && r2?.first == 0x11 && r1?.count == 13)
        // No bits left to generate, and an unknown generator.
        #expect(rv { _ = try f.rt.encryptMessage(session: s, parameters: gcmMessage(fixed, fixed: 96,
            generator: CK_ULONG(CKG_GENERATE)), aad: [], plaintext: [1], capacity: 1) } == CKR_ARGUMENTS_BAD)
        try f.rt.messageFinal(session: s, encrypt: true)
        try f.rt.messageInit(session: s, encrypt: true, mechanism: .aesGCM, key: key)
        #expect(rv { _ = try f.rt.encryptMessage(session: s, parameters: gcmMessage(fixed, generator: 7), aad: [],
                                                 plaintext: [1], capacity: 1) } == CKR_ARGUMENTS_BAD)
    }

    /// RFC 8439 §2.8.2 through the message API.
    @Test func messageChaCha20Poly1305() throws {
        let (f, s) = try loggedIn()
        let key = try secret(f, s, CKK_CHACHA20, [UInt8](0x80...0x9f))
        let nonce = Self.hex("070000004041424344454647"), aad = Self.hex("50515253c0c1c2c3c4c5c6c7")
        let pt = Array("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".utf8)
        let tag = Self.hex("1ae10b594f09e26a7e902ecbd0600691")
        try f.rt.messageInit(session: s, encrypt: true, mechanism: .chacha20Poly1305, key: key)
        let out = try f.rt.encryptMessage(session: s, parameters: MessageParameters(iv: nonce, tagBytes: 16), aad: aad,
                                          plaintext: pt, capacity: 114)
        #expect(out.tag == tag && bytes(out.result).count == 114)
        #expect(Array(bytes(out.result).prefix(16)) == Self.hex("d31a8d34648e60db7b86afbc53ef7ec2"))
        _ = try f.rt.messageBegin(session: s, encrypt: true, parameters: MessageParameters(iv: nonce, tagBytes: 16), aad: aad)
        let a = try f.rt.encryptMessageNext(session: s, parameters: MessageParameters(iv: nonce, tagBytes: 16), part: Array(pt[..<64]),
                                            capacity: 64, last: false)
        let b = try f.rt.encryptMessageNext(session: s, parameters: MessageParameters(iv: nonce, tagBytes: 16), part: Array(pt[64...]),
                                            capacity: 64, last: true)
        #expect(bytes(a.result) + bytes(b.result) == bytes(out.result) && b.tag == tag)
        try f.rt.messageInit(session: s, encrypt: false, mechanism: .chacha20Poly1305, key: key)
        #expect(bytes(try f.rt.decryptMessage(session: s, parameters: MessageParameters(iv: nonce, tagBytes: 16, tag: tag),
                                              aad: aad, ciphertext: bytes(out.result), capacity: 114)) == pt)
        #expect(rv { _ = try f.rt.decryptMessage(session: s, parameters: MessageParameters(iv: nonce, tagBytes: 16, tag: tag),
                                                 aad: [], ciphertext: bytes(out.result), capacity: 114) } == CKR_ENCRYPTED_DATA_INVALID)
        let aes = try secret(f, s, CKK_AES, [UInt8](repeating: 1, count: 32))
        try f.rt.messageFinal(session: s, encrypt: true)
        #expect(rv { try f.rt.messageInit(session: s, encrypt: true, mechanism: .chacha20Poly1305, key: aes) }
                == CKR_KEY_TYPE_INCONSISTENT)
    }
}
