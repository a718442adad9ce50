import CPKCS11
import Keychain

/// CKA_WRAP_TEMPLATE, CKA_UNWRAP_TEMPLATE and CKA_DERIVE_TEMPLATE: attributes
/// whose value is itself a template (PKCS #11 3.0 §4.7-4.9 key tables, §5.18
/// C_WrapKey / C_UnwrapKey / C_DeriveKey; docs/pkcs11-conformance.md
/// "Template attributes (wrap, unwrap, derive)").
///
/// A caller hands such a value as an array of CK_ATTRIBUTE whose pointers
/// mean nothing once the call returns, so the C layer (PKCS11Module
/// Support.swift `template`) turns it into the self-contained encoding below
/// before the Swift layers see it; from there on it is an ordinary byte
/// string in the attribute map, stored in the keychain like any other
/// attribute and compared byte for byte. C_GetAttributeValue decodes it again
/// (§5.7.5's rules for array attributes, `AttributeFill.evaluate`).
///
/// Encoding: "KST1", then per entry, in the caller's order, the type (8
/// bytes, little endian), the value's length (4 bytes, little endian), the
/// value. An empty byte string is the empty template, the default a key of a
/// class that has the attribute reports (as SoftHSM2 does). The prefix tells
/// this encoding from what a module before the type checks stored for these
/// types (the caller's array of pointers, kept as bytes and never enforced):
/// such a value reads, and acts, as the empty template.
public enum TemplateAttributes {
    /// The array-of-attribute types this module implements: the three of
    /// 3.0 and PKCS #11 3.2's CKA_ENCAPSULATE_TEMPLATE (public keys) and
    /// CKA_DECAPSULATE_TEMPLATE (private keys), CK_ATTRIBUTE_PTR values like
    /// the others although the 3.2 header gives them no CKF_ARRAY_ATTRIBUTE
    /// bit. Not CKA_ALLOWED_MECHANISMS, which has CKF_ARRAY_ATTRIBUTE too but
    /// holds mechanism types.
    public static let types: Set<CK_ATTRIBUTE_TYPE> = [KS_CKA_WRAP_TEMPLATE, KS_CKA_UNWRAP_TEMPLATE, KS_CKA_DERIVE_TEMPLATE,
                                                      CK_ATTRIBUTE_TYPE(CKA_ENCAPSULATE_TEMPLATE),
                                                      CK_ATTRIBUTE_TYPE(CKA_DECAPSULATE_TEMPLATE)]

    /// Whether `type` is a KEM template a key of this class and type has
    /// (ML-KEM, the one KEM key type here): the empty template when none
    /// was set, as the other template types read.
    static func isKEMTemplate(_ type: CK_ATTRIBUTE_TYPE, of view: ObjectView) -> Bool {
        guard view.keyType == CKK_ML_KEM else { return false }
        return view.objectClass == CKO_PUBLIC_KEY ? type == CKA_ENCAPSULATE_TEMPLATE
            : view.objectClass == CKO_PRIVATE_KEY && type == CKA_DECAPSULATE_TEMPLATE
    }

    /// At most this many attributes in one embedded template: the spec sets
    /// no bound; a template that restricts a key names a handful (the agent
    /// protocol has the same bound, Sources/AgentProtocol/template_params.c).
    public static let maxEntries = 64
    /// At most this many bytes in one embedded attribute's value (a label,
    /// an ID, EC parameters: all far below).
    public static let maxValueLength = 4096

    public static func isTemplateType(_ type: CK_ATTRIBUTE_TYPE) -> Bool { types.contains(type) }

