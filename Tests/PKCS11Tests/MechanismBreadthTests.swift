import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// Issue 13's second round of mechanisms at the Runtime level, each against
/// published vectors: CKM_DES2_KEY_GEN (two-key 3DES through the DES3
/// mechanisms, SP 800-67), CBC-MAC (CKM_AES_MAC(_GENERAL) from SP 800-38A's
/// ECB/CBC vectors, CKM_DES3_MAC(_GENERAL) from SP 800-67's), AES-CCM
/// (RFC 3610 packet vector #1, SP 800-38C example 1), CKM_AES_KEY_WRAP_KWP
/// (RFC 5649 §6) and the ENCRYPT_DATA derivations (SP 800-38A, SP 800-67).
/// The C-level checks (agent codec, NULL pointers) are in
/// Tests/integration/71-mech-breadth.sh.
struct MechanismBreadthTests {
    let h = SymmetricMechanismTests()
    static func hex(_ s: String) -> [UInt8] { SymmetricMechanismTests.hex(s) }
    static let key128 = SymmetricMechanismTests.key128
    static let plain = SymmetricMechanismTests.sp80038aPlain
    /// SP 800-67 Rev. 2 example keys and plaintext.
    static let k3 = hex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")
    static let p3 = Array("The qufck brown fox jump".utf8)
    static let c3 = hex("a826fd8ce53b855fcce21c8112256fe668d5c05dd9b6b900")

    func value(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ o: CK_OBJECT_HANDLE) throws -> [UInt8] {
        guard case .value(let v) = try f.rt.getAttributeValue(session: s, object: o, types: [CKA_VALUE])[0] else {
            Issue.record("CKA_VALUE not readable")
            return []
        }
        return v
    }

    func mac(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ m: Mechanism, _ key: CK_OBJECT_HANDLE, _ data: [UInt8]) throws -> [UInt8] {
        try f.rt.signInit(session: s, mechanism: m, key: key)
        guard case .length(let n) = try f.rt.sign(session: s, data: data, capacity: nil) else { return [] }
        return h.bytes(try f.rt.sign(session: s, data: data, capacity: n))
    }

    @Test func catalog() throws {
        let info = { (t: CK_MECHANISM_TYPE) in MechanismCatalog.info(t) }
        let sv = CKF_SIGN | CKF_VERIFY
        #expect(info(CKM_DES2_KEY_GEN) == MechanismInfo(minKeySize: 0, maxKeySize: 0, flags: CKF_GENERATE))
        #expect(info(CKM_AES_MAC) == MechanismInfo(minKeySize: 16, maxKeySize: 32, flags: sv))
        #expect(info(CKM_AES_MAC_GENERAL) == MechanismInfo(minKeySize: 16, maxKeySize: 32, flags: sv))
        #expect(info(CKM_DES3_MAC)?.flags == sv && info(CKM_DES3_MAC_GENERAL)?.flags == sv)
        #expect(info(CKM_AES_CCM) == MechanismInfo(minKeySize: 16, maxKeySize: 32, flags: CKF_ENCRYPT | CKF_DECRYPT))
        #expect(info(CKM_AES_KEY_WRAP_KWP) == MechanismInfo(minKeySize: 16, maxKeySize: 32, flags: CKF_WRAP | CKF_UNWRAP))
        for t in [CKM_AES_ECB_ENCRYPT_DATA, CKM_AES_CBC_ENCRYPT_DATA, CKM_DES3_ECB_ENCRYPT_DATA, CKM_DES3_CBC_ENCRYPT_DATA] {
            #expect(info(t)?.flags == CKF_DERIVE)
        }
        let all = MechanismCatalog.entries.map(\.0)
        #expect(Set(all).count == all.count, "no mechanism listed twice")
    }

