import Keychain
import KeyshareCrypto
import Tokens

/// The keychain as one application sees it: the store, the tokens it has
/// unlocked, and the access groups it is bound to. This is the typed Swift
/// counterpart of the Security framework's SecItem functions; it holds no
/// item logic of its own but composes Keychain (storage, queries), Tokens
/// (object templates, import, generation) and KeyshareCrypto (the keys).
///
/// ```swift
/// let keychain = try KeychainSession(accessGroups: ["com.example.mail"])
/// try keychain.unlock(pin: Array("1234".utf8))
/// let pair = try keychain.generateKeyPair(KeyPairParameters(.ec(.p256), label: "mail", applicationTag: Array("mail".utf8)))
/// let signature = try pair.privateKey.createSignature(Array("hi".utf8), algorithm: .ecdsa(.sha256))
/// ```
public final class KeychainSession: @unchecked Sendable {
    public let store: KeychainStore
    let tokens: TokenManager
    /// The groups this session may see; nil means every group (the owner).
    public let accessGroups: Set<String>?
    /// The group new items go to: the first bound group, else the store's default.
    public let defaultAccessGroup: String
    private let lock = Lock()
    private var keys: [TokenID: TokenKey] = [:]

    /// Opens the store (`KEYSHARE_HOME` rules when `home` is nil). `accessGroups`
    /// binds the session the way an application's entitlements bind it: items of
    /// other groups are invisible, as if absent.
    public init(home: String? = nil, kdfLog2N: Int? = nil, accessGroups: [String]? = nil) throws {
        store = try mapped { try KeychainStore(home: home, kdfLog2N: kdfLog2N) }
        tokens = TokenManager(store: store)
        self.accessGroups = accessGroups.map(Set.init)
        defaultAccessGroup = accessGroups?.first ?? KeychainStore.defaultAccessGroup
    }

    /// A new soft token (mostly for tests and first-run setup).
    @discardableResult
    public func createSoftToken(label: String, soPIN: [UInt8], userPIN: [UInt8]) throws -> TokenID {
        try mapped { try tokens.createSoftToken(label: label, soPIN: soPIN, userPIN: userPIN).tokenID }
    }

    /// Unlocks a token (label, token ID or serial; nil: the only one) with its
    /// user PIN, making its private items visible to this session.
    @discardableResult
    public func unlock(token: String? = nil, pin: [UInt8]) throws -> TokenID {
        try mapped {
            let record = try tokens.resolveToken(token)
            let key = try store.unlockUser(record.tokenID, pin: pin)
            lock.withLock { keys[record.tokenID] = key }
            return record.tokenID
        }
    }

    func key(for token: TokenID) -> TokenKey? { lock.withLock { keys[token] } }

    func resolve(_ token: String?) throws -> TokenRecord {
        try mapped { try tokens.resolveToken(token) }
    }

    func requireKey(_ token: TokenID) throws -> TokenKey {
        guard let k = key(for: token) else {
            throw KeyShareError.authenticationNeeded("token \(token) is locked; unlock it with the user PIN")
        }
        return k
    }

    // MARK: SecItemCopyMatching

    /// Items matching `query`, each with what `query.returning` asks for.
    /// Throws `itemNotFound` when nothing matches (never an empty array).
    public func copyMatching(_ query: Query) throws -> [QueryResult] {
        let items = try findItems(query)
        guard !items.isEmpty else { throw KeyShareError.itemNotFound }
        return try items.map { try result($0, query.returning) }
    }

    /// The first match (`matchLimit` .one).
    public func copyFirst(_ query: Query) throws -> QueryResult {
        var q = query
        q.matchLimit = .one
        return try copyMatching(q)[0]
    }

