/// CK_ATTRIBUTE_TYPE numbers; values are the PKCS #11 byte encodings, so the
/// module hands them out unchanged.
public typealias AttributeType = UInt
public typealias AttributeMap = [AttributeType: [UInt8]]

public enum ItemClass: UInt, Sendable, CaseIterable {
    case data = 0, certificate = 1, publicKey = 2, privateKey = 3, secretKey = 4
    /// CKO_VENDOR_DEFINED | 'KP': a keychain generic password.
    case genericPassword = 0x8000_4B50

    /// Whether an item of this class is private when the caller did not say:
    /// PKCS #11 leaves the default to the token, and keys and passwords are
    /// what must not be visible before login.
    var privateByDefault: Bool {
        switch self {
        case .privateKey, .secretKey, .genericPassword: true
        default: false
        }
    }
}

public enum MatchLimit: Sendable, Equatable { case one, all }

/// The SecItemCopyMatching-style query. `attributes` match exactly (byte
/// equality), every one of them.
public struct ItemQuery: Sendable {
    public var tokenID: TokenID?
    public var itemClass: ItemClass?
    public var attributes: AttributeMap
    public var reference: PersistentReference?
    public var limit: MatchLimit
    /// Items of removed tokens stay in the store but are hidden, so a stale
    /// persistent reference never yields them; a few callers (cleanup) need them.
    public var includeAbsentTokens: Bool
    /// Only items of these access groups; nil: every group. A consumer bound
    /// to groups (the module: `KeychainStore.processAccessGroups`) sets it on
    /// every query, so other groups' items are absent for it.
    public var accessGroups: Set<String>? = nil

    public init(tokenID: TokenID? = nil, itemClass: ItemClass? = nil, attributes: AttributeMap = [:],
                reference: PersistentReference? = nil, limit: MatchLimit = .all, includeAbsentTokens: Bool = false) {
        self.tokenID = tokenID
        self.itemClass = itemClass
        self.attributes = attributes
        self.reference = reference
        self.limit = limit
        self.includeAbsentTokens = includeAbsentTokens
    }
}

public struct Item: Sendable {
    public var reference: PersistentReference
    public var tokenID: TokenID
    public var itemClass: ItemClass
    public var isPrivate: Bool
    /// Secret attributes are present only when the caller supplied the token's key.
    public var attributes: AttributeMap
    /// Unix seconds.
    public var created: Int64
    public var modified: Int64
    /// True when secret attributes exist but were left out for want of a key.
    public var secretsWithheld: Bool

    public subscript(_ type: AttributeType) -> [UInt8]? { attributes[type] }

    /// A chain certificate kept apart from the token's objects (CKA.keyshareChainOnly).
    public var isChainOnly: Bool { attributes.bool(CKA.keyshareChainOnly) == true }
}

/// PKCS #11 value encodings shared by the store (which reads CKA_PRIVATE) and
/// every writer, so the module and the CLI produce byte-identical objects.
public enum AttributeCoding {
    /// CK_ULONG: native unsigned long, 8 bytes little-endian on this platform. Values under 64
    /// (classes, the common key types, key lengths, CKM_ML_KEM) are shared immutable arrays, as
    /// `bool`'s are.
    public static func ulong(_ v: UInt) -> [UInt8] {
        v < UInt(smallULongs.count) ? smallULongs[Int(v)] : withUnsafeBytes(of: v.littleEndian) { Array($0) }
    }

    /// CK_BBOOL: one byte. The two values are shared arrays (copy-on-write, so a caller that
    /// changes one changes its own copy): every new key object holds a dozen flags, and a fresh
    /// one-byte array each was a heap allocation each (docs/benchmarks.md, "Module work per KEM
    /// call").
    public static func bool(_ v: Bool) -> [UInt8] { v ? trueBytes : falseBytes }

    private static let trueBytes: [UInt8] = [1]
    private static let falseBytes: [UInt8] = [0]
    private static let smallULongs: [[UInt8]] = (0..<64).map { withUnsafeBytes(of: UInt($0).littleEndian) { Array($0) } }

    public static func string(_ s: String) -> [UInt8] { Array(s.utf8) }

    public static func decodeULong(_ b: [UInt8]) -> UInt? {
        guard b.count == MemoryLayout<UInt>.size else { return nil }
        var v: UInt = 0
        for (i, byte) in b.enumerated() { v |= UInt(byte) << UInt(8 * i) }
        return v
    }

    public static func decodeBool(_ b: [UInt8]) -> Bool? {
        guard b.count == 1 else { return nil }
        return b[0] != 0
    }
}

extension Dictionary where Key == AttributeType, Value == [UInt8] {
    public func bool(_ type: AttributeType) -> Bool? { self[type].flatMap(AttributeCoding.decodeBool) }
    public func ulong(_ type: AttributeType) -> UInt? { self[type].flatMap(AttributeCoding.decodeULong) }
    public func string(_ type: AttributeType) -> String? { self[type].map { String(decoding: $0, as: UTF8.self) } }
}