    /// CKM_DES2_KEY_GEN: 16 bytes, odd parity, CKK_DES2; the DES3 mechanisms
    /// run it as K1 K2 K1 (SP 800-67 keying option 2).
    @Test func des2() throws {
        let (f, s) = try loggedIn()
        let gen = try Mechanism(type: CKM_DES2_KEY_GEN, parameter: nil)
        let k = try f.rt.generateKey(session: s, mechanism: gen, template: [.bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)])
        let got = try f.rt.getAttributeValue(session: s, object: k, types: [CKA_KEY_TYPE, CKA_VALUE_LEN, CKA_KEY_GEN_MECHANISM, CKA_PRIVATE])
        #expect(got == [.value(AttributeCoding.ulong(CKK_DES2)), .value(AttributeCoding.ulong(16)),
                        .value(AttributeCoding.ulong(CKM_DES2_KEY_GEN)), .value([1])])
        let v = try value(f, s, k)
        #expect(v.count == 16 && DES.hasOddParity(v))
        #expect(rv { _ = try f.rt.generateKey(session: s, mechanism: gen, template: [.ulong(CKA_VALUE_LEN, 24)]) }
                == CKR_TEMPLATE_INCONSISTENT)
        #expect(rv { _ = try f.rt.generateKey(session: s, mechanism: gen, template: [.bool(CKA_PRIVATE, false), .bool(CKA_TOKEN, true)]) }
                == CKR_TEMPLATE_INCONSISTENT)
        #expect(rv { _ = try h.mech(CKM_DES2_KEY_GEN, bytes: [1]) } == CKR_MECHANISM_PARAM_INVALID)
        // SP 800-67's K1 K2 as a DES2 key = the DES3 key K1 K2 K1.
        let two = Array(Self.k3[..<16])
        let des2 = try h.secret(f, s, CKK_DES2, two)
        let des3 = try h.secret(f, s, CKK_DES3, two + two[..<8])
        let ecb = try Mechanism(type: CKM_DES3_ECB, parameter: nil)
        let c = try h.oneShot(f, s, encrypt: true, ecb, des3, Self.p3)
        #expect(try h.oneShot(f, s, encrypt: true, ecb, des2, Self.p3) == c)
        #expect(try h.multipart(f, s, encrypt: false, ecb, des2, c, step: 5) == Self.p3)
        var bad = two
        bad[3] ^= 1
        #expect(rv { _ = try h.secret(f, s, CKK_DES2, bad) } == CKR_ATTRIBUTE_VALUE_INVALID)
        #expect(rv { _ = try h.secret(f, s, CKK_DES2, Self.k3) } == CKR_ATTRIBUTE_VALUE_INVALID)
        // Not a single-DES key.
        #expect(rv { try f.rt.encryptInit(session: s, mechanism: try Mechanism(type: CKM_DES_ECB, parameter: nil), key: des2) }
                == CKR_KEY_TYPE_INCONSISTENT)
    }

    /// CBC-MAC. SP 800-38A F.1.1: one block's CBC-MAC is its ECB encryption;
    /// F.2.1: the CBC-MAC of (P1 xor IV) P2 P3 P4 is the last CBC block.
    /// SP 800-67: the 3DES MAC of the first block is its ECB encryption.
    @Test func cbcMAC() throws {
        let (f, s) = try loggedIn()
        let key = try h.secret(f, s, CKK_AES, Self.key128)
        let aesMAC = try Mechanism(type: CKM_AES_MAC, parameter: nil)
        let p1 = Array(Self.plain[..<16])
        let c1 = Self.hex("3ad77bb40d7a3660a89ecaf32466ef97")
        #expect(try mac(f, s, aesMAC, key, p1) == Array(c1[..<8]))
        var sixteen: CK_ULONG = 16
        let general = try h.mech(CKM_AES_MAC_GENERAL, sixteen)
        #expect(try mac(f, s, general, key, p1) == c1)
        let iv = Self.hex("000102030405060708090a0b0c0d0e0f")
        var chained = Self.plain
        for i in 0..<16 { chained[i] ^= iv[i] }
        let last = Self.hex("3ff1caa1681fac09120eca307586e1a7")
        #expect(try mac(f, s, general, key, chained) == last)
        // Multi-part in odd pieces gives the same.
        try f.rt.signInit(session: s, mechanism: general, key: key)
        for part in [Array(chained[..<5]), Array(chained[5..<37]), Array(chained[37...])] {
            try f.rt.signUpdate(session: s, part: part)
        }
        #expect(h.bytes(try f.rt.signFinal(session: s, capacity: 16)) == last)
        // Zero padding: 20 bytes MAC as the same 20 bytes followed by 12 zeros; empty data as one zero block.
        let twenty = Array(Self.plain[..<20])
        #expect(try mac(f, s, general, key, twenty) == mac(f, s, general, key, twenty + [UInt8](repeating: 0, count: 12)))
        #expect(try mac(f, s, general, key, []) == mac(f, s, general, key, [UInt8](repeating: 0, count: 16)))
        // Verify: right, wrong, wrong length.
        try f.rt.verifyInit(session: s, mechanism: aesMAC, key: key)
        try f.rt.verify(session: s, data: p1, signature: Array(c1[..<8]))
        try f.rt.verifyInit(session: s, mechanism: aesMAC, key: key)
        #expect(rv { try f.rt.verify(session: s, data: p1, signature: Array(last[..<8])) } == CKR_SIGNATURE_INVALID)
        try f.rt.verifyInit(session: s, mechanism: aesMAC, key: key)
        #expect(rv { try f.rt.verify(session: s, data: p1, signature: c1) } == CKR_SIGNATURE_LEN_RANGE)
        for bad: CK_ULONG in [0, 17] {
            sixteen = bad
            #expect(rv { _ = try h.mech(CKM_AES_MAC_GENERAL, sixteen) } == CKR_MECHANISM_PARAM_INVALID)
        }
        #expect(rv { _ = try h.mech(CKM_AES_MAC, bytes: [1]) } == CKR_MECHANISM_PARAM_INVALID)
        let noSign = try h.secret(f, s, CKK_AES, Self.key128, [.bool(CKA_SIGN, false)])
        #expect(rv { try f.rt.signInit(session: s, mechanism: aesMAC, key: noSign) } == CKR_KEY_FUNCTION_NOT_PERMITTED)
        let generic = try h.secret(f, s, CKK_GENERIC_SECRET, Self.key128)
        #expect(rv { try f.rt.signInit(session: s, mechanism: aesMAC, key: generic) } == CKR_KEY_TYPE_INCONSISTENT)

        // 3DES (and DES2): 4-byte CKM_DES3_MAC, 1-8 byte general.
        let tdes = try h.secret(f, s, CKK_DES3, Self.k3)
        #expect(try mac(f, s, try Mechanism(type: CKM_DES3_MAC, parameter: nil), tdes, Array(Self.p3[..<8]))
                == Array(Self.c3[..<4]))
        var eight: CK_ULONG = 8
        #expect(try mac(f, s, try h.mech(CKM_DES3_MAC_GENERAL, eight), tdes, Array(Self.p3[..<8])) == Array(Self.c3[..<8]))
        eight = 9
        #expect(rv { _ = try h.mech(CKM_DES3_MAC_GENERAL, eight) } == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv { try f.rt.signInit(session: s, mechanism: aesMAC, key: tdes) } == CKR_KEY_TYPE_INCONSISTENT)
        #expect(rv { try f.rt.signInit(session: s, mechanism: try Mechanism(type: CKM_DES3_MAC, parameter: nil), key: key) }
                == CKR_KEY_TYPE_INCONSISTENT)
    }

    func ccm(_ f: Fixture, dataLength: Int, nonce: [UInt8], aad: [UInt8], tag: Int) throws -> Mechanism {
        var n = nonce, a = aad
        return try n.withUnsafeMutableBufferPointer { np in
            try a.withUnsafeMutableBufferPointer { ap in
                var p = CK_CCM_PARAMS(ulDataLen: CK_ULONG(dataLength), pNonce: np.baseAddress, ulNonceLen: CK_ULONG(np.count),
                                      pAAD: ap.count == 0 ? nil : ap.baseAddress, ulAADLen: CK_ULONG(ap.count),
                                      ulMACLen: CK_ULONG(tag))
                return try withUnsafeBytes(of: &p) { try Mechanism(type: CKM_AES_CCM, parameter: $0) }
            }
        }
    }

    /// RFC 3610 packet vector #1 and SP 800-38C example 1, single- and
    /// multi-part; tampering, length and parameter errors.
    @Test func aesCCM() throws {
        let (f, s) = try loggedIn()
        let k1 = try h.secret(f, s, CKK_AES, (0xC0...0xCF).map { UInt8($0) })
        let nonce = Self.hex("00000003020100A0A1A2A3A4A5")
        let aad = (0...7).map { UInt8($0) }
        let pt = (8...0x1E).map { UInt8($0) }
        let out = Self.hex("588c979a61c663d2f066d0c2c0f989806d5f6b61dac38417e8d12cfdf926e0")
        let m = try ccm(f, dataLength: pt.count, nonce: nonce, aad: aad, tag: 8)
        #expect(try h.oneShot(f, s, encrypt: true, m, k1, pt) == out)
        #expect(try h.multipart(f, s, encrypt: true, m, k1, pt, step: 7) == out)
        #expect(try h.oneShot(f, s, encrypt: false, m, k1, out) == pt)
        #expect(try h.multipart(f, s, encrypt: false, m, k1, out, step: 4) == pt)
        let k2 = try h.secret(f, s, CKK_AES, Self.hex("404142434445464748494a4b4c4d4e4f"))
        let m2 = try ccm(f, dataLength: 4, nonce: Self.hex("10111213141516"), aad: Self.hex("0001020304050607"), tag: 4)
        #expect(try h.oneShot(f, s, encrypt: true, m2, k2, Self.hex("20212223")) == Self.hex("7162015b4dac255d"))
        // A flipped bit anywhere: CKR_ENCRYPTED_DATA_INVALID, no plaintext.
        var bad = out
        bad[3] ^= 1
        try f.rt.decryptInit(session: s, mechanism: m, key: k1)
        #expect(rv { _ = try f.rt.decrypt(session: s, data: bad, capacity: 64) } == CKR_ENCRYPTED_DATA_INVALID)
        // Input not ulDataLen (+ MAC): CKR_DATA_LEN_RANGE / CKR_ENCRYPTED_DATA_LEN_RANGE.
        try f.rt.encryptInit(session: s, mechanism: m, key: k1)
        #expect(rv { _ = try f.rt.encrypt(session: s, data: Array(pt.dropLast()), capacity: 64) } == CKR_DATA_LEN_RANGE)
        try f.rt.encryptInit(session: s, mechanism: m, key: k1)
        #expect(rv { _ = try f.rt.encryptUpdate(session: s, part: pt + [0], capacity: 64) } == CKR_DATA_LEN_RANGE)
        try f.rt.decryptInit(session: s, mechanism: m, key: k1)
        #expect(rv { _ = try f.rt.decrypt(session: s, data: Array(out.dropLast()), capacity: 64) } == CKR_ENCRYPTED_DATA_LEN_RANGE)
        // Parameters: nonce 7-13, MAC 4-16 even, ulDataLen within the length field.
        for (nonceLength, tag) in [(6, 8), (14, 8), (13, 5), (13, 2), (13, 18)] {
            #expect(rv { _ = try ccm(f, dataLength: 1, nonce: [UInt8](repeating: 1, count: nonceLength), aad: [], tag: tag) }
                    == CKR_MECHANISM_PARAM_INVALID)
        }
        #expect(rv { _ = try ccm(f, dataLength: 1 << 16, nonce: [UInt8](repeating: 1, count: 13), aad: [], tag: 8) }
                == CKR_MECHANISM_PARAM_INVALID, "L = 2 holds at most 65535 bytes")
        #expect(rv { _ = try h.mech(CKM_AES_CCM, bytes: [0, 1]) } == CKR_MECHANISM_PARAM_INVALID)
        let des = try h.secret(f, s, CKK_DES3, Self.k3)
        #expect(rv { try f.rt.encryptInit(session: s, mechanism: m, key: des) } == CKR_KEY_TYPE_INCONSISTENT)
    }

    /// RFC 5649 §6's two examples under CKM_AES_KEY_WRAP_KWP (0x210B); the
    /// same blob CKM_AES_KEY_WRAP_PAD makes here (SoftHSM2's reading of 0x210A).
    @Test func keyWrapKWP() throws {
        let (f, s) = try loggedIn()
        // The KEK wraps non-sensitive keys only (a created KEK is not local: KeyUsagePolicy rule 2).
        let kek = try h.secret(f, s, CKK_AES, Self.hex("5840df6e29b02af1ab493b705bf16ea1ae8338f4dcc176a8"),
                               [.bool(CKA_ENCRYPT, false), .bool(CKA_DECRYPT, false)])
        let kwp = try Mechanism(type: CKM_AES_KEY_WRAP_KWP, parameter: nil)
        let pad = try Mechanism(type: CKM_AES_KEY_WRAP_PAD, parameter: nil)
        for (key, wrapped) in [("c37b7e6492584340bed12207808941155068f738",
                                "138bdeaa9b8fa7fc61f97742e72248ee5ae6ae5360d1ae6a5f54f373fa543b6a"),
                               ("466f7250617369", "afbeb0f07dfbf5419200f2ccb50bb24f")] {
            let target = try h.secret(f, s, CKK_GENERIC_SECRET, Self.hex(key),
                                      [.bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)])
            #expect(try f.rt.wrapKey(session: s, mechanism: kwp, wrappingKey: kek, key: target, capacity: nil)
                    == .length(Self.hex(wrapped).count))
            #expect(h.bytes(try f.rt.wrapKey(session: s, mechanism: kwp, wrappingKey: kek, key: target, capacity: 64)) == Self.hex(wrapped))
            #expect(h.bytes(try f.rt.wrapKey(session: s, mechanism: pad, wrappingKey: kek, key: target, capacity: 64)) == Self.hex(wrapped))
            let back = try f.rt.unwrapKey(session: s, mechanism: kwp, unwrappingKey: kek, wrapped: Self.hex(wrapped), template: [
                .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET), .bool(CKA_SENSITIVE, false),
                .bool(CKA_EXTRACTABLE, false),
            ])
            #expect(try f.rt.getAttributeValue(session: s, object: back, types: [CKA_VALUE_LEN])
                    == [.value(AttributeCoding.ulong(CK_ULONG(Self.hex(key).count)))])
        }
        var bad = Self.hex("afbeb0f07dfbf5419200f2ccb50bb24f")
        bad[0] ^= 1
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: kwp, unwrappingKey: kek, wrapped: bad,
                                            template: [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET)]) }
                == CKR_WRAPPED_KEY_INVALID)
        #expect(try h.mech(CKM_AES_KEY_WRAP_KWP, bytes: [0xA6, 0x59, 0x59, 0xA6]) == kwp)
        #expect(rv { _ = try h.mech(CKM_AES_KEY_WRAP_KWP, bytes: [UInt8](repeating: 0xA6, count: 8)) } == CKR_MECHANISM_PARAM_INVALID)
    }

    func stringData(_ type: CK_MECHANISM_TYPE, _ data: [UInt8]) throws -> Mechanism {
        var d = data
        return try d.withUnsafeMutableBufferPointer { dp in
            var p = CK_KEY_DERIVATION_STRING_DATA(pData: dp.baseAddress, ulLen: CK_ULONG(dp.count))
            return try withUnsafeBytes(of: &p) { try Mechanism(type: type, parameter: $0) }
        }
    }

    func cbcData(_ iv: [UInt8], _ data: [UInt8]) throws -> Mechanism {
        var d = data
        return try d.withUnsafeMutableBufferPointer { dp in
            var p = CK_AES_CBC_ENCRYPT_DATA_PARAMS()
            withUnsafeMutableBytes(of: &p.iv) { $0.copyBytes(from: iv) }
            p.pData = dp.baseAddress
            p.length = CK_ULONG(dp.count)
            return try withUnsafeBytes(of: &p) { try Mechanism(type: CKM_AES_CBC_ENCRYPT_DATA, parameter: $0) }
        }
    }

    /// The ENCRYPT_DATA derivations: SP 800-38A F.1.1 / F.2.1 and SP 800-67
    /// as derived key values; lengths, key types, and sensitivity carried over.
    @Test func encryptDataDerivation() throws {
        let (f, s) = try loggedIn()
        let readable: Template = [.bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)]
        let base = try h.secret(f, s, CKK_AES, Self.key128, readable + [.bool(CKA_DERIVE, true)])
        let generic: Template = [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET)]
        let ecb = try stringData(CKM_AES_ECB_ENCRYPT_DATA, Array(Self.plain[..<32]))
        let k = try f.rt.deriveKey(session: s, mechanism: ecb, baseKey: base, template: generic + readable)
        #expect(try value(f, s, k) == Self.hex("3ad77bb40d7a3660a89ecaf32466ef97f5d3d58503b9699de785895a96fdbaaf"))
        let cbc = try cbcData(Self.hex("000102030405060708090a0b0c0d0e0f"), Self.plain)
        let aes = try f.rt.deriveKey(session: s, mechanism: cbc, baseKey: base,
                                     template: [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES)] + readable)
        #expect(try value(f, s, aes) == Self.hex("7649abac8119b246cee98e9b12e9197d5086cb9b507219ee95db113a917678b2"),
                "an AES key takes 32 bytes of the 64 by default")
        let short = try f.rt.deriveKey(session: s, mechanism: cbc, baseKey: base, template: generic + readable + [.ulong(CKA_VALUE_LEN, 5)])
        #expect(try value(f, s, short) == Self.hex("7649abac81"))
        // More than the data makes: the parameter falls short (python-pkcs11's negative tests).
        #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: ecb, baseKey: base, template: generic + [.ulong(CKA_VALUE_LEN, 33)]) }
                == CKR_MECHANISM_PARAM_INVALID)
        // Data not whole blocks, or empty: CKR_MECHANISM_PARAM_INVALID.
        #expect(rv { _ = try stringData(CKM_AES_ECB_ENCRYPT_DATA, [1, 2, 3]) } == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv { _ = try cbcData([UInt8](repeating: 0, count: 16), []) } == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv { _ = try h.mech(CKM_AES_CBC_ENCRYPT_DATA, bytes: [1, 2]) } == CKR_MECHANISM_PARAM_INVALID)
        // A sensitive base key: the derived key is sensitive, whatever the template asks.
        let hidden = try h.secret(f, s, CKK_AES, Self.key128, [.bool(CKA_DERIVE, true)])
        let d = try f.rt.deriveKey(session: s, mechanism: ecb, baseKey: hidden, template: generic + readable)
        #expect(try f.rt.getAttributeValue(session: s, object: d, types: [CKA_SENSITIVE, CKA_VALUE, CKA_KEY_GEN_MECHANISM])
                == [.value([1]), .sensitive, .value(AttributeCoding.ulong(CKM_AES_ECB_ENCRYPT_DATA))])
        // Base key rules.
        let noDerive = try h.secret(f, s, CKK_AES, Self.key128)
        #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: ecb, baseKey: noDerive, template: generic) }
                == CKR_KEY_FUNCTION_NOT_PERMITTED)
        let tdes = try h.secret(f, s, CKK_DES3, Self.k3, readable + [.bool(CKA_DERIVE, true)])
        #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: ecb, baseKey: tdes, template: generic) } == CKR_KEY_TYPE_INCONSISTENT)
        // DES3_ECB_ENCRYPT_DATA: SP 800-67's ciphertext, as a generic key and (with parity set) as a DES3 key.
        let e3 = try stringData(CKM_DES3_ECB_ENCRYPT_DATA, Self.p3)
        #expect(try value(f, s, try f.rt.deriveKey(session: s, mechanism: e3, baseKey: tdes, template: generic + readable)) == Self.c3)
        let d3 = try f.rt.deriveKey(session: s, mechanism: e3, baseKey: tdes,
                                    template: [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_DES3)] + readable)
        var parity = Self.c3
        DES.setOddParity(&parity)
        #expect(try value(f, s, d3) == parity)
        #expect(rv { _ = try stringData(CKM_DES3_ECB_ENCRYPT_DATA, [UInt8](repeating: 1, count: 12)) } == CKR_MECHANISM_PARAM_INVALID)
        var p = CK_DES_CBC_ENCRYPT_DATA_PARAMS()
        var data = Self.p3
        let cbc3 = try data.withUnsafeMutableBufferPointer { dp in
            p.pData = dp.baseAddress
            p.length = CK_ULONG(dp.count)
            return try withUnsafeBytes(of: &p) { try Mechanism(type: CKM_DES3_CBC_ENCRYPT_DATA, parameter: $0) }
        }
        // IV zero: the first block is ECB's.
        let v = try value(f, s, try f.rt.deriveKey(session: s, mechanism: cbc3, baseKey: tdes, template: generic + readable))
        #expect(Array(v[..<8]) == Array(Self.c3[..<8]) && v.count == 24)
    }
}

