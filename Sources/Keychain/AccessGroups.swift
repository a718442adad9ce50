#if canImport(Glibc)
import Glibc
#endif

/// Access groups: every item belongs to one (the items.access_group column,
/// migration 2; `defaultAccessGroup` unless its creator said otherwise). A
/// consumer bound to a set of groups sees only their items; the others are
/// absent for it, not refused, exactly as for a missing item. Queries filter
/// with `ItemQuery.accessGroups`, so every caller of `find` gets the filter
/// by setting one field.
extension KeychainStore {
    /// The group of items whose creator named none (also every item that
    /// existed before migration 2).
    public static let defaultAccessGroup = "default"

    /// The groups this process is bound to, from `KEYSHARE_ACCESS_GROUPS`
    /// (comma-separated; read once); nil: unbound, every group visible. The
    /// PKCS #11 module puts this into `ItemQuery.accessGroups`.
    public static let processAccessGroups: Set<String>? = {
        guard let raw = getenv("KEYSHARE_ACCESS_GROUPS") else { return nil }
        let groups = String(cString: raw).split(separator: ",").map { String($0).trimmingSpaces() }.filter { !$0.isEmpty }
        return groups.isEmpty ? nil : Set(groups)
    }()

    /// The group new items of this process go to: the first group of
    /// `KEYSHARE_ACCESS_GROUPS`, else the default.
    public static let processDefaultAccessGroup: String = {
        guard let raw = getenv("KEYSHARE_ACCESS_GROUPS") else { return defaultAccessGroup }
        return String(cString: raw).split(separator: ",").map { String($0).trimmingSpaces() }.first { !$0.isEmpty }
            ?? defaultAccessGroup
    }()

    /// The SQL condition for a group filter (appended to a WHERE clause on
    /// items aliased `i`); an empty set matches nothing. The column has no
    /// index and the unary + keeps it that way for the planner: the group
    /// only filters the candidates the attribute seek found, it never
    /// drives the search (one group may hold every item).
    static func accessGroupCondition(_ groups: Set<String>) -> (sql: String, args: [SQLValue]) {
        guard !groups.isEmpty else { return (" AND 0", []) }
        let sorted = groups.sorted()
        return (" AND +i.access_group IN (" + Array(repeating: "?", count: sorted.count).joined(separator: ", ") + ")",
                sorted.map { .text($0) })
    }

    /// Confines this handle to `groups` (see `accessGroupBinding`); new items go
    /// to `newItems`, which must be one of them.
    public func bind(accessGroups groups: Set<String>, newItems: String) throws {
        guard groups.contains(newItems) else {
            throw KeychainError.invalidArgument("the group for new items must be one of the bound groups")
        }
        lock.withLock {
            accessGroupBinding = groups
            newItemAccessGroup = newItems
        }
    }

    /// Binds this handle to the process's `KEYSHARE_ACCESS_GROUPS`, if set.
    public func bindToProcessAccessGroups() throws {
        guard let groups = Self.processAccessGroups else { return }
        try bind(accessGroups: groups, newItems: Self.processDefaultAccessGroup)
    }

    /// The item's access group; nil when there is no such item.
    public func accessGroup(of ref: PersistentReference) throws -> String? {
        try read {
            try db.query("SELECT access_group FROM items WHERE pref = ?", [.blob(ref.bytes)]) { $0.text(0) }.first
        }
    }

    /// Moves an item to another group (callers set it right after `add`,
    /// inside the same transaction, so the item is never seen elsewhere).
    public func setAccessGroup(_ ref: PersistentReference, _ group: String) throws {
        guard !group.isEmpty else { throw KeychainError.invalidArgument("an access group name cannot be empty") }
        try write {
            try db.run("UPDATE items SET access_group = ? WHERE pref = ?", [.text(group), .blob(ref.bytes)])
            guard db.changes > 0 else { throw KeychainError.itemNotFound }
        }
    }

    /// `item(_:key:)` for a consumer bound to `groups`: an item of another
    /// group is `itemNotFound`, like one that does not exist.
    public func item(_ ref: PersistentReference, key: TokenKey?, accessGroups groups: Set<String>?) throws -> Item {
        let item = try self.item(ref, key: key)
        if let groups, let g = try accessGroup(of: ref), !groups.contains(g) { throw KeychainError.itemNotFound }
        return item
    }
}

extension String {
    fileprivate func trimmingSpaces() -> String {
        var s = Substring(self)
        while s.first == " " { s.removeFirst() }
        while s.last == " " { s.removeLast() }
        return String(s)
    }
}