    /// The raw store items of a query, with every filter applied; one store
    /// query per token so each sees its own token's private items.
    func findItems(_ query: Query) throws -> [Item] {
        let groups = visibleGroups(query.accessGroup)
        if case .only(let set) = groups, set.isEmpty { return [] }
        var attrs: AttributeMap = [:]
        if let label = query.label { attrs[CKA.label] = AttributeCoding.string(label) }
        if let tag = query.applicationTag { attrs[KeyShareAttribute.applicationTag] = tag }
        if let v = query.exactValue { attrs[CKA.value] = v }
        if let subject = query.subjectDER { attrs[CKA.subject] = subject }
        if query.trustedOnly { attrs[CKA.trusted] = AttributeCoding.bool(true) }
        if let t = query.keyType { attrs[CKA.keyType] = AttributeCoding.ulong(ObjectTemplates.keyType(t)) }
        for (flag, type) in UsageFlags.attributes where query.usage.contains(flag) { attrs[type] = AttributeCoding.bool(true) }
        let tokenIDs: [TokenID]
        if let t = query.tokenID { tokenIDs = [t] } else { tokenIDs = try mapped { try store.tokens().filter(\.present).map(\.tokenID) } }
        var out: [Item] = []
        for t in tokenIDs {
            var q = ItemQuery(tokenID: t, itemClass: query.itemClass, attributes: attrs,
                              reference: query.persistentReference, limit: query.keySizeInBits == nil ? query.matchLimit : .all)
            restrict(&q, to: groups)
            var found = try mapped { try store.find(q, key: key(for: t)) }
            if let bits = query.keySizeInBits {
                found = found.filter { ItemAttributes.size($0.attributes, $0.attributes.ulong(CKA.keyType).flatMap(ItemAttributes.keyType)) == bits }
            }
            out += found
            if query.matchLimit == .one, !out.isEmpty { return [out[0]] }
        }
        return out
    }

    func result(_ item: Item, _ returning: ReturnOptions) throws -> QueryResult {
        var r = QueryResult()
        if returning.contains(.persistentReference) { r.persistentReference = item.reference }
        if returning.contains(.attributes) { r.attributes = try attributes(item) }
        if returning.contains(.data) { r.data = try data(item) }
        if returning.contains(.reference) { r.reference = try reference(item) }
        return r
    }

    func attributes(_ item: Item) throws -> ItemAttributes {
        ItemAttributes(item, accessGroup: try accessGroup(of: item.reference))
    }

    /// kSecReturnData: a certificate's DER, a public key's SubjectPublicKeyInfo,
    /// a password's value; a private key only when it is extractable and not
    /// sensitive (PKCS #8), as a PKCS #11 token would allow.
    func data(_ item: Item) throws -> [UInt8] {
        let a = item.attributes
        if item.secretsWithheld { throw KeyShareError.authenticationNeeded("the item's data is sealed under its token's key") }
        switch item.itemClass {
        case .certificate, .data, .genericPassword:
            return a[CKA.value] ?? []
        case .publicKey:
            guard let spki = a[CKA.publicKeyInfo] else { throw KeyShareError.unsupported("public key without SubjectPublicKeyInfo") }
            return spki
        case .privateKey, .secretKey:
            guard a.bool(CKA.extractable) == true, a.bool(CKA.sensitive) != true else {
                throw KeyShareError.operationNotAllowed("the key is sensitive or not extractable; its data never leaves the keychain")
            }
            return a[item.itemClass == .privateKey ? CKA.keysharePKCS8 : CKA.value] ?? []
        }
    }

    func reference(_ item: Item) throws -> ItemReference {
        let a = item.attributes
        switch item.itemClass {
        case .certificate:
            return .certificate(try mapped { try Certificate(der: a[CKA.value] ?? []) })
        case .privateKey, .publicKey:
            return .key(try KeyRef(item: item, attributes: attributes(item)))
        case .genericPassword:
            return .genericPassword(service: a.string(CKA.label) ?? "", account: a.string(CKA.application) ?? "")
        default:
            return .other(item.itemClass)
        }
    }

    // MARK: SecItemAdd