    /// A caller's array-of-attributes value (pValue, ulValueLen) read while
    /// it is valid, checked, and encoded. ulValueLen must be a whole number
    /// of CK_ATTRIBUTEs (SoftHSM2's check); an inner value with a length
    /// and no pointer, an inner template, or more than `maxEntries` entries
    /// is CKR_ATTRIBUTE_VALUE_INVALID (the outer value is what is wrong).
    public static func embedded(_ p: UnsafeMutableRawPointer, _ length: CK_ULONG) throws -> [UInt8] {
        let size = AttributeFill.attributeSize
        guard length % size == 0, length / size <= CK_ULONG(maxEntries) else { throw PKCS11Error.attributeValueInvalid }
        let count = Int(length / size)
        let array = p.assumingMemoryBound(to: CK_ATTRIBUTE.self)
        var t: Template = []
        for i in 0..<count {
            let a = array[i]
            guard !isTemplateType(a.type) else { throw PKCS11Error.attributeValueInvalid }
            guard a.ulValueLen <= CK_ULONG(maxValueLength) else { throw PKCS11Error.attributeValueInvalid }
            if a.ulValueLen == 0 {
                t.append(Attribute(a.type, []))
                continue
            }
            guard let v = a.pValue else { throw PKCS11Error.attributeValueInvalid }
            t.append(Attribute(a.type, Array(UnsafeRawBufferPointer(start: v, count: Int(a.ulValueLen)))))
        }
        try check(t)
        return encode(t)
    }

    static let magic: [UInt8] = Array("KST1".utf8)

    public static func encode(_ t: Template) -> [UInt8] {
        if t.isEmpty { return [] }
        var out = magic
        for a in t {
            withUnsafeBytes(of: UInt64(a.type).littleEndian) { out += $0 }
            withUnsafeBytes(of: UInt32(a.value.count).littleEndian) { out += $0 }
            out += a.value
        }
        return out
    }

    /// The template an encoding holds, nil when the bytes are not one.
    public static func decode(_ b: [UInt8]) -> Template? {
        var out: Template = []
        if b.isEmpty { return out }
        guard b.count > magic.count, Array(b.prefix(magic.count)) == magic else { return nil }
        var i = magic.count
        while i < b.count {
            guard b.count - i >= 12, out.count < maxEntries else { return nil }
            var type: UInt64 = 0, len: UInt32 = 0
            for k in 0..<8 { type |= UInt64(b[i + k]) << (8 * UInt64(k)) }
            for k in 0..<4 { len |= UInt32(b[i + 8 + k]) << (8 * UInt32(k)) }
            i += 12
            guard Int(len) <= b.count - i else { return nil }
            out.append(Attribute(CK_ATTRIBUTE_TYPE(type), Array(b[i..<i + Int(len)])))
            i += Int(len)
        }
        return out
    }

    /// Every attribute type some object of this module has: an embedded
    /// template may name only those (it is compared with, or merged into,
    /// a key's attributes).
    static let knownTypes: Set<CK_ATTRIBUTE_TYPE> = {
        var s = AttributeSchema.common.union(AttributeSchema.key).union(AttributeSchema.publicKey)
            .union(AttributeSchema.privateKey).union(AttributeSchema.secretKey).union(AttributeSchema.data)
            .union(AttributeSchema.certificate)
        for (cls, kt) in [(CKO_PUBLIC_KEY, CKK_RSA), (CKO_PRIVATE_KEY, CKK_RSA), (CKO_PUBLIC_KEY, CKK_EC),
                          (CKO_PRIVATE_KEY, CKK_EC), (CKO_SECRET_KEY, CKK_AES),
                          (CKO_PUBLIC_KEY, CKK_ML_KEM), (CKO_PRIVATE_KEY, CKK_ML_KEM)] {
            s.formUnion(AttributeSchema.keyTypePart(cls, kt) ?? [])
        }
        return s.subtracting(types)
    }()

    /// The checks on an embedded template, before it is encoded: no template
    /// inside a template, only attribute types the module knows (never the
    /// module's internal ones), booleans of one byte and the CK_ULONG-valued
    /// types of sizeof(CK_ULONG), no type twice with different values. Each
    /// failure is CKR_ATTRIBUTE_VALUE_INVALID: the outer attribute's value is
    /// what is wrong (SoftHSM2's P11AttrWrapTemplate answers the same for a
    /// nested template and for a boolean or CK_ULONG of the wrong size).
    public static func check(_ t: Template) throws {
        guard t.count <= maxEntries else { throw PKCS11Error.attributeValueInvalid }
        var seen: [CK_ATTRIBUTE_TYPE: [UInt8]] = [:]
        for a in t {
            guard knownTypes.contains(a.type), !ObjectRules.hidden.contains(a.type),
                  a.value.count <= maxValueLength else { throw PKCS11Error.attributeValueInvalid }
            if ObjectRules.booleans.contains(a.type), AttributeCoding.decodeBool(a.value) == nil {
                throw PKCS11Error.attributeValueInvalid
            }
            if ulongTypes.contains(a.type), AttributeCoding.decodeULong(a.value) == nil {
                throw PKCS11Error.attributeValueInvalid
            }
            if let old = seen[a.type], old != a.value { throw PKCS11Error.attributeValueInvalid }
            seen[a.type] = a.value
        }
    }

