@_exported import Keychain
@_exported import KeyshareCrypto
import Tokens

/// Errors of the KeyShare API. Like the `errSec*` codes, the two a caller
/// branches on most (`itemNotFound`, `duplicateItem`) are distinct cases, and
/// no message ever carries a PIN, a key or decrypted data.
public enum KeyShareError: Error, Equatable, CustomStringConvertible, Sendable {
    /// errSecItemNotFound: nothing matched (or it exists only in another access group).
    case itemNotFound
    /// errSecDuplicateItem: an item with the same primary attributes already exists.
    case duplicateItem
    /// errSecInteractionNotAllowed: the token must be unlocked first.
    case authenticationNeeded(String)
    /// The key's usage flags (CKA_SIGN, CKA_DECRYPT, ...) forbid the operation.
    case operationNotAllowed(String)
    /// The input does not fit the key and padding.
    case messageTooLong(String)
    /// The ciphertext does not decrypt: wrong padding, wrong key or altered data.
    case decryptionFailed(String)
    /// The key type cannot do this (an EC key asked to encrypt, PSS on Ed25519).
    case unsupported(String)
    case invalidParameter(String)
    /// The caller is not bound to the access group the item or file belongs to.
    case notInAccessGroup(String)
    /// A file given to `unwrap` does not start with the wrapped-file header.
    case notWrapped
    /// A wrapped file failed authentication: tampered, truncated or extended.
    case wrappedFileDamaged(String)

    public var description: String {
        switch self {
        case .itemNotFound: "item not found"
        case .duplicateItem: "the item already exists (duplicate item)"
        case .authenticationNeeded(let m): "the token must be unlocked: \(m)"
        case .operationNotAllowed(let m): "operation not allowed: \(m)"
        case .messageTooLong(let m): "message too long: \(m)"
        case .decryptionFailed(let m): "decryption failed: \(m)"
        case .unsupported(let m): "unsupported: \(m)"
        case .invalidParameter(let m): "invalid parameter: \(m)"
        case .notInAccessGroup(let g): "not a member of access group \(g)"
        case .notWrapped: "not wrapped: use as is"
        case .wrappedFileDamaged(let m): "the wrapped file is damaged or was altered: \(m)"
        }
    }

    /// Lower-layer errors a caller would branch on become KeyShareError; the
    /// rest (PIN errors, storage errors) pass through with their own text.
    static func map(_ error: Error) -> Error {
        switch error {
        case KeychainError.itemNotFound: return KeyShareError.itemNotFound
        case KeychainError.duplicateItem: return KeyShareError.duplicateItem
        case KeychainError.keyRequired: return KeyShareError.authenticationNeeded("log in with the user PIN")
        case let e as CryptoError where e.kind == .dataTooLong: return KeyShareError.messageTooLong(e.reason)
        default: return error
        }
    }
}

/// Runs `body`, translating errors with `KeyShareError.map`.
func mapped<T>(_ body: () throws -> T) throws -> T {
    do { return try body() } catch { throw KeyShareError.map(error) }
}

/// Attribute numbers KeyShare adds to the PKCS #11 vocabulary.
public enum KeyShareAttribute {
    /// kSecAttrApplicationTag: CKA_VENDOR_DEFINED | 'KT'. A vendor attribute
    /// rather than CKA_APPLICATION, which PKCS #11 defines for data objects
    /// only and the store already uses as a generic password's account.
    public static let applicationTag: AttributeType = 0x8000_4B54
}

/// kSecAttrCanSign & co.: what a key may be used for (CKA_SIGN, CKA_VERIFY, ...).
public struct UsageFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let sign = UsageFlags(rawValue: 1 << 0)
    public static let verify = UsageFlags(rawValue: 1 << 1)
    public static let encrypt = UsageFlags(rawValue: 1 << 2)
    public static let decrypt = UsageFlags(rawValue: 1 << 3)
    public static let derive = UsageFlags(rawValue: 1 << 4)
    public static let wrap = UsageFlags(rawValue: 1 << 5)
    public static let unwrap = UsageFlags(rawValue: 1 << 6)

    /// Each flag with its PKCS #11 attribute.
    static let attributes: [(UsageFlags, AttributeType)] = [
        (.sign, CKA.sign), (.verify, CKA.verify), (.encrypt, CKA.encrypt), (.decrypt, CKA.decrypt),
        (.derive, CKA.derive), (.wrap, CKA.wrap), (.unwrap, CKA.unwrap),
    ]

    init(_ attrs: AttributeMap) {
        var f: UsageFlags = []
        for (flag, type) in Self.attributes where attrs.bool(type) == true { f.insert(flag) }
        self = f
    }
}

/// What `copyMatching` returns for each match (kSecReturnRef, kSecReturnAttributes,
/// kSecReturnData, kSecReturnPersistentRef); several may be combined.
public struct ReturnOptions: OptionSet, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let reference = ReturnOptions(rawValue: 1)
    public static let attributes = ReturnOptions(rawValue: 2)
    public static let data = ReturnOptions(rawValue: 4)
    public static let persistentReference = ReturnOptions(rawValue: 8)
}

/// A SecItemCopyMatching query. Every field left nil (or empty) matches
/// anything; the others must all match.
public struct Query: Sendable {
    public var itemClass: ItemClass?
    public var label: String?
    public var applicationTag: [UInt8]?
    public var keyType: KeyType?
    public var keySizeInBits: Int?
    public var tokenID: TokenID?
    /// Narrows to one group; it must be one the session is bound to.
    public var accessGroup: String?
    /// Every flag listed must be set on the item.
    public var usage: UsageFlags
    public var persistentReference: PersistentReference?
    public var matchLimit: MatchLimit
    public var returning: ReturnOptions
    /// Exact CKA_VALUE (certificates by their DER); internal to anchors and duplicates.
    var exactValue: [UInt8]? = nil
    /// CKA_SUBJECT to match exactly (internal: issuer lookups during trust evaluation).
    var subjectDER: [UInt8]? = nil
    /// Only trust anchors (CKA_TRUSTED true), found through the index.
    var trustedOnly = false