    /// Adds an item to a token (nil: the only one) in `accessGroup` (nil: the
    /// session's default group). Throws `duplicateItem` when an item with the
    /// same primary attributes exists in that token and group: the same
    /// certificate, a key with the same tag (or, untagged, the same CKA_ID),
    /// a password with the same service and account.
    @discardableResult
    public func add(_ newItem: NewItem, token: String? = nil, accessGroup: String? = nil) throws -> PersistentReference {
        let record = try resolve(token)
        let t = record.tokenID
        let group = try groupForNewItem(accessGroup)
        let key = key(for: t)
        return try mapped {
            try store.transaction {
                let (cls, attrs, dupe) = try template(newItem)
                var dq = ItemQuery(tokenID: t, itemClass: cls, attributes: dupe, limit: .one)
                restrict(&dq, to: .only([group]))
                if try !store.find(dq, key: key).isEmpty { throw KeyShareError.duplicateItem }
                let ref = try store.add(token: t, itemClass: cls, attributes: attrs, key: key)
                try assign(ref, to: group)
                if case .privateKey(let pk, _, _) = newItem {
                    var pub = try ObjectTemplates.publicKey(pk.publicKey, label: attrs.string(CKA.label) ?? "", id: attrs[CKA.id] ?? [],
                                                            local: false)
                    pub[KeyShareAttribute.applicationTag] = attrs[KeyShareAttribute.applicationTag]
                    try assign(try store.add(token: t, itemClass: .publicKey, attributes: pub, key: key), to: group)
                }
                return ref
            }
        }
    }

    /// The attributes to store and the subset that decides "duplicate".
    private func template(_ newItem: NewItem) throws -> (ItemClass, AttributeMap, AttributeMap) {
        switch newItem {
        case .certificate(let c, let label, let trusted):
            var a = ObjectTemplates.certificate(c, label: label ?? c.sha256Hex, id: try c.publicKey.keyIdentifier(),
                                                category: c.isCA ? CertificateCategory.authority : CertificateCategory.unspecified)
            a[CKA.trusted] = AttributeCoding.bool(trusted)
            return (.certificate, a, [CKA.value: c.der])
        case .privateKey(let k, let label, let tag):
            let id = try k.publicKey.keyIdentifier()
            var a = try ObjectTemplates.privateKey(k, label: label ?? ObjectTemplates.hex(id), id: id, extractable: true, local: false)
            a[KeyShareAttribute.applicationTag] = tag
            return (.privateKey, a, tag.map { [KeyShareAttribute.applicationTag: $0] } ?? [CKA.id: id])
        case .publicKey(let k, let label, let tag):
            let id = try k.keyIdentifier()
            var a = try ObjectTemplates.publicKey(k, label: label ?? ObjectTemplates.hex(id), id: id, local: false)
            a[KeyShareAttribute.applicationTag] = tag
            return (.publicKey, a, tag.map { [KeyShareAttribute.applicationTag: $0] } ?? [CKA.id: id])
        case .genericPassword(let service, let account, let value):
            let a: AttributeMap = [
                CKA.token: AttributeCoding.bool(true), CKA.private: AttributeCoding.bool(false),
                CKA.label: AttributeCoding.string(service), CKA.application: AttributeCoding.string(account), CKA.value: value,
            ]
            return (.genericPassword, a, [CKA.label: a[CKA.label]!, CKA.application: a[CKA.application]!])
        }
    }

    // MARK: SecItemUpdate / SecItemDelete

    /// Applies `changes` to every item `query` matches; `itemNotFound` when none.
    public func update(_ query: Query, _ changes: ItemChanges) throws {
        let items = try findItems(query)
        guard !items.isEmpty else { throw KeyShareError.itemNotFound }
        var attrs: AttributeMap = [:]
        if let l = changes.label { attrs[CKA.label] = AttributeCoding.string(l) }
        if let t = changes.applicationTag { attrs[KeyShareAttribute.applicationTag] = t }
        try mapped {
            try store.transaction {
                for item in items {
                    var a = attrs
                    if let v = changes.value {
                        guard item.itemClass == .genericPassword else {
                            throw KeyShareError.invalidParameter("only a generic password's value can be changed")
                        }
                        a[CKA.value] = v
                    }
                    try store.update(item.reference, attributes: a, key: key(for: item.tokenID))
                }
            }
        }
    }

    /// Deletes every item `query` matches; returns how many; `itemNotFound` when none.
    @discardableResult
    public func delete(_ query: Query) throws -> Int {
        let items = try findItems(query)
        guard !items.isEmpty else { throw KeyShareError.itemNotFound }
        try mapped { try store.transaction { for i in items { try store.delete(i.reference) } } }
        return items.count
    }
}
