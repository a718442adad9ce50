import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// C_WrapKey / C_UnwrapKey with the block modes (BlockWrap.swift):
/// CKM_DES3_ECB (pkcs11test's default wrap mechanism), CKM_DES3_CBC(_PAD),
/// CKM_AES_ECB and CKM_AES_CBC; the spec's zero padding and truncation, and
/// rules 6 and 9 of KeyUsagePolicy. 68-symmetric.sh runs the same through
/// the C entry points in both modes.
extension SymmetricMechanismTests {
    static let tdesKEK = hex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")

    func value(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ h: CK_OBJECT_HANDLE) throws -> [UInt8]? {
        guard case .value(let v) = try f.rt.getAttributeValue(session: s, object: h, types: [CKA_VALUE]).first else { return nil }
        return v
    }

    @Test func blockModeWrap() throws {
        let (f, s) = try loggedIn()
        let open: Template = [.bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)]
        // A 3DES KEK of known value with every usage: it wraps readable keys only (rule 1), and
        // readable keys unwrap under it (rule 4 guards only keys that cannot decrypt).
        let kek = try secret(f, s, CKK_DES3, Self.tdesKEK, [.bool(CKA_ENCRYPT, true), .bool(CKA_DECRYPT, true),
                                                              .bool(CKA_WRAP, true), .bool(CKA_UNWRAP, true)])
        let aesValue = [UInt8](repeating: 7, count: 16)
        let aes = try secret(f, s, CKK_AES, aesValue, open)
        let ecb = try Mechanism(type: CKM_DES3_ECB, parameter: nil)

