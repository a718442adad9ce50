/// SecItemCopyMatching: lookups go through attr_lookup (an index seek on
/// (type, digest)), so finding one object never scans or decrypts the store;
/// only the candidate rows are loaded and, when private, decrypted.
struct ItemRow {
    var id: Int64
    var reference: PersistentReference
    var tokenID: TokenID
    var itemClass: ItemClass
    var isPrivate: Bool
    var created: Int64
    var modified: Int64
}

extension KeychainStore {
    private static let rowColumns = "i.id, i.pref, i.token_id, i.class, i.is_private, i.created, i.modified"

    private static func itemRow(_ s: Statement) -> ItemRow? {
        guard let ref = PersistentReference(bytes: s.blob(1)), let tid = TokenID(s.text(2)),
              let cls = ItemClass(rawValue: UInt(s.int(3))) else { return nil }
        return ItemRow(id: s.int(0), reference: ref, tokenID: tid, itemClass: cls, isPrivate: s.int(4) != 0,
                       created: s.int(5), modified: s.int(6))
    }

    func itemRow(_ ref: PersistentReference, includeAbsent: Bool) throws -> ItemRow? {
        try db.query("""
            SELECT \(Self.rowColumns) FROM items i JOIN tokens t ON t.token_id = i.token_id
            WHERE i.pref = ?\(includeAbsent ? "" : " AND t.present = 1")
            """, [.blob(ref.bytes)]) { Self.itemRow($0) }.first ?? nil
    }

    /// The item a persistent reference names. itemNotFound when it was
    /// deleted, when its token is absent, or when it is private and no key
    /// (or another token's key) is given.
    public func item(_ ref: PersistentReference, key: TokenKey?) throws -> Item {
        try read {
            guard let row = try itemRow(ref, includeAbsent: false) else { throw KeychainError.itemNotFound }
            if let groups = accessGroupBinding, let g = try accessGroup(of: ref), !groups.contains(g) {
                throw KeychainError.itemNotFound
            }
            if row.isPrivate && key?.tokenID != row.tokenID { throw KeychainError.itemNotFound }
            return try loadAttributes(row, key: key)
        }
    }

    func loadAttributes(_ row: ItemRow, key: TokenKey?) throws -> Item {
        let usable = key?.tokenID == row.tokenID ? key : nil
        var attrs: AttributeMap = [:]
        var withheld = false
        let raw = try db.query("SELECT type, value, encrypted FROM attributes WHERE item = ?", [.int(row.id)]) {
            (AttributeType(UInt64(bitPattern: $0.int(0))), $0.blob(1), $0.int(2) != 0)
        }
        for (type, value, encrypted) in raw {
            if encrypted {
                guard let usable else { withheld = true; continue }
                attrs[type] = try ItemCrypto.open(value, key: usable, ref: row.reference, type: type)
            } else {
                attrs[type] = value
            }
        }
        return Item(reference: row.reference, tokenID: row.tokenID, itemClass: row.itemClass, isPrivate: row.isPrivate,
                    attributes: attrs, created: row.created, modified: row.modified, secretsWithheld: withheld)
    }

    /// Items matching every condition of `query`, in insertion order. Without
    /// a key private items are invisible; with one, only its token's private
    /// items become visible.
    public func find(_ query: ItemQuery, key: TokenKey?) throws -> [Item] {
        try read {
            let (sql, args) = try findSQL(query, key: key)
            let rows = try db.query(sql, args) { Self.itemRow($0) }.compactMap { $0 }
            var out: [Item] = []
            for row in rows {
                let item = try loadAttributes(row, key: key)
                // Digests only narrow the candidates; equality is decided on the values.
                guard query.attributes.allSatisfy({ item.attributes[$0.key] == $0.value }) else { continue }
                out.append(item)
                if query.limit == .one { break }
            }
            return out
        }
    }

    /// The candidate SELECT of `find`: an attribute that narrows is an index
    /// seek on attr_lookup, a flag a primary-key probe of its attribute row
    /// per candidate (tests check the query plans).
    func findSQL(_ query: ItemQuery, key: TokenKey?) throws -> (String, [SQLValue]) {
        var sql = "SELECT \(Self.rowColumns) FROM items i JOIN tokens t ON t.token_id = i.token_id WHERE 1"
        var args: [SQLValue] = []
        if !query.includeAbsentTokens { sql += " AND t.present = 1" }
        // With a lookup-indexed attribute, its attr_lookup seek must drive the
        // plan: without ANALYZE statistics SQLite would otherwise walk every
        // item of the token through items_token_class (a find among 100,000
        // objects took 85 ms). The unary + keeps these as plain filters. With
        // flags only, the token and class narrow and the flags are checked per
        // candidate.
        let filter = query.attributes.keys.contains(where: Schema.isLookupIndexed) ? "+" : ""
        if let tid = query.tokenID {
            sql += " AND \(filter)i.token_id = ?"
            args.append(.text(tid.description))
        }
        if let cls = query.itemClass {
            sql += " AND \(filter)i.class = ?"
            args.append(.int(Int64(cls.rawValue)))
        }
        if let ref = query.reference {
            sql += " AND i.pref = ?"
            args.append(.blob(ref.bytes))
        }
        if let groups = query.accessGroups ?? accessGroupBinding {
            let (cond, condArgs) = Self.accessGroupCondition(groups)
            sql += cond
            args += condArgs
        }
        if let key {
            sql += " AND (i.is_private = 0 OR i.token_id = ?)"
            args.append(.text(key.tokenID.description))
        } else {
            sql += " AND i.is_private = 0"
        }
        // Sorted so the generated SQL (and its cached statement) is stable.
        for type in query.attributes.keys.sorted() {
            let value = query.attributes[type]!
            sql += Schema.isLookupIndexed(type)
                ? " AND i.id IN (SELECT item FROM attr_lookup WHERE type = ? AND digest IN (?, ?))"
                : " AND EXISTS (SELECT 1 FROM attributes x WHERE x.item = i.id AND x.type = ? AND x.digest IN (?, ?))"
            args.append(.int(Int64(bitPattern: UInt64(type))))
            args.append(.blob(ItemCrypto.publicDigest(type, value)))
            args.append(try key.map { .blob(try ItemCrypto.keyedDigest(type, value, key: $0)) } ?? .null)
        }
        sql += " ORDER BY i.id"
        return (sql, args)
    }

    /// Number of items per token and class without loading any, for listings.
    public func count(token: TokenID? = nil, itemClass: ItemClass? = nil) throws -> Int {
        try read {
            var sql = "SELECT COUNT(*) FROM items i WHERE 1"
            var args: [SQLValue] = []
            if let token { sql += " AND i.token_id = ?"; args.append(.text(token.description)) }
            if let itemClass { sql += " AND i.class = ?"; args.append(.int(Int64(itemClass.rawValue))) }
            return try db.query(sql, args) { Int($0.int(0)) }.first ?? 0
        }
    }
}
