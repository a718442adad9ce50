import CPKCS11
import Keychain
@testable import PKCS11
import Testing

/// CKA_WRAP_TEMPLATE, CKA_UNWRAP_TEMPLATE, CKA_DERIVE_TEMPLATE
/// (TemplateAttributes.swift). Every expectation is a sentence of PKCS #11
/// 3.0: the key tables (public keys have CKA_WRAP_TEMPLATE, private keys
/// CKA_UNWRAP_TEMPLATE and CKA_DERIVE_TEMPLATE, secret keys all three);
/// §5.7.5 for array attributes ("If the pValue of elements within the array
/// is NULL_PTR then the ulValueLen of elements within the array will be set
/// to the required length ... If any ulValueLen within the array isn't
/// large enough, it will be set to CK_UNAVAILABLE_INFORMATION and the
/// function will return CKR_BUFFER_TOO_SMALL"); §5.18.4 (keys that do not
/// match CKA_WRAP_TEMPLATE cannot be wrapped); §5.18.5 / §5.18.6 ("If any
/// attribute conflict occurs ... CKR_TEMPLATE_INCONSISTENT").
struct TemplateAttributeTests {
    static let value16 = Array("0123456789abcdef".utf8)
    static let wrapOnly: Template = [.ulong(CKA_CLASS, CKO_SECRET_KEY), Attribute(CKA_ID, Array("wrap-ok".utf8))]

    func tpl(_ type: CK_ATTRIBUTE_TYPE, _ t: Template) -> Attribute { Attribute(type, TemplateAttributes.encode(t)) }