extension MechanismBreadthTests {
    /// CKG_GENERATE_COUNTER_XOR: message n's IV is the base IV with the
    /// counter n XORed into its generated bits (the TLS 1.3 nonce, RFC 8446
    /// §5.3), whatever pIv holds afterwards; the counter ends at 2^bits.
    @Test func counterXorIVGenerator() throws {
        let (f, s) = try loggedIn()
        let keyValue = [UInt8](repeating: 5, count: 16)
        let key = try h.secret(f, s, CKK_AES, keyValue)
        try f.rt.messageInit(session: s, encrypt: true, mechanism: .aesGCM, key: key)
        let base = Self.hex("aabbccdd1122334455667788")
        let xor = CK_ULONG(CKG_GENERATE_COUNTER_XOR)
        var passed = base
        for n in 0..<5 {
            let p = h.gcmMessage(passed, fixed: 32, generator: xor)
            let out = try f.rt.encryptMessage(session: s, parameters: p, aad: [], plaintext: [1, 2, 3], capacity: 3)
            var want = base
            want[11] ^= UInt8(n)
            #expect(out.iv == want, "message \(n)")
            let (c, _) = try AESGCM.encrypt(key: keyValue, iv: want, plaintext: [1, 2, 3], aad: [])
            #expect(h.bytes(out.result) == c)
            passed = out.iv ?? []  // the caller's pIv now holds the IV written back
        }
        // Another generator in the same process is refused.
        #expect(rv { _ = try f.rt.encryptMessage(session: s, parameters: h.gcmMessage(base, fixed: 32,
            generator: CK_ULONG(CKG_GENERATE_COUNTER)), aad: [], plaintext: [1], capacity: 1) } == CKR_ARGUMENTS_BAD)
        try f.rt.messageFinal(session: s, encrypt: true)
        // 4 generated bits: 16 IVs, then CKR_DATA_LEN_RANGE.
        try f.rt.messageInit(session: s, encrypt: true, mechanism: .aesGCM, key: key)
        let small = h.gcmMessage([0x95], fixed: 4, generator: xor)
        for i in 0..<16 {
            #expect(try f.rt.encryptMessage(session: s, parameters: small, aad: [], plaintext: [0], capacity: 1).iv
                    == [0x95 ^ UInt8(i)])
        }
        #expect(rv { _ = try f.rt.encryptMessage(session: s, parameters: small, aad: [], plaintext: [0], capacity: 1) }
                == CKR_DATA_LEN_RANGE)
    }
}