    static let ulongTypes: Set<CK_ATTRIBUTE_TYPE> = [
        CKA_CLASS, CKA_KEY_TYPE, CKA_CERTIFICATE_TYPE, CKA_CERTIFICATE_CATEGORY, CKA_JAVA_MIDP_SECURITY_DOMAIN,
        CKA_NAME_HASH_ALGORITHM, CKA_KEY_GEN_MECHANISM, CKA_MODULUS_BITS, CKA_VALUE_LEN,
    ]

    /// The stored template of `type` on a key, empty when it has none (or
    /// holds an old store's pointer bytes, see the encoding above).
    static func stored(_ view: ObjectView, _ type: CK_ATTRIBUTE_TYPE) -> Template {
        guard let b = view.attributes[type] else { return [] }
        return decode(b) ?? []
    }

    /// C_WrapKey: the key to be wrapped must match every attribute of the
    /// wrapping key's CKA_WRAP_TEMPLATE, by C_FindObjects' rule (byte for
    /// byte, as C_GetAttributeValue would report it; a value it would not
    /// reveal never matches). PKCS #11 3.0 §5.18.4 names
    /// CKR_KEY_HANDLE_INVALID for a mismatch; this module answers
    /// CKR_KEY_NOT_WRAPPABLE as SoftHSM2 does, because the handle is valid
    /// and bindings' tests expect that code.
    static func checkWrap(wrapper: ObjectView, target: ObjectView) throws {
        for a in stored(wrapper, KS_CKA_WRAP_TEMPLATE) {
            guard ObjectRules.lookup(target, a.type) == .value(a.value) else { throw PKCS11Error(CKR_KEY_NOT_WRAPPABLE) }
        }
    }

    /// C_UnwrapKey and C_DeriveKey: the key's CKA_UNWRAP_TEMPLATE or
    /// CKA_DERIVE_TEMPLATE added to the caller's template; a type in both
    /// with different values is CKR_TEMPLATE_INCONSISTENT (§5.18.5, §5.18.6).
    /// The merged template then goes through every check the caller's alone
    /// would (the wrap/decrypt separation included): a stored template can
    /// only narrow what the new key may be.
    static func merge(_ caller: Template, with stored: Template) throws -> Template {
        var out = caller
        for a in stored {
            let given = caller.filter { $0.type == a.type }
            if given.isEmpty {
                out.append(a)
            } else if given.contains(where: { $0.value != a.value }) {
                throw PKCS11Error.templateInconsistent
            }
        }
        return out
    }

    /// C_EncapsulateKey and C_DecapsulateKey (PKCS #11 3.2 §5.18): the KEM
    /// key's CKA_ENCAPSULATE_TEMPLATE / CKA_DECAPSULATE_TEMPLATE added to the
    /// caller's template for the new secret key, as CKA_UNWRAP_TEMPLATE is
    /// at C_UnwrapKey. A type in both with different values: the 3.2 text
    /// names CKR_KEY_HANDLE_INVALID for C_EncapsulateKey ("If any attribute
    /// conflict occurs on an attempt to encapsulate a key then the function
    /// SHALL return CKR_KEY_HANDLE_INVALID") and CKR_TEMPLATE_INCONSISTENT
    /// for C_DecapsulateKey; each answers its own.
    static func mergeKEM(_ caller: Template, key: ObjectView, encapsulate: Bool) throws -> Template {
        let type = CK_ATTRIBUTE_TYPE(encapsulate ? CKA_ENCAPSULATE_TEMPLATE : CKA_DECAPSULATE_TEMPLATE)
        let stored = stored(key, type)
        if stored.isEmpty { return caller }
        do {
            return try merge(caller, with: stored)
        } catch let e as PKCS11Error where e == .templateInconsistent && encapsulate {
            throw PKCS11Error(CKR_KEY_HANDLE_INVALID)
        }
    }
}