    func secretKey(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ extra: [Attribute]) throws -> CK_OBJECT_HANDLE {
        try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), Attribute(CKA_VALUE, Self.value16),
            .bool(CKA_EXTRACTABLE, true), .bool(CKA_SENSITIVE, false)] + extra)
    }

    func kek(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ extra: [Attribute]) throws -> CK_OBJECT_HANDLE {
        try f.rt.generateKey(session: s, mechanism: try Mechanism(type: CKM_AES_KEY_GEN, parameter: nil), template: [
            .ulong(CKA_VALUE_LEN, 32), .bool(CKA_WRAP, true), .bool(CKA_UNWRAP, true), .bool(CKA_ENCRYPT, false),
            .bool(CKA_DECRYPT, false)] + extra)
    }

    @Test func encodingRoundTripsAndRefusesTruncation() throws {
        let t: Template = [.ulong(CKA_CLASS, CKO_SECRET_KEY), Attribute(CKA_ID, Array("wrap-ok".utf8)), Attribute(CKA_LABEL, [])]
        let b = TemplateAttributes.encode(t)
        #expect(TemplateAttributes.decode(b) == t)
        #expect(TemplateAttributes.decode([]) == [])
        #expect(TemplateAttributes.decode(Array(b.dropLast())) == nil)
        #expect(TemplateAttributes.decode(Array(b.prefix(11))) == nil)
        // What an old store kept for these types (a CK_ATTRIBUTE array: type, pointer, length) is no encoding.
        #expect(TemplateAttributes.decode([1, 0, 0, 0, 0, 0, 0, 0] + [UInt8](repeating: 0x7f, count: 16)) == nil)
        #expect(Array(b.prefix(4)) == Array("KST1".utf8))
    }

    @Test func getAttributeValueFollowsTheArrayRules() {
        let t: Template = [.ulong(CKA_CLASS, CKO_SECRET_KEY), Attribute(CKA_ID, Array("wrap-ok".utf8))]
        let size = AttributeFill.attributeSize
        // pValue NULL: count x sizeof(CK_ATTRIBUTE).
        var r = AttributeFill.evaluate([.template(t)], capacities: [nil])
        #expect(r.rv == CKR_OK && r.entries == [.length(2 * size)])
        // Room for one of two entries: too small, unavailable.
        r = AttributeFill.evaluate([.template(t)], capacities: [size])
        #expect(r.rv == CKR_BUFFER_TOO_SMALL && r.entries == [.unavailable])
        // Room for all, inner pValue NULL: their lengths.
        r = AttributeFill.evaluate([.template(t)], capacities: [3 * size]) { _, n in [CK_ULONG?](repeating: nil, count: n) }
        #expect(r.rv == CKR_OK && r.entries == [.nested(2 * size, [(CKA_CLASS, .length(8)), (CKA_ID, .length(7))])])
        // One inner buffer too small: that one unavailable, the other copied, CKR_BUFFER_TOO_SMALL.
        r = AttributeFill.evaluate([.template(t)], capacities: [2 * size]) { _, _ in [8, 3] }
        #expect(r.rv == CKR_BUFFER_TOO_SMALL)
        #expect(r.entries == [.nested(2 * size, [(CKA_CLASS, .copy(ulong(CKO_SECRET_KEY))), (CKA_ID, .unavailable)])])
        // An empty template: length 0, and a buffer of any size is enough.
        r = AttributeFill.evaluate([.template([])], capacities: [0])
        #expect(r.rv == CKR_OK && r.entries == [.nested(0, [])])
    }

    @Test func embeddedChecksTheCallersArray() throws {
        let size = Int(AttributeFill.attributeSize)
        var id = Array("ab".utf8), flag: UInt8 = 1, wide: CK_ULONG = 1
        try id.withUnsafeMutableBytes { idp in
            try withUnsafeMutableBytes(of: &flag) { fp in
                try withUnsafeMutableBytes(of: &wide) { wp in
                    var ok = [CK_ATTRIBUTE(type: CKA_ID, pValue: idp.baseAddress, ulValueLen: 2),
                              CK_ATTRIBUTE(type: CKA_TOKEN, pValue: fp.baseAddress, ulValueLen: 1)]
                    let b = try ok.withUnsafeMutableBytes { try TemplateAttributes.embedded($0.baseAddress!, CK_ULONG(2 * size)) }
                    #expect(TemplateAttributes.decode(b) == [Attribute(CKA_ID, Array("ab".utf8)), .bool(CKA_TOKEN, true)])
                    // Not a whole number of CK_ATTRIBUTEs.
                    #expect(rv { _ = try ok.withUnsafeMutableBytes { try TemplateAttributes.embedded($0.baseAddress!, CK_ULONG(size + 1)) } }
                            == CKR_ATTRIBUTE_VALUE_INVALID)
                    // A template inside, a CK_BBOOL of 8 bytes, an inner NULL with a length, an unknown type.
                    let bad: [CK_ATTRIBUTE] = [
                        CK_ATTRIBUTE(type: KS_CKA_UNWRAP_TEMPLATE, pValue: idp.baseAddress, ulValueLen: 0),
                        CK_ATTRIBUTE(type: CKA_EXTRACTABLE, pValue: wp.baseAddress, ulValueLen: 8),
                        CK_ATTRIBUTE(type: CKA_ID, pValue: nil, ulValueLen: 4),
                        CK_ATTRIBUTE(type: 0x7fff_f123, pValue: idp.baseAddress, ulValueLen: 1),
                    ]
                    for a in bad {
                        var one = [a]
                        #expect(rv { _ = try one.withUnsafeMutableBytes { try TemplateAttributes.embedded($0.baseAddress!, CK_ULONG(size)) } }
                                == CKR_ATTRIBUTE_VALUE_INVALID)
                    }
                }
            }
        }
    }

    @Test func storedWhereTheClassTablesPutThemAndReadOnly() throws {
        let (f, s) = try loggedIn()
        let w = try kek(f, s, [tpl(KS_CKA_WRAP_TEMPLATE, Self.wrapOnly), tpl(KS_CKA_UNWRAP_TEMPLATE, [Attribute(CKA_LABEL, Array("u".utf8))])])
        let got = try f.rt.getAttributeValue(session: s, object: w, types: [KS_CKA_WRAP_TEMPLATE, KS_CKA_DERIVE_TEMPLATE])
        #expect(got == [.template(Self.wrapOnly), .template([])])
        // A data object has none of them.
        #expect(rv { _ = try f.rt.createObject(session: s, template: [.ulong(CKA_CLASS, CKO_DATA), tpl(KS_CKA_WRAP_TEMPLATE, [])]) }
                == CKR_ATTRIBUTE_TYPE_INVALID)
        // No footnote 8: fixed once the key exists.
        #expect(rv { try f.rt.setAttributeValue(session: s, object: w, template: [tpl(KS_CKA_WRAP_TEMPLATE, [])]) }
                == CKR_ATTRIBUTE_READ_ONLY)
        #expect(rv { _ = try f.rt.copyObject(session: s, object: w, template: [tpl(KS_CKA_WRAP_TEMPLATE, [])]) }
                == CKR_ATTRIBUTE_READ_ONLY)
        // A search naming one finds nothing (SoftHSM2's answer).
        try f.rt.findObjectsInit(session: s, template: [tpl(KS_CKA_WRAP_TEMPLATE, Self.wrapOnly)])
        #expect(try f.rt.findObjects(session: s, max: 10).isEmpty)
        try f.rt.findObjectsFinal(session: s)
    }

    @Test func wrapRequiresAMatchUnwrapMerges() throws {
        let (f, s) = try loggedIn()
        let w = try kek(f, s, [tpl(KS_CKA_WRAP_TEMPLATE, Self.wrapOnly), tpl(KS_CKA_UNWRAP_TEMPLATE, [Attribute(CKA_LABEL, Array("from-W".utf8))])])
        let ok = try secretKey(f, s, [Attribute(CKA_ID, Array("wrap-ok".utf8))])
        let other = try secretKey(f, s, [Attribute(CKA_ID, Array("other".utf8))])
        let m = try Mechanism(type: CKM_AES_KEY_WRAP, parameter: nil)
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: m, wrappingKey: w, key: other, capacity: 64) } == CKR_KEY_NOT_WRAPPABLE)
        guard case .bytes(let blob) = try f.rt.wrapKey(session: s, mechanism: m, wrappingKey: w, key: ok, capacity: 64) else {
            Issue.record("no wrapped key"); return
        }
        let base: Template = [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES)]
        let u = try f.rt.unwrapKey(session: s, mechanism: m, unwrappingKey: w, wrapped: blob, template: base)
        #expect(try f.rt.getAttributeValue(session: s, object: u, types: [CKA_LABEL]) == [.value(Array("from-W".utf8))])
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: m, unwrappingKey: w, wrapped: blob,
                                            template: base + [Attribute(CKA_LABEL, Array("mine".utf8))]) } == CKR_TEMPLATE_INCONSISTENT)
        // The merged template meets the separation rules: no readable key under a key that also wraps.
        let loose = try kek(f, s, [tpl(KS_CKA_UNWRAP_TEMPLATE, [.bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)])])
        guard case .bytes(let blob2) = try f.rt.wrapKey(session: s, mechanism: m, wrappingKey: loose, key: ok, capacity: 64) else {
            Issue.record("no wrapped key"); return
        }
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: m, unwrappingKey: loose, wrapped: blob2, template: base) }
                == CKR_TEMPLATE_INCONSISTENT)
    }

    @Test func deriveMerges() throws {
        let (f, s) = try loggedIn()
        let base = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET), Attribute(CKA_VALUE, Self.value16),
            .bool(CKA_DERIVE, true), tpl(KS_CKA_DERIVE_TEMPLATE, [Attribute(CKA_LABEL, Array("derived".utf8))])])
        let m = Mechanism.simpleDerive(.xorBaseAndData(Array(repeating: 0x5a, count: 16)))
        let t: Template = [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET)]
        let k = try f.rt.deriveKey(session: s, mechanism: m, baseKey: base, template: t)
        #expect(try f.rt.getAttributeValue(session: s, object: k, types: [CKA_LABEL]) == [.value(Array("derived".utf8))])
        #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: m, baseKey: base,
                                            template: t + [Attribute(CKA_LABEL, Array("x".utf8))]) } == CKR_TEMPLATE_INCONSISTENT)
    }
}