    public init(itemClass: ItemClass? = nil, label: String? = nil, applicationTag: [UInt8]? = nil,
                keyType: KeyType? = nil, keySizeInBits: Int? = nil, tokenID: TokenID? = nil,
                accessGroup: String? = nil, usage: UsageFlags = [], persistentReference: PersistentReference? = nil,
                matchLimit: MatchLimit = .all, returning: ReturnOptions = .attributes) {
        self.itemClass = itemClass
        self.label = label
        self.applicationTag = applicationTag
        self.keyType = keyType
        self.keySizeInBits = keySizeInBits
        self.tokenID = tokenID
        self.accessGroup = accessGroup
        self.usage = usage
        self.persistentReference = persistentReference
        self.matchLimit = matchLimit
        self.returning = returning
    }
}

/// kSecReturnAttributes: the keychain-level view of an item. `pkcs11` keeps
/// every attribute the caller may see (secrets never), for anything else.
public struct ItemAttributes: Sendable {
    public var itemClass: ItemClass
    public var label: String?
    public var applicationTag: [UInt8]?
    public var keyType: KeyType?
    public var keySizeInBits: Int?
    public var tokenID: TokenID
    public var accessGroup: String
    public var usage: UsageFlags
    public var persistentReference: PersistentReference
    public var isPrivate: Bool
    /// Unix seconds.
    public var created: Int64
    public var modified: Int64
    public var pkcs11: AttributeMap

    init(_ item: Item, accessGroup: String) {
        let a = item.attributes
        itemClass = item.itemClass
        label = a.string(CKA.label)
        applicationTag = a[KeyShareAttribute.applicationTag]
        keyType = a.ulong(CKA.keyType).flatMap { ckk in
            Self.keyType(ckk) ?? a.ulong(CKA.parameterSet).flatMap { ObjectTemplates.postQuantumType(ckk: ckk, parameterSet: $0) }
        }
        keySizeInBits = Self.size(a, keyType)
        tokenID = item.tokenID
        self.accessGroup = accessGroup
        usage = UsageFlags(a)
        persistentReference = item.reference
        isPrivate = item.isPrivate
        created = item.created
        modified = item.modified
        let keepValue = item.itemClass == .certificate || item.itemClass == .publicKey
        pkcs11 = a.filter { $0.key != CKA.keysharePKCS8 && ($0.key != CKA.value || keepValue) }
        if item.itemClass == .privateKey {
            for t in [CKA.privateExponent, CKA.prime1, CKA.prime2, CKA.exponent1, CKA.exponent2, CKA.coefficient] {
                pkcs11[t] = nil
            }
        }
    }

    static func keyType(_ ckk: UInt) -> KeyType? {
        switch ckk {
        case CKK.rsa: .rsa
        case CKK.ec: .ec
        case CKK.ecEdwards: .ed25519
        default: nil
        }
    }

    /// kSecAttrKeySizeInBits: the modulus for RSA, the curve's size for EC.
    static func size(_ a: AttributeMap, _ type: KeyType?) -> Int? {
        switch type {
        case .rsa: a.ulong(CKA.modulusBits).map { Int($0) }
        case .ec: a[CKA.ecParams].flatMap { ECCurve(paramsDER: $0) }?.bits
        case .ed25519, .ed448, .x25519, .x448: a[CKA.ecParams].flatMap { ECXCurve(paramsDER: $0) }?.bits ?? 256
        // The public key's size in bits: post-quantum keys have no modulus or field size.
        case .mlDSA(let s): s.publicKeyLength * 8
        case .mlKEM(let s): s.encapsulationKeyLength * 8
        case .slhDSA(let s): s.publicKeyLength * 8
        case nil: a.ulong(CKA.valueLen).map { Int($0) * 8 }
        }
    }
}

/// kSecReturnRef: the typed object an item stands for.
public enum ItemReference: Sendable {
    case certificate(Certificate)
    case key(KeyRef)
    case genericPassword(service: String, account: String)
    /// Data objects and secret keys, which have no richer type here.
    case other(ItemClass)
}

/// One match of `copyMatching`; only what `Query.returning` asked for is set.
public struct QueryResult: Sendable {
    public var reference: ItemReference?
    public var attributes: ItemAttributes?
    public var data: [UInt8]?
    public var persistentReference: PersistentReference?
}

/// The SecItemAdd value: what to store.
public enum NewItem: Sendable {
    /// `trusted` marks it an anchor (CKA_TRUSTED) for trust evaluation.
    case certificate(Certificate, label: String? = nil, trusted: Bool = false)
    /// A private key; its public key is added beside it with the same CKA_ID.
    case privateKey(PrivateKey, label: String? = nil, applicationTag: [UInt8]? = nil)
    case publicKey(PublicKey, label: String? = nil, applicationTag: [UInt8]? = nil)
    case genericPassword(service: String, account: String, value: [UInt8])
}

/// The SecItemUpdate changes; nil leaves an attribute as it is.
public struct ItemChanges: Sendable {
    public var label: String?
    public var applicationTag: [UInt8]?
    /// A password's value (generic passwords only).
    public var value: [UInt8]?
    public init(label: String? = nil, applicationTag: [UInt8]? = nil, value: [UInt8]? = nil) {
        self.label = label
        self.applicationTag = applicationTag
        self.value = value
    }
}
