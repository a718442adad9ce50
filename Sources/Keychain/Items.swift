/// SecItemAdd / SecItemUpdate / SecItemDelete over the items, attributes and
/// attr_lookup tables. Every write is one transaction; a nested call joins the
/// caller's `transaction`.
extension KeychainStore {
    /// Adds an item. `key` must be the token's key when the item is private or
    /// holds a secret attribute (private items: everything but CLASS/TOKEN/PRIVATE).
    /// `reference`: a derived reference (external tokens' items); an item
    /// already stored under it gives duplicateItem.
    @discardableResult
    public func add(token: TokenID, itemClass: ItemClass, attributes: AttributeMap, key: TokenKey?,
                    reference: PersistentReference? = nil) throws -> PersistentReference {
        var attrs = attributes
        if let cls = attrs.ulong(CKA.class), cls != itemClass.rawValue {
            throw KeychainError.invalidArgument("CKA_CLASS 0x\(String(cls, radix: 16)) contradicts item class \(itemClass)")
        }
        attrs[CKA.class] = AttributeCoding.ulong(itemClass.rawValue)
        let isPrivate = attrs.bool(CKA.private) ?? itemClass.privateByDefault
        let needsKey = isPrivate || attrs.keys.contains { ItemCrypto.isSecret($0, itemClass: itemClass, isPrivate: false) }
        if needsKey {
            guard let key else { throw KeychainError.keyRequired }
            guard key.tokenID == token else { throw KeychainError.invalidArgument("the key belongs to token \(key.tokenID)") }
        }
        return try write {
            guard let rec = try tokenLocked(token), rec.present else { throw KeychainError.tokenNotFound }
            if needsKey, let key { try requireCurrent(key) }
            var ref: PersistentReference
            if let reference {
                guard reference.isDerived else { throw KeychainError.invalidArgument("only derived references can be given") }
                guard try itemRow(reference, includeAbsent: true) == nil else { throw KeychainError.duplicateItem }
                ref = reference
            } else {
                ref = try PersistentReference.random()
                while try refUsed(ref) { ref = try PersistentReference.random() }
            }
            let now = Self.now()
            try db.run("""
                INSERT INTO items (pref, token_id, class, is_private, created, modified, access_group)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """, [.blob(ref.bytes), .text(token.description), .int(Int64(itemClass.rawValue)),
                      .int(isPrivate ? 1 : 0), .int(now), .int(now), .text(newItemAccessGroup)])
            let rowID = db.lastInsertRowID
            for (type, value) in attrs {
                try putAttribute(rowID, ref: ref, itemClass: itemClass, isPrivate: isPrivate, type: type, value: value,
                                 key: key, replacing: false)
            }
            return ref
        }
    }

    /// A key from before a re-initialisation would seal values no current
    /// login can open; refuse it as if logged out. One small GCM open.
    func requireCurrent(_ key: TokenKey) throws {
        guard try checkKey(key) else { throw KeychainError.keyRequired }
    }

    /// Whether a reference was deleted (and so can never be handed out again).
    func isRetired(_ ref: PersistentReference) throws -> Bool {
        try read { try !db.query("SELECT 1 FROM retired_refs WHERE pref = ?", [.blob(ref.bytes)]) { _ in true }.isEmpty }
    }

    private func refUsed(_ ref: PersistentReference) throws -> Bool {
        try !db.query("SELECT 1 FROM items WHERE pref = ?1 UNION ALL SELECT 1 FROM retired_refs WHERE pref = ?1",
                      [.blob(ref.bytes)]) { _ in true }.isEmpty
    }

