import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// The rules around the derivations and key generations of
/// KeyDerivation.swift / SecretKeyGeneration.swift: what the derived key
/// inherits, which keys and templates are refused, parameter decoding.
struct KeyDerivationTests {
    func secret(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ value: [UInt8], type: CK_KEY_TYPE = CKK_GENERIC_SECRET,
                sensitive: Bool = true, extractable: Bool = false, derive: Bool = true) throws -> CK_OBJECT_HANDLE {
        try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, type), Attribute(CKA_VALUE, value),
            .bool(CKA_SENSITIVE, sensitive), .bool(CKA_EXTRACTABLE, extractable), .bool(CKA_DERIVE, derive),
            .bool(CKA_SIGN, true),
        ])
    }

    func bool(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ h: CK_OBJECT_HANDLE, _ t: CK_ATTRIBUTE_TYPE) throws -> Bool? {
        guard case .value(let v)? = try f.rt.getAttributeValue(session: s, object: h, types: [t]).first else { return nil }
        return AttributeCoding.decodeBool(v)
    }

    func ulong(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ h: CK_OBJECT_HANDLE, _ t: CK_ATTRIBUTE_TYPE) throws -> CK_ULONG? {
        guard case .value(let v)? = try f.rt.getAttributeValue(session: s, object: h, types: [t]).first else { return nil }
        return AttributeCoding.decodeULong(v)
    }

    func allObjects(_ f: Fixture, _ s: CK_SESSION_HANDLE) throws -> [CK_OBJECT_HANDLE] {
        try f.rt.findObjectsInit(session: s, template: [])
        defer { try? f.rt.findObjectsFinal(session: s) }
        return try f.rt.findObjects(session: s, max: 10_000)
    }

    func value(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ h: CK_OBJECT_HANDLE) throws -> [UInt8]? {
        guard case .value(let v)? = try f.rt.getAttributeValue(session: s, object: h, types: [CKA_VALUE]).first else {
            return nil
        }
        return v
    }

    static let hkdf = HKDFParameters(extract: true, expand: true, prf: .sha256, salt: .data([1, 2, 3]), info: [4])

    /// §2.62: SENSITIVE/EXTRACTABLE as the template says (defaults: the base
    /// key's); ALWAYS_SENSITIVE and NEVER_EXTRACTABLE only from a base that
    /// has them and only while the new key keeps them; never LOCAL.
    @Test func derivedKeysFollowTheirBase() throws {
        let (f, s) = try loggedIn()
        let gen = try f.rt.generateKey(session: s, mechanism: try Mechanism(type: CKM_GENERIC_SECRET_KEY_GEN, parameter: nil),
                                       template: [.ulong(CKA_VALUE_LEN, 32), .bool(CKA_DERIVE, true)])
        #expect(try bool(f, s, gen, CKA_ALWAYS_SENSITIVE) == true)
        let d1 = try f.rt.deriveKey(session: s, mechanism: .hkdf(Self.hkdf, data: false), baseKey: gen,
                                    template: [.ulong(CKA_VALUE_LEN, 32)])
        #expect(try bool(f, s, d1, CKA_SENSITIVE) == true && bool(f, s, d1, CKA_EXTRACTABLE) == false)
        #expect(try bool(f, s, d1, CKA_ALWAYS_SENSITIVE) == true && bool(f, s, d1, CKA_NEVER_EXTRACTABLE) == true)
        #expect(try bool(f, s, d1, CKA_LOCAL) == false && bool(f, s, d1, CKA_DERIVE) == false)
        #expect(try ulong(f, s, d1, CKA_KEY_GEN_MECHANISM) == CKM_HKDF_DERIVE)
        let d2 = try f.rt.deriveKey(session: s, mechanism: .hkdf(Self.hkdf, data: false), baseKey: gen,
                                    template: [.ulong(CKA_VALUE_LEN, 32), .bool(CKA_SENSITIVE, false),
                                               .bool(CKA_EXTRACTABLE, true)])
        #expect(try bool(f, s, d2, CKA_ALWAYS_SENSITIVE) == false && bool(f, s, d2, CKA_NEVER_EXTRACTABLE) == false)
        #expect(try value(f, s, d2)?.count == 32)
        // A base key made from a known value was never "always sensitive".
        let known = try secret(f, s, Array(repeating: 1, count: 32))
        let d3 = try f.rt.deriveKey(session: s, mechanism: .hkdf(Self.hkdf, data: false), baseKey: known,
                                    template: [.ulong(CKA_VALUE_LEN, 16), .ulong(CKA_KEY_TYPE, CKK_AES)])
        #expect(try bool(f, s, d3, CKA_ALWAYS_SENSITIVE) == false && bool(f, s, d3, CKA_SENSITIVE) == true)
        // A derived key is not local: it wraps no sensitive key (KeyUsagePolicy rule 2).
        #expect(try bool(f, s, d3, CKA_WRAP) == true)
    }

    @Test func baseKeysAreChecked() throws {
        let (f, s) = try loggedIn()
        let noDerive = try secret(f, s, Array(repeating: 1, count: 32), derive: false)
        #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: .hkdf(Self.hkdf, data: false), baseKey: noDerive,
                                            template: []) } == CKR_KEY_FUNCTION_NOT_PERMITTED)
        let aes = try secret(f, s, Array(repeating: 1, count: 16), type: CKK_AES)
        #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: .hkdf(Self.hkdf, data: false), baseKey: aes,
                                            template: []) } == CKR_KEY_TYPE_INCONSISTENT)
        let generic = try secret(f, s, Array(repeating: 1, count: 16))
        let cmac = SP800108Parameters(prf: .cmacAES, prfMechanism: CKM_AES_CMAC, feedbackIV: nil,
                                      data: [.iterationCounter(bits: 8, littleEndian: false), .bytes([1])], additionalKeys: [])
        #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: .sp800108(cmac), baseKey: generic,
                                            template: [.ulong(CKA_VALUE_LEN, 16)]) } == CKR_KEY_TYPE_INCONSISTENT)
        #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: .sp800108(cmac), baseKey: aes,
                                            template: []) } == CKR_TEMPLATE_INCOMPLETE)
        #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: .hkdf(Self.hkdf, data: false), baseKey: 0x7777,
                                            template: []) } == CKR_KEY_HANDLE_INVALID)
        // A salt key needs CKA_DERIVE too.
        var p = Self.hkdf
        p.salt = .key(noDerive)
        #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: .hkdf(p, data: false), baseKey: generic,
                                            template: []) } == CKR_KEY_FUNCTION_NOT_PERMITTED)
        // HMAC keys of another hash.
        let sha256Key = try secret(f, s, Array(repeating: 2, count: 32), type: CKK_SHA256_HMAC)
        #expect(rv { try f.rt.signInit(session: s, mechanism: .hmac(.sha384), key: sha256Key) } == CKR_KEY_TYPE_INCONSISTENT)
        try f.rt.signInit(session: s, mechanism: .hmac(.sha256), key: sha256Key)
    }

    /// CKA_VALUE_LEN: 0 or above 1024 bytes or not an AES size is
    /// CKR_ATTRIBUTE_VALUE_INVALID; more than the mechanism gives is
    /// CKR_TEMPLATE_INCONSISTENT (Kryoptic's answer).
    @Test func valueLengths() throws {
        let (f, s) = try loggedIn()
        let base = try secret(f, s, Array(repeating: 3, count: 32))
        let h = Mechanism.hkdf(Self.hkdf, data: false)
        for (t, want) in [([Attribute.ulong(CKA_VALUE_LEN, 0)], CKR_ATTRIBUTE_VALUE_INVALID),
                          ([.ulong(CKA_VALUE_LEN, 2000)], CKR_ATTRIBUTE_VALUE_INVALID),
                          ([.ulong(CKA_VALUE_LEN, 17), .ulong(CKA_KEY_TYPE, CKK_AES)], CKR_ATTRIBUTE_VALUE_INVALID),
                          ([.ulong(CKA_KEY_TYPE, CKK_RSA)], CKR_TEMPLATE_INCONSISTENT),
                          ([.ulong(CKA_CLASS, CKO_PRIVATE_KEY)], CKR_TEMPLATE_INCONSISTENT),
                          ([Attribute(CKA_VALUE, [1])], CKR_ATTRIBUTE_READ_ONLY),
                          ([.bool(CKA_LOCAL, true)], CKR_ATTRIBUTE_READ_ONLY)] {
            #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: h, baseKey: base, template: t) } == want, "\(t)")
        }
        var extractOnly = Self.hkdf
        extractOnly.expand = false
        #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: .hkdf(extractOnly, data: false), baseKey: base,
                                            template: [.ulong(CKA_VALUE_LEN, 16)]) } == CKR_TEMPLATE_INCONSISTENT)
        let sha1 = HKDFParameters(extract: true, expand: true, prf: .sha1, salt: .null, info: [])
        // 1024 bytes (the module's limit) is below 255 HashLen for every hash.
        _ = try f.rt.deriveKey(session: s, mechanism: .hkdf(sha1, data: false), baseKey: base,
                               template: [.ulong(CKA_VALUE_LEN, 1024)])
        #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: .simpleDerive(.concatenateBaseAndData([1])),
                                            baseKey: base, template: [.ulong(CKA_VALUE_LEN, 34)]) }
                == CKR_TEMPLATE_INCONSISTENT)
        // The defaults: HKDF gives HashLen, a concatenation the sum.
        let d = try f.rt.deriveKey(session: s, mechanism: h, baseKey: base, template: [])
        #expect(try ulong(f, s, d, CKA_VALUE_LEN) == 32)
        let c = try f.rt.deriveKey(session: s, mechanism: .simpleDerive(.concatenateBaseAndData([UInt8](repeating: 9, count: 8))),
                                   baseKey: base, template: [])
        #expect(try ulong(f, s, c, CKA_VALUE_LEN) == 40)
    }

    /// The "weaker key" extraction (Clulow 2003): derive short keys that
    /// hold one unknown byte of a sensitive key, find each byte with 256
    /// trial HMACs, and rebuild the key. Refused for hidden keys (fewer than
    /// 16 bytes of one in a derived key); a readable key may be cut freely.
    @Test func shortDerivationsOfHiddenKeysAreRefused() throws {
        let (f, s) = try loggedIn()
        let victimValue: [UInt8] = (0..<32).map { UInt8($0 * 7 + 1) }
        let victim = try secret(f, s, victimValue)
        let known = [UInt8](repeating: 0xAA, count: 15)
        var recovered: [UInt8] = []
        var refusals: [CK_RV] = []
        // Byte i: a 16-byte key of 15 known bytes and the victim's byte i
        // (CKM_EXTRACT_KEY_FROM_KEY at bit 8i, then CKM_CONCATENATE_DATA_AND_BASE).
        for i in 0..<4 {
            var got: CK_OBJECT_HANDLE = 0
            let r = rv {
                let one = try f.rt.deriveKey(session: s, mechanism: .simpleDerive(.extractKeyFromKey(bitOffset: CK_ULONG(8 * i))),
                                             baseKey: victim, template: [.ulong(CKA_VALUE_LEN, 1), .bool(CKA_DERIVE, true)])
                got = try f.rt.deriveKey(session: s, mechanism: .simpleDerive(.concatenateDataAndBase(known)), baseKey: one,
                                         template: [.ulong(CKA_VALUE_LEN, 16), .bool(CKA_SIGN, true)])
            }
            refusals.append(r)
            guard r == CKR_OK else { continue }
            try f.rt.signInit(session: s, mechanism: .hmac(.sha256), key: got)
            guard case .bytes(let mac) = try f.rt.sign(session: s, data: [0], capacity: 32) else { continue }
            for b in 0...255 where try HMAC.mac(.sha256, key: known + [UInt8(b)], data: [0]) == mac {
                recovered.append(UInt8(b))
            }
        }
        #expect(recovered != Array(victimValue.prefix(4)), "the attack recovered the victim's bytes")
        #expect(refusals.allSatisfy { $0 == CKR_TEMPLATE_INCONSISTENT }, "\(refusals)")
        // The other shapes of the same attack.
        for (m, len) in [(SimpleDerivation.concatenateDataAndBase(known), 16), (.concatenateBaseAndData([1]), 1),
                         (.xorBaseAndData([0]), 1), (.extractKeyFromKey(bitOffset: 3), 15)] {
            #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: .simpleDerive(m), baseKey: victim,
                                                template: [.ulong(CKA_VALUE_LEN, CK_ULONG(len))]) } == CKR_TEMPLATE_INCONSISTENT,
                    "\(m)")
        }
        let readable = try secret(f, s, victimValue, sensitive: false, extractable: true)
        let cut = try f.rt.deriveKey(session: s, mechanism: .simpleDerive(.extractKeyFromKey(bitOffset: 8)),
                                     baseKey: readable, template: [.ulong(CKA_VALUE_LEN, 1)])
        #expect(try value(f, s, cut) == nil, "sensitive by default")
        // Enough of the hidden key is fine, and the result is forced sensitive / unextractable.
        let ok = try f.rt.deriveKey(session: s, mechanism: .simpleDerive(.concatenateDataAndBase(known)), baseKey: victim,
                                    template: [.ulong(CKA_VALUE_LEN, 31), .bool(CKA_SENSITIVE, false),
                                               .bool(CKA_EXTRACTABLE, true)])
        #expect(try bool(f, s, ok, CKA_SENSITIVE) == true && bool(f, s, ok, CKA_EXTRACTABLE) == false)
    }

    /// §2.42's examples: extraction at bit 21 of 0x329F84A9 gives 0x9526;
    /// XOR and both concatenations on readable keys.
    @Test func simpleDerivationValues() throws {
        #expect(Runtime.extractBits([0x32, 0x9F, 0x84, 0xA9], from: 21, bytes: 2) == [0x95, 0x26])
        let (f, s) = try loggedIn()
        let a = try secret(f, s, [0x01, 0x23, 0x45, 0x67], sensitive: false, extractable: true)
        let b = try secret(f, s, [0x89, 0xAB, 0xCD, 0xEF], sensitive: false, extractable: true)
        let open: Template = [.bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)]
        func derive(_ m: SimpleDerivation, _ t: Template = []) throws -> [UInt8]? {
            try value(f, s, try f.rt.deriveKey(session: s, mechanism: .simpleDerive(m), baseKey: a, template: open + t))
        }
        #expect(try derive(.concatenateBaseAndKey(b)) == [0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF])
        #expect(try derive(.concatenateBaseAndData([0x89, 0xAB, 0xCD, 0xEF])) == [0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF])
        #expect(try derive(.concatenateDataAndBase([0x89, 0xAB, 0xCD, 0xEF])) == [0x89, 0xAB, 0xCD, 0xEF, 0x01, 0x23, 0x45, 0x67])
        #expect(try derive(.xorBaseAndData([0x89, 0xAB, 0xCD, 0xEF])) == [0x88, 0x88, 0x88, 0x88])
        #expect(try derive(.extractKeyFromKey(bitOffset: 4), [.ulong(CKA_VALUE_LEN, 4)]) == [0x12, 0x34, 0x56, 0x70])
        #expect(rv { _ = try derive(.extractKeyFromKey(bitOffset: 32), [.ulong(CKA_VALUE_LEN, 1)]) } == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv { _ = try derive(.extractKeyFromKey(bitOffset: 0)) } == CKR_TEMPLATE_INCOMPLETE)
        // The second key of a concatenation needs CKA_DERIVE too.
        let noDerive = try secret(f, s, [1, 2, 3, 4], sensitive: false, extractable: true, derive: false)
        #expect(rv { _ = try derive(.concatenateBaseAndKey(noDerive)) } == CKR_KEY_FUNCTION_NOT_PERMITTED)
    }

    /// SP 800-108 additional keys: disjoint segments, in order, all or none.
    @Test func sp800108AdditionalKeys() throws {
        let (f, s) = try loggedIn()
        let kiValue = [UInt8](repeating: 0x42, count: 32)
        let base = try secret(f, s, kiValue, sensitive: false, extractable: true)
        let open: Template = [.bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)]
        let data: [SP800108Parameters.DataParam] = [
            .iterationCounter(bits: 32, littleEndian: false), .bytes(Array("label".utf8)),
            .dkmLength(sumOfSegments: false, bits: 32, littleEndian: false),
        ]
        let extra = [AdditionalDerivedKey(template: open + [.ulong(CKA_VALUE_LEN, 16)], handleAddress: 1)]
        let p = SP800108Parameters(prf: .hmac(.sha256), prfMechanism: CKM_SHA256_HMAC, feedbackIV: nil, data: data,
                                   additionalKeys: extra)
        let hs = try f.rt.deriveKeys(session: s, mechanism: .sp800108(p), baseKey: base,
                                     template: open + [.ulong(CKA_VALUE_LEN, 48)])
        #expect(hs.count == 2)
        // 48 + 16 bytes: L = 512 bits, three 32-byte segments; the second key starts at the third.
        let dkm = try SP800108.derive(prf: .hmac(.sha256), key: kiValue, mode: .counter,
                                      fields: [.counter(bits: 32, littleEndian: false), .bytes(Array("label".utf8)),
                                               .length(bits: 32, littleEndian: false)], lengthValue: 512, blocks: 3)
        #expect(try value(f, s, hs[0]) == Array(dkm[0..<48]))
        #expect(try value(f, s, hs[1]) == Array(dkm[64..<80]))
        // A bad additional template: nothing is made.
        let before = try allObjects(f, s)
        let bad = SP800108Parameters(prf: .hmac(.sha256), prfMechanism: CKM_SHA256_HMAC, feedbackIV: nil, data: data,
                                     additionalKeys: extra + [AdditionalDerivedKey(template: [.ulong(CKA_VALUE_LEN, 0)],
                                                                                   handleAddress: 1)])
        #expect(rv { _ = try f.rt.deriveKeys(session: s, mechanism: .sp800108(bad), baseKey: base,
                                             template: [.ulong(CKA_VALUE_LEN, 16)]) } == CKR_ATTRIBUTE_VALUE_INVALID)
        #expect(try allObjects(f, s) == before)
        // An 8-bit counter cannot count 256 blocks.
        let narrow = SP800108Parameters(prf: .hmac(.sha1), prfMechanism: CKM_SHA_1_HMAC, feedbackIV: nil,
                                        data: [.iterationCounter(bits: 8, littleEndian: true)], additionalKeys: [])
        _ = try f.rt.deriveKey(session: s, mechanism: .sp800108(narrow), baseKey: base, template: [.ulong(CKA_VALUE_LEN, 1000)])
        let narrowest = SP800108Parameters(prf: .hmac(.sha1), prfMechanism: CKM_SHA_1_HMAC, feedbackIV: nil,
                                           data: [.iterationCounter(bits: 32, littleEndian: true),
                                                  .dkmLength(sumOfSegments: true, bits: 8, littleEndian: false)],
                                           additionalKeys: [])
        #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: .sp800108(narrowest), baseKey: base,
                                            template: [.ulong(CKA_VALUE_LEN, 40)]) } == CKR_MECHANISM_PARAM_INVALID)
    }

    @Test func keyGeneration() throws {
        let (f, s) = try loggedIn()
        let k = try f.rt.generateKey(session: s, mechanism: try Mechanism(type: CKM_SHA3_256_KEY_GEN, parameter: nil),
                                     template: [.ulong(CKA_VALUE_LEN, 32)])
        #expect(try ulong(f, s, k, CKA_KEY_TYPE) == CKK_SHA3_256_HMAC && bool(f, s, k, CKA_LOCAL) == true)
        #expect(try ulong(f, s, k, CKA_KEY_GEN_MECHANISM) == CKM_SHA3_256_KEY_GEN)
        try f.rt.signInit(session: s, mechanism: .hmac(.sha3_256), key: k)
        let g = try f.rt.generateKey(session: s, mechanism: try Mechanism(type: CKM_GENERIC_SECRET_KEY_GEN, parameter: nil),
                                     template: [.ulong(CKA_VALUE_LEN, 20), .ulong(CKA_KEY_TYPE, CKK_SHA512_224_HMAC)])
        #expect(try ulong(f, s, g, CKA_KEY_TYPE) == CKK_SHA512_224_HMAC)
        let hk = try f.rt.generateKey(session: s, mechanism: try Mechanism(type: CKM_HKDF_KEY_GEN, parameter: nil),
                                      template: [.ulong(CKA_VALUE_LEN, 32), .bool(CKA_DERIVE, true)])
        #expect(try ulong(f, s, hk, CKA_KEY_TYPE) == CKK_HKDF)
        _ = try f.rt.deriveKey(session: s, mechanism: .hkdf(Self.hkdf, data: false), baseKey: hk, template: [])
        for (m, t, want) in [(CKM_SHA256_KEY_GEN, [Attribute](), CKR_TEMPLATE_INCOMPLETE),
                             (CKM_SHA256_KEY_GEN, [.ulong(CKA_VALUE_LEN, 513)], CKR_ATTRIBUTE_VALUE_INVALID),
                             (CKM_SHA256_KEY_GEN, [.ulong(CKA_VALUE_LEN, 16), .ulong(CKA_KEY_TYPE, CKK_SHA384_HMAC)],
                              CKR_TEMPLATE_INCONSISTENT),
                             (CKM_GENERIC_SECRET_KEY_GEN, [.ulong(CKA_VALUE_LEN, 16), .ulong(CKA_KEY_TYPE, CKK_RSA)],
                              CKR_TEMPLATE_INCONSISTENT)] {
            #expect(rv { _ = try f.rt.generateKey(session: s, mechanism: try Mechanism(type: m, parameter: nil), template: t) }
                    == want)
        }
        // PBKDF2 needs CKA_KEY_TYPE and CKA_VALUE_LEN, and its key was never secret.
        let p = PBKDF2Parameters(prf: .sha256, salt: [1, 2, 3, 4], iterations: 2, password: Array("pw".utf8))
        #expect(rv { _ = try f.rt.generateKey(session: s, mechanism: .pbkdf2(p), template: [.ulong(CKA_VALUE_LEN, 16)]) }
                == CKR_TEMPLATE_INCOMPLETE)
        #expect(rv { _ = try f.rt.generateKey(session: s, mechanism: .pbkdf2(p),
                                              template: [.ulong(CKA_KEY_TYPE, CKK_AES)]) } == CKR_TEMPLATE_INCOMPLETE)
        let pk = try f.rt.generateKey(session: s, mechanism: .pbkdf2(p),
                                      template: [.ulong(CKA_KEY_TYPE, CKK_AES), .ulong(CKA_VALUE_LEN, 16)])
        #expect(try bool(f, s, pk, CKA_ALWAYS_SENSITIVE) == false && bool(f, s, pk, CKA_LOCAL) == false)
        // C_CreateObject takes the HMAC and HKDF key types.
        _ = try secret(f, s, [1, 2, 3], type: CKK_SHA3_384_HMAC)
        _ = try secret(f, s, [1, 2, 3], type: CKK_HKDF)
    }

    /// Parameter decoding: exact struct sizes, NULL pointers with lengths,
    /// unknown PRFs, zero lengths, both PBKDF2 layouts.
    @Test func parameterDecoding() throws {
        func decode<T>(_ type: CK_MECHANISM_TYPE, _ v: T) -> CK_RV {
            var v = v
            return rv { _ = try withUnsafeBytes(of: &v) { try Mechanism(type: type, parameter: $0) } }
        }
        var salt: [UInt8] = [1, 2, 3]
        let good = salt.withUnsafeMutableBufferPointer { sp in
            CK_HKDF_PARAMS(bExtract: 1, bExpand: 1, prfHashMechanism: CKM_SHA256, ulSaltType: CK_ULONG(CKF_HKDF_SALT_DATA),
                           pSalt: sp.baseAddress, ulSaltLen: 3, hSaltKey: 0, pInfo: nil, ulInfoLen: 0)
        }
        #expect(decode(CKM_HKDF_DERIVE, good) == CKR_OK)
        var g = good
        g.bExtract = 0; g.bExpand = 0
        #expect(decode(CKM_HKDF_DERIVE, g) == CKR_MECHANISM_PARAM_INVALID)
        g = good; g.prfHashMechanism = CKM_MD5
        #expect(decode(CKM_HKDF_DERIVE, g) == CKR_MECHANISM_PARAM_INVALID)
        g = good; g.ulSaltType = 8
        #expect(decode(CKM_HKDF_DATA, g) == CKR_MECHANISM_PARAM_INVALID)
        g = good; g.pSalt = nil
        #expect(decode(CKM_HKDF_DERIVE, g) == CKR_MECHANISM_PARAM_INVALID)
        g = good; g.ulInfoLen = 5
        #expect(decode(CKM_HKDF_DERIVE, g) == CKR_MECHANISM_PARAM_INVALID)
        g = good; g.bExpand = 2
        #expect(decode(CKM_HKDF_DERIVE, g) == CKR_MECHANISM_PARAM_INVALID)
        #expect(decode(CKM_HKDF_DERIVE, CK_ULONG(1)) == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv { _ = try Mechanism(type: CKM_HKDF_DERIVE, parameter: nil) } == CKR_MECHANISM_PARAM_INVALID)
        for n: CK_ULONG in [0, 33] { #expect(decode(CKM_SHA256_HMAC_GENERAL, n) == CKR_MECHANISM_PARAM_INVALID) }
        #expect(decode(CKM_SHA3_512_HMAC_GENERAL, CK_ULONG(64)) == CKR_OK)
        #expect(decode(CKM_SHA3_256, CK_ULONG(1)) == CKR_MECHANISM_PARAM_INVALID)

        // SP 800-108.
        var fmt = CK_SP800_108_COUNTER_FORMAT(bLittleEndian: 0, ulWidthInBits: 16)
        var label: [UInt8] = [0x4c]
        withUnsafeMutableBytes(of: &fmt) { f in
            label.withUnsafeMutableBytes { l in
                var params = [CK_PRF_DATA_PARAM(type: CK_ULONG(CK_SP800_108_ITERATION_VARIABLE), pValue: f.baseAddress,
                                                ulValueLen: CK_ULONG(f.count)),
                              CK_PRF_DATA_PARAM(type: CK_ULONG(CK_SP800_108_BYTE_ARRAY), pValue: l.baseAddress, ulValueLen: 1)]
                params.withUnsafeMutableBufferPointer { pp in
                    let ok = CK_SP800_108_KDF_PARAMS(prfType: CKM_SHA256_HMAC, ulNumberOfDataParams: 2,
                                                     pDataParams: pp.baseAddress, ulAdditionalDerivedKeys: 0,
                                                     pAdditionalDerivedKeys: nil)
                    #expect(decode(CKM_SP800_108_COUNTER_KDF, ok) == CKR_OK)
                    var p = ok
                    p.prfType = CKM_SHA256
                    #expect(decode(CKM_SP800_108_COUNTER_KDF, p) == CKR_MECHANISM_PARAM_INVALID)
                    p = ok; p.ulNumberOfDataParams = 0
                    #expect(decode(CKM_SP800_108_COUNTER_KDF, p) == CKR_MECHANISM_PARAM_INVALID)
                    p = ok; p.pDataParams = nil
                    #expect(decode(CKM_SP800_108_COUNTER_KDF, p) == CKR_MECHANISM_PARAM_INVALID)
                    p = ok; p.ulAdditionalDerivedKeys = 1
                    #expect(decode(CKM_SP800_108_COUNTER_KDF, p) == CKR_MECHANISM_PARAM_INVALID)
                    p = ok; p.ulNumberOfDataParams = 1_000_000
                    #expect(decode(CKM_SP800_108_COUNTER_KDF, p) == CKR_MECHANISM_PARAM_INVALID)
                    // The feedback struct is larger: a counter-mode struct is the wrong size for it.
                    #expect(decode(CKM_SP800_108_FEEDBACK_KDF, ok) == CKR_MECHANISM_PARAM_INVALID)
                    pp[0].type = CK_ULONG(CK_SP800_108_COUNTER)
                    #expect(decode(CKM_SP800_108_COUNTER_KDF, ok) == CKR_MECHANISM_PARAM_INVALID)
                    pp[0].type = 5  // CK_SP800_108_KEY_HANDLE (3.1): not offered
                    #expect(decode(CKM_SP800_108_COUNTER_KDF, ok) == CKR_MECHANISM_PARAM_INVALID)
                    pp[0].type = CK_ULONG(CK_SP800_108_ITERATION_VARIABLE)
                    pp[1] = pp[0]
                    #expect(decode(CKM_SP800_108_COUNTER_KDF, ok) == CKR_MECHANISM_PARAM_INVALID, "two iteration variables")
                }
            }
        }
        fmt.ulWidthInBits = 12
        withUnsafeMutableBytes(of: &fmt) { f in
            var params = [CK_PRF_DATA_PARAM(type: CK_ULONG(CK_SP800_108_ITERATION_VARIABLE), pValue: f.baseAddress,
                                            ulValueLen: CK_ULONG(f.count))]
            params.withUnsafeMutableBufferPointer { pp in
                let p = CK_SP800_108_KDF_PARAMS(prfType: CKM_AES_CMAC, ulNumberOfDataParams: 1, pDataParams: pp.baseAddress,
                                                ulAdditionalDerivedKeys: 0, pAdditionalDerivedKeys: nil)
                #expect(decode(CKM_SP800_108_COUNTER_KDF, p) == CKR_MECHANISM_PARAM_INVALID)
            }
        }

        // PBKDF2: the 3.0 layout (a length) and the 2.20 one (a pointer to it) decode alike.
        var password = Array("password".utf8)
        var saltBytes = Array("salt".utf8)
        var pwLen = CK_ULONG(password.count)
        try password.withUnsafeMutableBufferPointer { pw in
            try saltBytes.withUnsafeMutableBytes { sb in
                let p2 = CK_PKCS5_PBKD2_PARAMS2(saltSource: CK_ULONG(CKZ_SALT_SPECIFIED), pSaltSourceData: sb.baseAddress,
                                                ulSaltSourceDataLen: 4, iterations: 2,
                                                prf: CK_ULONG(CKP_PKCS5_PBKD2_HMAC_SHA1), pPrfData: nil, ulPrfDataLen: 0,
                                                pPassword: pw.baseAddress, ulPasswordLen: 8)
                var a = p2
                let m2 = try withUnsafeBytes(of: &a) { try Mechanism(type: CKM_PKCS5_PBKD2, parameter: $0) }
                let m1 = try withUnsafeMutablePointer(to: &pwLen) { lp in
                    var p1 = CK_PKCS5_PBKD2_PARAMS(saltSource: CK_ULONG(CKZ_SALT_SPECIFIED), pSaltSourceData: sb.baseAddress,
                                                   ulSaltSourceDataLen: 4, iterations: 2,
                                                   prf: CK_ULONG(CKP_PKCS5_PBKD2_HMAC_SHA1), pPrfData: nil,
                                                   ulPrfDataLen: 0, pPassword: pw.baseAddress, ulPasswordLen: lp)
                    return try withUnsafeBytes(of: &p1) { try Mechanism(type: CKM_PKCS5_PBKD2, parameter: $0) }
                }
                #expect(m1 == m2)
                #expect(m2 == .pbkdf2(PBKDF2Parameters(prf: .sha1, salt: Array("salt".utf8), iterations: 2,
                                                       password: Array("password".utf8))))
                var b = p2
                b.prf = CK_ULONG(CKP_PKCS5_PBKD2_HMAC_GOSTR3411)
                #expect(decode(CKM_PKCS5_PBKD2, b) == CKR_MECHANISM_PARAM_INVALID)
                b = p2; b.pPrfData = sb.baseAddress; b.ulPrfDataLen = 1
                #expect(decode(CKM_PKCS5_PBKD2, b) == CKR_MECHANISM_PARAM_INVALID)
                b = p2; b.iterations = 0
                #expect(decode(CKM_PKCS5_PBKD2, b) == CKR_MECHANISM_PARAM_INVALID)
                b = p2; b.saltSource = 2
                #expect(decode(CKM_PKCS5_PBKD2, b) == CKR_MECHANISM_PARAM_INVALID)
                b = p2; b.pPassword = nil
                #expect(decode(CKM_PKCS5_PBKD2, b) == CKR_MECHANISM_PARAM_INVALID)
                b = p2; b.ulSaltSourceDataLen = 0
                #expect(decode(CKM_PKCS5_PBKD2, b) == CKR_MECHANISM_PARAM_INVALID)
            }
        }
        // Simple derivations.
        var data: [UInt8] = [1]
        data.withUnsafeMutableBufferPointer { d in
            let sd = CK_KEY_DERIVATION_STRING_DATA(pData: d.baseAddress, ulLen: 1)
            #expect(decode(CKM_XOR_BASE_AND_DATA, sd) == CKR_OK)
            #expect(decode(CKM_XOR_BASE_AND_DATA, CK_KEY_DERIVATION_STRING_DATA(pData: nil, ulLen: 1)) == CKR_MECHANISM_PARAM_INVALID)
            #expect(decode(CKM_CONCATENATE_BASE_AND_DATA, CK_KEY_DERIVATION_STRING_DATA(pData: d.baseAddress, ulLen: 0))
                    == CKR_MECHANISM_PARAM_INVALID)
        }
        #expect(decode(CKM_CONCATENATE_BASE_AND_KEY, UInt32(1)) == CKR_MECHANISM_PARAM_INVALID)
        #expect(decode(CKM_EXTRACT_KEY_FROM_KEY, CK_ULONG(21)) == CKR_OK)
    }
}