        // The blob is C_Encrypt of the value under the same key and mode (the spec's definition).
        #expect(try f.rt.wrapKey(session: s, mechanism: ecb, wrappingKey: kek, key: aes, capacity: nil) == .length(16))
        let blob = bytes(try f.rt.wrapKey(session: s, mechanism: ecb, wrappingKey: kek, key: aes, capacity: 16))
        #expect(try oneShot(f, s, encrypt: true, ecb, kek, aesValue) == blob)
        let aesTemplate: Template = [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES)]
        let back = try f.rt.unwrapKey(session: s, mechanism: ecb, unwrappingKey: kek, wrapped: blob, template: aesTemplate + open)
        #expect(try value(f, s, back) == aesValue)

        // Zero padding to whole blocks, truncation by CKA_VALUE_LEN (at most a block minus one byte).
        let genericValue = [UInt8](1...20)
        let generic = try secret(f, s, CKK_GENERIC_SECRET, genericValue, open)
        let cbc = try mech(CKM_DES3_CBC, bytes: [UInt8](repeating: 5, count: 8))
        let padded = bytes(try f.rt.wrapKey(session: s, mechanism: cbc, wrappingKey: kek, key: generic, capacity: 64))
        #expect(padded.count == 24)
        let genericTemplate: Template = [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET)] + open
        let cut = try f.rt.unwrapKey(session: s, mechanism: cbc, unwrappingKey: kek, wrapped: padded,
                                     template: genericTemplate + [.ulong(CKA_VALUE_LEN, 20)])
        #expect(try value(f, s, cut) == genericValue)
        let whole = try f.rt.unwrapKey(session: s, mechanism: cbc, unwrappingKey: kek, wrapped: padded, template: genericTemplate)
        #expect(try value(f, s, whole) == genericValue + [0, 0, 0, 0])
        // A prefix of the blob (its first block) as an 8-byte key: more than the padding cut off.
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: cbc, unwrappingKey: kek, wrapped: padded,
                                            template: genericTemplate + [.ulong(CKA_VALUE_LEN, 8)]) } == CKR_WRAPPED_KEY_INVALID)
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: cbc, unwrappingKey: kek, wrapped: Array(padded[..<20]),
                                            template: genericTemplate) } == CKR_WRAPPED_KEY_LEN_RANGE)
        // Unpadded modes wrap secret keys only: a private key template is refused.
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: ecb, unwrappingKey: kek, wrapped: blob, template: [
            .ulong(CKA_CLASS, CKO_PRIVATE_KEY), .ulong(CKA_KEY_TYPE, CKK_EC)]) } == CKR_TEMPLATE_INCONSISTENT)

        // CBC_PAD under 3DES: PKCS #7 padding, a corrupt pad is CKR_WRAPPED_KEY_INVALID.
        let cbcPad = try mech(CKM_DES3_CBC_PAD, bytes: [UInt8](repeating: 6, count: 8))
        let pkcs7 = bytes(try f.rt.wrapKey(session: s, mechanism: cbcPad, wrappingKey: kek, key: aes, capacity: 64))
        #expect(pkcs7.count == 24)
        let again = try f.rt.unwrapKey(session: s, mechanism: cbcPad, unwrappingKey: kek, wrapped: pkcs7, template: aesTemplate + open)
        #expect(try value(f, s, again) == aesValue)
        var corrupt = pkcs7
        corrupt[23] ^= 0x55
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: cbcPad, unwrappingKey: kek, wrapped: corrupt,
                                            template: aesTemplate) } == CKR_WRAPPED_KEY_INVALID)

        // AES ECB and CBC without padding wrap too.
        let aesKEK = try generated(f, s, [CKA_ENCRYPT: false, CKA_DECRYPT: true, CKA_WRAP: true, CKA_UNWRAP: true])
        for m in [try Mechanism(type: CKM_AES_ECB, parameter: nil), Mechanism.aesCBC(iv: [UInt8](repeating: 3, count: 16), pad: false)] {
            let b = bytes(try f.rt.wrapKey(session: s, mechanism: m, wrappingKey: aesKEK, key: generic, capacity: 64))
            #expect(b.count == 32)
            let k = try f.rt.unwrapKey(session: s, mechanism: m, unwrappingKey: aesKEK, wrapped: b,
                                       template: genericTemplate + [.ulong(CKA_VALUE_LEN, 20)])
            #expect(try value(f, s, k) == genericValue)
        }

        // Key types: an AES key does not run DES3, single DES never wraps.
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: ecb, wrappingKey: aesKEK, key: aes, capacity: 64) }
                == CKR_WRAPPING_KEY_TYPE_INCONSISTENT)
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: try Mechanism(type: CKM_DES_ECB, parameter: nil),
                                          wrappingKey: kek, key: aes, capacity: 64) } == CKR_MECHANISM_INVALID)
    }

    /// Rules 6 and 9 on the block modes, with generated (local, always
    /// sensitive) wrapping keys so rules 1-5 let the wrap through.
    @Test func blockModeWrapRules() throws {
        let (f, s) = try loggedIn()
        func des(_ mech: CK_MECHANISM_TYPE, _ flags: [CK_ATTRIBUTE_TYPE: Bool], extractable: Bool = false) throws -> CK_OBJECT_HANDLE {
            try f.rt.generateKey(session: s, mechanism: try Mechanism(type: mech, parameter: nil),
                                 template: [.bool(CKA_EXTRACTABLE, extractable)] + flags.map { .bool($0.key, $0.value) })
        }
        let wrapOnly: [CK_ATTRIBUTE_TYPE: Bool] = [CKA_ENCRYPT: false, CKA_DECRYPT: false, CKA_WRAP: true, CKA_UNWRAP: false]
        let wrapUnwrap: [CK_ATTRIBUTE_TYPE: Bool] = [CKA_ENCRYPT: false, CKA_DECRYPT: false, CKA_WRAP: true, CKA_UNWRAP: true]
        let tdesKEK = try des(CKM_DES3_KEY_GEN, wrapOnly)
        let tdesKEKUnwrap = try des(CKM_DES3_KEY_GEN, wrapUnwrap)
        let tdesVictim = try des(CKM_DES3_KEY_GEN, [CKA_WRAP: false], extractable: true)
        let aesVictim = try generated(f, s, [CKA_WRAP: false], extractable: true)
        let ecb = try Mechanism(type: CKM_DES3_ECB, parameter: nil)

        // A sensitive 3DES key under a wrap-only 3DES key: allowed.
        #expect(bytes(try f.rt.wrapKey(session: s, mechanism: ecb, wrappingKey: tdesKEK, key: tdesVictim, capacity: 64)).count == 24)
        // Rule 6: not under a key that can unwrap (it would unwrap one block as a DES key).
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: ecb, wrappingKey: tdesKEKUnwrap, key: tdesVictim, capacity: 64) }
                == CKR_KEY_NOT_WRAPPABLE)
        let aesKEKUnwrap = try generated(f, s, wrapUnwrap)
        for m in [try Mechanism(type: CKM_AES_ECB, parameter: nil), Mechanism.aesCBC(iv: [UInt8](repeating: 1, count: 16), pad: false)] {
            #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: m, wrappingKey: aesKEKUnwrap, key: aesVictim, capacity: 64) }
                    == CKR_KEY_NOT_WRAPPABLE)
        }
        // Rule 9: a sensitive AES key never under 3DES; a 3DES key never under a two-key 3DES key.
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: ecb, wrappingKey: tdesKEK, key: aesVictim, capacity: 64) }
                == CKR_KEY_NOT_WRAPPABLE)
        let des2KEK = try des(CKM_DES2_KEY_GEN, wrapOnly)
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: ecb, wrappingKey: des2KEK, key: tdesVictim, capacity: 64) }
                == CKR_KEY_NOT_WRAPPABLE)
        let des2Victim = try des(CKM_DES2_KEY_GEN, [CKA_WRAP: false], extractable: true)
        #expect(bytes(try f.rt.wrapKey(session: s, mechanism: ecb, wrappingKey: des2KEK, key: des2Victim, capacity: 64)).count == 16)
        // Rule 1 still first: pkcs11test's TookanAttackA1 (WRAP and DECRYPT on the 3DES key).
        let wrapDecrypt = try des(CKM_DES3_KEY_GEN, [CKA_WRAP: true, CKA_DECRYPT: true])
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: ecb, wrappingKey: wrapDecrypt, key: tdesVictim, capacity: 64) }
                == CKR_KEY_NOT_WRAPPABLE)
    }
}
