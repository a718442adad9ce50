import CPKCS11
import Keychain

/// One template entry as the caller gave it: order and duplicates are kept,
/// because a duplicated type is a template error a dictionary would hide.
public struct Attribute: Sendable, Equatable {
    public var type: CK_ATTRIBUTE_TYPE
    public var value: [UInt8]
    public init(_ type: CK_ATTRIBUTE_TYPE, _ value: [UInt8]) {
        self.type = type
        self.value = value
    }
    public static func bool(_ type: CK_ATTRIBUTE_TYPE, _ v: Bool) -> Attribute { Attribute(type, AttributeCoding.bool(v)) }
    public static func ulong(_ type: CK_ATTRIBUTE_TYPE, _ v: CK_ULONG) -> Attribute { Attribute(type, AttributeCoding.ulong(v)) }
}

public typealias Template = [Attribute]

extension Array where Element == Attribute {
    /// The template as a map; a type given twice with different values is
    /// inconsistent (the spec leaves it to the token; silently picking one
    /// would surprise the caller).
    public func map() throws -> AttributeMap {
        var out = AttributeMap()
        for a in self {
            if let old = out[a.type], old != a.value { throw PKCS11Error.templateInconsistent }
            out[a.type] = a.value
        }
        return out
    }
}

/// Typed reads of attribute values that reject malformed encodings with
/// CKR_ATTRIBUTE_VALUE_INVALID instead of guessing.
extension Dictionary where Key == AttributeType, Value == [UInt8] {
    public func checkedBool(_ type: AttributeType) throws -> Bool? {
        guard let v = self[type] else { return nil }
        guard let b = AttributeCoding.decodeBool(v) else { throw PKCS11Error.attributeValueInvalid }
        return b
    }
    public func checkedULong(_ type: AttributeType) throws -> CK_ULONG? {
        guard let v = self[type] else { return nil }
        guard let u = AttributeCoding.decodeULong(v) else { throw PKCS11Error.attributeValueInvalid }
        return u
    }
}

/// What C_GetAttributeValue found for one requested type, before the
/// caller's buffer is considered.
public enum AttributeLookup: Sendable, Equatable {
    case value([UInt8])
    /// An attribute whose value is a template (TemplateAttributes.swift).
    case template(Template)
    case sensitive
    case typeInvalid
}

/// The buffer rules of C_GetAttributeValue, kept here (not in the C layer) so
/// they are unit-tested: every entry is processed, each gets its own length,
/// and the call returns the most significant of the per-entry errors.
public enum AttributeFill {
    public enum Entry: Sendable, Equatable {
        /// Copy these bytes (the buffer is large enough).
        case copy([UInt8])
        /// Report only this length (the buffer pointer was NULL).
        case length(CK_ULONG)
        /// Set ulValueLen to CK_UNAVAILABLE_INFORMATION.
        case unavailable
        /// An array attribute with room for all its entries: set the outer
        /// ulValueLen to this length and each inner (type, entry) in order.
        case nested(CK_ULONG, [(CK_ATTRIBUTE_TYPE, Entry)])

        public static func == (a: Entry, b: Entry) -> Bool {
            switch (a, b) {
            case (.copy(let x), .copy(let y)): return x == y
            case (.length(let x), .length(let y)): return x == y
            case (.unavailable, .unavailable): return true
            case (.nested(let n, let x), .nested(let m, let y)):
                return n == m && x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
            default: return false
            }
        }
    }

    /// sizeof(CK_ATTRIBUTE): an array attribute's length is its count times this.
    public static let attributeSize = CK_ULONG(MemoryLayout<CK_ATTRIBUTE>.stride)

    /// One inner attribute of an array attribute whose buffer was large
    /// enough: the same rules 3-5 as an outer one (§5.7.5: "If the pValue of
    /// elements within the array is NULL_PTR then the ulValueLen of elements
    /// within the array will be set to the required length ... If any
    /// ulValueLen within the array isn't large enough, it will be set to
    /// CK_UNAVAILABLE_INFORMATION and the function will return
    /// CKR_BUFFER_TOO_SMALL").
    static func inner(_ bytes: [UInt8], capacity: CK_ULONG?) -> (Entry, tooSmall: Bool) {
        guard let capacity else { return (.length(CK_ULONG(bytes.count)), false) }
        return capacity >= CK_ULONG(bytes.count) ? (.copy(bytes), false) : (.unavailable, true)
    }

    /// - Parameter capacities: each entry's buffer size, nil when pValue was NULL.
    /// - Parameter innerCapacities: for entry `index` whose value is a
    ///   template of `count` attributes and whose buffer holds that many
    ///   CK_ATTRIBUTEs, each inner buffer's size (nil for a NULL pValue).
    ///   Called only then, so the caller's array is read only where the
    ///   spec says it holds that many entries.
    public static func evaluate(_ lookups: [AttributeLookup], capacities: [CK_ULONG?],
                                innerCapacities: (_ index: Int, _ count: Int) -> [CK_ULONG?] = { _, n in
                                    [CK_ULONG?](repeating: nil, count: n)
                                }) -> (entries: [Entry], rv: CK_RV) {
        var entries: [Entry] = []
        entries.reserveCapacity(lookups.count)
        var sensitive = false, invalid = false, tooSmall = false
        for (index, (lookup, capacity)) in zip(lookups, capacities).enumerated() {
            switch lookup {
            case .template(let t):
                let length = CK_ULONG(t.count) * attributeSize
                guard let capacity else {
                    entries.append(.length(length))
                    continue
                }
                guard capacity >= length else {
                    tooSmall = true
                    entries.append(.unavailable)
                    continue
                }
                let caps = innerCapacities(index, t.count)
                var inner: [(CK_ATTRIBUTE_TYPE, Entry)] = []
                for (k, a) in t.enumerated() {
                    let (e, small) = Self.inner(a.value, capacity: k < caps.count ? caps[k] : nil)
                    if small { tooSmall = true }
                    inner.append((a.type, e))
                }
                entries.append(.nested(length, inner))
            case .sensitive:
                sensitive = true
                entries.append(.unavailable)
            case .typeInvalid:
                invalid = true
                entries.append(.unavailable)
            case .value(let bytes):
                if let capacity {
                    if capacity >= CK_ULONG(bytes.count) {
                        entries.append(.copy(bytes))
                    } else {
                        tooSmall = true
                        entries.append(.unavailable)
                    }
                } else {
                    entries.append(.length(CK_ULONG(bytes.count)))
                }
            }
        }
        let rv: CK_RV = sensitive ? CKR_ATTRIBUTE_SENSITIVE
            : invalid ? CKR_ATTRIBUTE_TYPE_INVALID
            : tooSmall ? CKR_BUFFER_TOO_SMALL : CKR_OK
        return (entries, rv)
    }
}

/// Blank-padded fixed-width fields of CK_INFO / CK_SLOT_INFO / CK_TOKEN_INFO.
/// Truncates on a UTF-8 character boundary so a label never ends mid-character.
public func padded(_ s: String, _ width: Int) -> [UInt8] {
    var out: [UInt8] = []
    for scalar in s.unicodeScalars {
        let enc = Array(String(scalar).utf8)
        if out.count + enc.count > width { break }
        out += enc
    }
    return out + [UInt8](repeating: 0x20, count: width - out.count)
}

/// Reverse of `padded`: a label from a 32-byte blank-padded field.
public func unpadded(_ bytes: [UInt8]) -> String {
    var end = bytes.count
    while end > 0, bytes[end - 1] == 0x20 || bytes[end - 1] == 0 { end -= 1 }
    return String(decoding: bytes[..<end], as: UTF8.self)
}