    /// `replacing`: the item may already hold this attribute, whose lookup
    /// entry (keyed by the old digest) must go first.
    private func putAttribute(_ rowID: Int64, ref: PersistentReference, itemClass: ItemClass, isPrivate: Bool,
                              type: AttributeType, value: [UInt8], key: TokenKey?, replacing: Bool) throws {
        let stored: [UInt8]
        let digest: [UInt8]
        let secret = ItemCrypto.isSecret(type, itemClass: itemClass, isPrivate: isPrivate)
        if secret {
            guard let key else { throw KeychainError.keyRequired }
            stored = try ItemCrypto.seal(value, key: key, ref: ref, type: type)
            digest = try ItemCrypto.keyedDigest(type, value, key: key)
        } else {
            stored = value
            digest = ItemCrypto.publicDigest(type, value)
        }
        try db.run("INSERT OR REPLACE INTO attributes (item, type, value, encrypted, digest) VALUES (?, ?, ?, ?, ?)",
                   [.int(rowID), .int(Int64(type)), .blob(stored), .int(secret ? 1 : 0), .blob(digest)])
        guard Schema.isLookupIndexed(type) else { return }
        if replacing {
            try db.run("DELETE FROM attr_lookup WHERE item = ? AND type = ?", [.int(rowID), .int(Int64(type))])
        }
        try db.run("INSERT OR REPLACE INTO attr_lookup (type, digest, item) VALUES (?, ?, ?)",
                   [.int(Int64(type)), .blob(digest), .int(rowID)])
    }

    /// Sets (adds or replaces) the given attributes. Changing CKA_PRIVATE
    /// re-encrypts or decrypts the whole item, so it needs the key.
    public func update(_ ref: PersistentReference, attributes: AttributeMap, key: TokenKey?) throws {
        try write {
            guard let row = try itemRow(ref, includeAbsent: false) else { throw KeychainError.itemNotFound }
            if let cls = attributes.ulong(CKA.class), cls != row.itemClass.rawValue {
                throw KeychainError.invalidArgument("CKA_CLASS cannot change")
            }
            if let key, key.tokenID != row.tokenID {
                throw KeychainError.invalidArgument("the key belongs to token \(key.tokenID)")
            }
            if let key { try requireCurrent(key) }
            if row.isPrivate && key == nil { throw KeychainError.itemNotFound }
            let newPrivate = attributes.bool(CKA.private) ?? row.isPrivate
            if newPrivate != row.isPrivate {
                guard let key else { throw KeychainError.keyRequired }
                var all = try loadAttributes(row, key: key).attributes
                all.merge(attributes) { _, new in new }
                try db.run("DELETE FROM attributes WHERE item = ?", [.int(row.id)])
                try db.run("DELETE FROM attr_lookup WHERE item = ?", [.int(row.id)])
                try db.run("UPDATE items SET is_private = ? WHERE id = ?", [.int(newPrivate ? 1 : 0), .int(row.id)])
                for (type, value) in all {
                    try putAttribute(row.id, ref: ref, itemClass: row.itemClass, isPrivate: newPrivate, type: type, value: value,
                                     key: key, replacing: false)
                }
            } else {
                for (type, value) in attributes {
                    try putAttribute(row.id, ref: ref, itemClass: row.itemClass, isPrivate: newPrivate, type: type, value: value,
                                     key: key, replacing: true)
                }
            }
            try db.run("UPDATE items SET modified = ? WHERE id = ?", [.int(Self.now()), .int(row.id)])
        }
    }

    /// Deletes the item; its reference is retired so it can never name another.
    public func delete(_ ref: PersistentReference) throws {
        try write {
            guard let row = try itemRow(ref, includeAbsent: false) else { throw KeychainError.itemNotFound }
            if !ref.isDerived { try db.run("INSERT OR IGNORE INTO retired_refs (pref) VALUES (?)", [.blob(ref.bytes)]) }
            try db.run("DELETE FROM items WHERE id = ?", [.int(row.id)])
        }
    }

    /// Deletes every item the query matches (with this key's visibility); returns how many.
    @discardableResult
    public func delete(_ query: ItemQuery, key: TokenKey?) throws -> Int {
        try write {
            let items = try find(query, key: key)
            for item in items {
                if !item.reference.isDerived {
                    try db.run("INSERT OR IGNORE INTO retired_refs (pref) VALUES (?)", [.blob(item.reference.bytes)])
                }
                try db.run("DELETE FROM items WHERE pref = ?", [.blob(item.reference.bytes)])
            }
            return items.count
        }
    }
}
