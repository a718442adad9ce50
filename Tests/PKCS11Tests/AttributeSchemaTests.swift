#if canImport(Glibc)
import Glibc
#endif
import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// Issue 13, what a template may say (AttributeSchema.swift, CheckValue.swift,
/// KDFLimits.pbkdf2Work). Every expectation is a sentence of PKCS #11 3.0:
///
/// - §4.10, CKA_CHECK_VALUE: "If a value is supplied in the application
///   template ... it MUST match what the library calculates it to be or the
///   library returns a CKR_ATTRIBUTE_VALUE_INVALID"; "The generation of the
///   KCV may be prevented by the application supplying the attribute in the
///   template as a no-value (0 length) entry"; "C_SetAttributeValue may be
///   used to destroy the attribute, by supplying no-value". AES/DES/DES3:
///   "the first three bytes of the ECB encryption of a single block of null
///   (0x00) bytes"; generic secret and ChaCha20: "the first three bytes of
///   the SHA-1 hash of the ... CKA_VALUE attribute"; X.509 certificates:
///   "the first three bytes of the SHA-1 hash of the certificate object's
///   CKA_VALUE attribute". The expected values below come from outside the
///   module: `openssl enc -aes-256-ecb / -des-ede3 / -des-ecb -nopad` of a
///   zero block, `openssl sha1`, and the FIPS 180 "abc" vector.
/// - §5.1.6: CKR_ATTRIBUTE_TYPE_INVALID, "An invalid attribute type was
///   specified in a template", for types the object's class and key type do
///   not have (SoftHSM2 2.6.1 answers the same, probed).
/// - §3.3: CK_DATE is 8 characters; the dates default to empty.
struct AttributeSchemaTests {
    func secret(_ type: CK_KEY_TYPE, _ value: [UInt8], _ extra: [Attribute] = []) -> Template {
        [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, type), Attribute(CKA_VALUE, value),
         .bool(CKA_ENCRYPT, true)] + extra
    }

    func kcv(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ h: CK_OBJECT_HANDLE) throws -> AttributeLookup {
        try f.rt.getAttributeValue(session: s, object: h, types: [CKA_CHECK_VALUE])[0]
    }

    static let aes256Key = Array(0...31).map { UInt8($0) }
    static let des3Key = hexBytes("0123456789abcdef23456789abcdef01456789abcdef0123")
    static let desKey = hexBytes("0123456789abcdef")

    @Test func checkValueOfEachSecretKeyTypeAndOfCertificates() throws {
        let (f, s) = try loggedIn()
        let cases: [(CK_KEY_TYPE, [UInt8], String)] = [
            (CKK_AES, [UInt8](repeating: 0, count: 16), "66e94b"),  // AES-128(0, 0): 66e94bd4...
            (CKK_AES, Self.aes256Key, "f29000"),
            (CKK_DES3, Self.des3Key, "4eba73"),
            (CKK_DES, Self.desKey, "d5d44f"),
            (CKK_GENERIC_SECRET, Array("abc".utf8), "a9993e"),  // SHA-1("abc") = a9993e36...
            (CKK_SHA256_HMAC, Array("abc".utf8), "a9993e"),
            (CKK_CHACHA20, [UInt8](repeating: 0, count: 32), "de8a84"),
        ]
        for (type, value, expected) in cases {
            let h = try f.rt.createObject(session: s, template: secret(type, value))
            #expect(try kcv(f, s, h) == .value(hexBytes(expected)), "key type \(type)")
            // The same value stated by the caller is accepted.
            _ = try f.rt.createObject(session: s, template: secret(type, value, [Attribute(CKA_CHECK_VALUE, hexBytes(expected))]))
        }
        // Generated, unwrapped and copied keys carry it too: a generated
        // extractable AES key's KCV is the ECB encryption of a zero block
        // under its (read back) value.
        let gen = try f.rt.generateKey(session: s, mechanism: try Mechanism(type: CKM_AES_KEY_GEN, parameter: nil), template: [
            .ulong(CKA_VALUE_LEN, 32), .bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)])
        guard case .value(let v) = try f.rt.getAttributeValue(session: s, object: gen, types: [CKA_VALUE])[0] else {
            Issue.record("no value"); return
        }
        let block = try AESMode.ecb.context(key: v, iv: nil, encrypt: true).update([UInt8](repeating: 0, count: 16))
        #expect(try kcv(f, s, gen) == .value(Array(block.prefix(3))))
        let copy = try f.rt.copyObject(session: s, object: gen, template: [.bool(CKA_TOKEN, false)])
        #expect(try kcv(f, s, copy) == .value(Array(block.prefix(3))))

        let der = try ObjectFactoryTests().read("device-ds-ke.cert.der")
        let certTemplate: Template = [.ulong(CKA_CLASS, CKO_CERTIFICATE), Attribute(CKA_VALUE, der), .bool(CKA_PRIVATE, false)]
        let cert = try f.rt.createObject(session: s, template: certTemplate)
        // openssl sha1 Tests/Fixtures/testdata/identities/device-ds-ke.cert.der: d15dc2ec...
        #expect(try kcv(f, s, cert) == .value(hexBytes("d15dc2")))
        #expect(rv { _ = try f.rt.createObject(session: s, template: certTemplate + [Attribute(CKA_CHECK_VALUE, [1, 2, 3])]) }
                == CKR_ATTRIBUTE_VALUE_INVALID)
    }

    @Test func aSuppliedCheckValueMustMatchAndAnEmptyOneMeansNone() throws {
        let (f, s) = try loggedIn()
        let zero = [UInt8](repeating: 0, count: 16)
        #expect(rv { _ = try f.rt.createObject(session: s, template: secret(CKK_AES, zero, [Attribute(CKA_CHECK_VALUE, [0, 0, 0])])) }
                == CKR_ATTRIBUTE_VALUE_INVALID)
        #expect(rv { _ = try f.rt.createObject(session: s, template: secret(CKK_AES, zero, [Attribute(CKA_CHECK_VALUE, [0x66, 0xE9])])) }
                == CKR_ATTRIBUTE_VALUE_INVALID)
        let none = try f.rt.createObject(session: s, template: secret(CKK_AES, zero, [Attribute(CKA_CHECK_VALUE, [])]))
        #expect(try kcv(f, s, none) == .value([]))
        // C_GenerateKey cannot know the value in advance: any non-empty KCV is wrong.
        #expect(rv { _ = try f.rt.generateKey(session: s, mechanism: try Mechanism(type: CKM_AES_KEY_GEN, parameter: nil),
                                              template: [.ulong(CKA_VALUE_LEN, 16), Attribute(CKA_CHECK_VALUE, [1, 2, 3])]) }
                == CKR_ATTRIBUTE_VALUE_INVALID)
        let noKCV = try f.rt.generateKey(session: s, mechanism: try Mechanism(type: CKM_AES_KEY_GEN, parameter: nil),
                                         template: [.ulong(CKA_VALUE_LEN, 16), Attribute(CKA_CHECK_VALUE, [])])
        #expect(try kcv(f, s, noKCV) == .value([]))

        // C_SetAttributeValue: the computed value is accepted, another is
        // not, and no-value destroys it (for good: it is not recomputed).
        let k = try f.rt.createObject(session: s, template: secret(CKK_AES, zero, [.bool(CKA_TOKEN, true)]))
        try f.rt.setAttributeValue(session: s, object: k, template: [Attribute(CKA_CHECK_VALUE, hexBytes("66e94b"))])
        #expect(rv { try f.rt.setAttributeValue(session: s, object: k, template: [Attribute(CKA_CHECK_VALUE, [1, 2, 3])]) }
                == CKR_ATTRIBUTE_VALUE_INVALID)
        #expect(rv { _ = try f.rt.copyObject(session: s, object: k, template: [Attribute(CKA_CHECK_VALUE, [1, 2, 3])]) }
                == CKR_ATTRIBUTE_VALUE_INVALID)
        try f.rt.setAttributeValue(session: s, object: k, template: [Attribute(CKA_CHECK_VALUE, [])])
        #expect(try kcv(f, s, k) == .value([]))
        let copied = try f.rt.copyObject(session: s, object: k, template: [.bool(CKA_TOKEN, false)])
        #expect(try kcv(f, s, copied) == .value([]))

        // C_UnwrapKey: the template's KCV is checked against the unwrapped value.
        let kek = try f.rt.generateKey(session: s, mechanism: try Mechanism(type: CKM_AES_KEY_GEN, parameter: nil), template: [
            .ulong(CKA_VALUE_LEN, 16), .bool(CKA_WRAP, true), .bool(CKA_UNWRAP, true), .bool(CKA_ENCRYPT, false), .bool(CKA_DECRYPT, false)])
        let target = try f.rt.createObject(session: s, template: secret(CKK_AES, zero, [.bool(CKA_EXTRACTABLE, true), .bool(CKA_SENSITIVE, false)]))
        let wrap = try Mechanism(type: CKM_AES_KEY_WRAP, parameter: nil)
        guard case .bytes(let wrapped) = try f.rt.wrapKey(session: s, mechanism: wrap, wrappingKey: kek, key: target, capacity: 64) else {
            Issue.record("no wrapped key"); return
        }
        let unwrapTemplate: Template = [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), .bool(CKA_ENCRYPT, true)]
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: wrap, unwrappingKey: kek, wrapped: wrapped,
                                            template: unwrapTemplate + [Attribute(CKA_CHECK_VALUE, [1, 2, 3])]) }
                == CKR_ATTRIBUTE_VALUE_INVALID)
        let back = try f.rt.unwrapKey(session: s, mechanism: wrap, unwrappingKey: kek, wrapped: wrapped,
                                      template: unwrapTemplate + [Attribute(CKA_CHECK_VALUE, hexBytes("66e94b"))])
        #expect(try kcv(f, s, back) == .value(hexBytes("66e94b")))
    }

    @Test func typesTheObjectDoesNotHaveAreTypeInvalidOnEveryPath() throws {
        let (f, s) = try loggedIn()
        let zero = [UInt8](repeating: 0, count: 16)
        let modulus = Attribute(CKA_MODULUS, [0xC1, 0x01])
        let p256 = Attribute(CKA_EC_PARAMS, ECCurve.p256.paramsDER)
        // C_CreateObject
        let foreign: [Attribute] = [
            modulus, p256, .ulong(CKA_CERTIFICATE_TYPE, CKC_X_509), .bool(CKA_VERIFY_RECOVER, true),
            Attribute(CKA_SUBJECT, [0x30, 0]), Attribute(CKA_APPLICATION, [1]), .ulong(CKA_VALUE_BITS, 128),
            Attribute(CK_ATTRIBUTE_TYPE(0x8000_1234), [1]),  // CKA_VENDOR_DEFINED | 0x1234
        ]
        for extra in foreign {
            #expect(rv { _ = try f.rt.createObject(session: s, template: secret(CKK_AES, zero, [extra])) }
                    == CKR_ATTRIBUTE_TYPE_INVALID, "AES key with attribute \(extra.type)")
        }
        let data: Template = [.ulong(CKA_CLASS, CKO_DATA), .bool(CKA_PRIVATE, false), Attribute(CKA_VALUE, [1])]
        #expect(rv { _ = try f.rt.createObject(session: s, template: data + [.ulong(CKA_KEY_TYPE, CKK_AES)]) } == CKR_ATTRIBUTE_TYPE_INVALID)
        #expect(rv { _ = try f.rt.createObject(session: s, template: data + [Attribute(CKA_START_DATE, Array("20200101".utf8))]) }
                == CKR_ATTRIBUTE_TYPE_INVALID)
        _ = try f.rt.createObject(session: s, template: data + [Attribute(CKA_APPLICATION, Array("app".utf8))])
        // C_GenerateKey, C_GenerateKeyPair (CKA_VALUE_LEN on an EC key, an RSA input on an EC key)
        let aesGen = try Mechanism(type: CKM_AES_KEY_GEN, parameter: nil)
        #expect(rv { _ = try f.rt.generateKey(session: s, mechanism: aesGen, template: [.ulong(CKA_VALUE_LEN, 16), modulus]) }
                == CKR_ATTRIBUTE_TYPE_INVALID)
        let ecGen = try Mechanism(type: CKM_EC_KEY_PAIR_GEN, parameter: nil)
        let pairs: [(Template, Template)] = [
            ([p256, .ulong(CKA_VALUE_LEN, 32)], [.bool(CKA_SIGN, true)]),
            ([p256], [.bool(CKA_SIGN, true), .ulong(CKA_VALUE_LEN, 32)]),
            ([p256, .ulong(CKA_MODULUS_BITS, 2048)], [.bool(CKA_SIGN, true)]),
            ([p256], [.bool(CKA_SIGN, true), .bool(CKA_ENCRYPT, true)]),
        ]
        for (pub, priv) in pairs {
            #expect(rv { _ = try f.rt.generateKeyPair(session: s, mechanism: ecGen, publicTemplate: pub, privateTemplate: priv) }
                    == CKR_ATTRIBUTE_TYPE_INVALID)
        }
        // What the tables do have still works: encrypt on a public key, decrypt on a private one.
        _ = try f.rt.generateKeyPair(session: s, mechanism: ecGen, publicTemplate: [p256, .bool(CKA_ENCRYPT, false)],
                                     privateTemplate: [.bool(CKA_SIGN, true), .bool(CKA_DECRYPT, false)])
        // C_SetAttributeValue, C_CopyObject
        let k = try f.rt.createObject(session: s, template: secret(CKK_AES, zero, [.bool(CKA_EXTRACTABLE, true), .bool(CKA_SENSITIVE, false)]))
        #expect(rv { try f.rt.setAttributeValue(session: s, object: k, template: [modulus]) } == CKR_ATTRIBUTE_TYPE_INVALID)
        #expect(rv { _ = try f.rt.copyObject(session: s, object: k, template: [modulus]) } == CKR_ATTRIBUTE_TYPE_INVALID)
        // C_UnwrapKey
        let kek = try f.rt.generateKey(session: s, mechanism: aesGen, template: [
            .ulong(CKA_VALUE_LEN, 16), .bool(CKA_WRAP, true), .bool(CKA_UNWRAP, true), .bool(CKA_ENCRYPT, false), .bool(CKA_DECRYPT, false)])
        let wrap = try Mechanism(type: CKM_AES_KEY_WRAP, parameter: nil)
        guard case .bytes(let wrapped) = try f.rt.wrapKey(session: s, mechanism: wrap, wrappingKey: kek, key: k, capacity: 64) else {
            Issue.record("no wrapped key"); return
        }
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: wrap, unwrappingKey: kek, wrapped: wrapped, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), Attribute(CKA_EC_POINT, [4, 1, 2])]) }
                == CKR_ATTRIBUTE_TYPE_INVALID)
        // C_DeriveKey (CKM_CONCATENATE_BASE_AND_DATA into a generic secret)
        let base = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET), Attribute(CKA_VALUE, [1, 2, 3, 4]),
            .bool(CKA_DERIVE, true)])
        let concat = Mechanism.simpleDerive(.concatenateBaseAndData([5, 6]))
        #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: concat, baseKey: base, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET), Attribute(CKA_PRIME_1, [3])]) }
                == CKR_ATTRIBUTE_TYPE_INVALID)
        _ = try f.rt.deriveKey(session: s, mechanism: concat, baseKey: base, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET), .bool(CKA_SIGN, true)])
    }

    @Test func datesAreEmptyOrACKDate() throws {
        let (f, s) = try loggedIn()
        let zero = [UInt8](repeating: 0, count: 16)
        let bads: [[UInt8]] = [Array("2020010".utf8), Array("202001010".utf8), [1]]
        for bad in bads {
            #expect(rv { _ = try f.rt.createObject(session: s, template: secret(CKK_AES, zero, [Attribute(CKA_START_DATE, bad)])) }
                    == CKR_ATTRIBUTE_VALUE_INVALID)
            #expect(rv { _ = try f.rt.createObject(session: s, template: secret(CKK_AES, zero, [Attribute(CKA_END_DATE, bad)])) }
                    == CKR_ATTRIBUTE_VALUE_INVALID)
        }
        let k = try f.rt.createObject(session: s, template: secret(CKK_AES, zero, [
            Attribute(CKA_START_DATE, Array("20200101".utf8)), Attribute(CKA_END_DATE, [])]))
        #expect(try f.rt.getAttributeValue(session: s, object: k, types: [CKA_START_DATE, CKA_END_DATE])
                == [.value(Array("20200101".utf8)), .value([])])
        #expect(rv { try f.rt.setAttributeValue(session: s, object: k, template: [Attribute(CKA_END_DATE, [1, 2, 3])]) }
                == CKR_ATTRIBUTE_VALUE_INVALID)
        try f.rt.setAttributeValue(session: s, object: k, template: [Attribute(CKA_END_DATE, Array("20301231".utf8))])
        #expect(rv { _ = try f.rt.copyObject(session: s, object: k, template: [Attribute(CKA_START_DATE, [1])]) }
                == CKR_ATTRIBUTE_VALUE_INVALID)
        #expect(rv {
            _ = try f.rt.generateKeyPair(session: s, mechanism: try Mechanism(type: CKM_EC_KEY_PAIR_GEN, parameter: nil),
                                         publicTemplate: [Attribute(CKA_EC_PARAMS, ECCurve.p256.paramsDER)],
                                         privateTemplate: [.bool(CKA_SIGN, true), Attribute(CKA_START_DATE, Array("abc".utf8))])
        } == CKR_ATTRIBUTE_VALUE_INVALID)
    }

    /// KDFLimits.pbkdf2Work: iterations times output blocks at most 2^24,
    /// refused before any work is done (the old code ran whatever it was
    /// given: the 3 * 2^23 HMACs below took it 18 s; 2^31 - 1 iterations
    /// hold the session for about 26 minutes).
    @Test func pbkdf2WorkIsBounded() throws {
        var password = Array("password".utf8)
        var salt = Array("salt".utf8)
        func decode(iterations: CK_ULONG) -> CK_RV {
            password.withUnsafeMutableBufferPointer { pw in
                salt.withUnsafeMutableBytes { sb in
                    var p = CK_PKCS5_PBKD2_PARAMS2(saltSource: CK_ULONG(CKZ_SALT_SPECIFIED), pSaltSourceData: sb.baseAddress,
                                                   ulSaltSourceDataLen: 4, iterations: iterations,
                                                   prf: CK_ULONG(CKP_PKCS5_PBKD2_HMAC_SHA256), pPrfData: nil, ulPrfDataLen: 0,
                                                   pPassword: pw.baseAddress, ulPasswordLen: 8)
                    return rv { _ = try withUnsafeBytes(of: &p) { try Mechanism(type: CKM_PKCS5_PBKD2, parameter: $0) } }
                }
            }
        }
        #expect(decode(iterations: 1 << 24) == CKR_OK)
        #expect(decode(iterations: (1 << 24) + 1) == CKR_MECHANISM_PARAM_INVALID)
        #expect(decode(iterations: CK_ULONG(Int32.max)) == CKR_MECHANISM_PARAM_INVALID)
        // A key of three SHA-256 blocks at 2^23 iterations is 3 * 2^23 HMACs: over the bound.
        let (f, s) = try loggedIn()
        let p = PBKDF2Parameters(prf: .sha256, salt: salt, iterations: 1 << 23, password: password)
        let start = monotonicSeconds()
        #expect(rv { _ = try f.rt.generateKey(session: s, mechanism: .pbkdf2(p), template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET), .ulong(CKA_VALUE_LEN, 96)]) }
                == CKR_MECHANISM_PARAM_INVALID)
        #expect(monotonicSeconds() - start < 1, "refused before the work")
        // Within it: one block at two iterations (RFC 7914 §11's first PBKDF2-HMAC-SHA256 vector, 1 iteration, is in DigestKDFVectorTests).
        let ok = PBKDF2Parameters(prf: .sha256, salt: salt, iterations: 2, password: password)
        _ = try f.rt.generateKey(session: s, mechanism: .pbkdf2(ok), template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET), .ulong(CKA_VALUE_LEN, 32)])
    }
}

private func monotonicSeconds() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}
