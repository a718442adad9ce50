import Keychain

/// Which access groups a lookup may see.
enum GroupFilter: Equatable {
    case all
    case only(Set<String>)
}

/// Access groups in the facade: the store keeps each item's group and
/// filters queries by `ItemQuery.accessGroups`; the session decides which
/// groups that is (its binding, narrowed by the query's group).
extension KeychainSession {
    /// The session's groups narrowed by a query's group. A group the session
    /// is not bound to yields nothing: other groups' items are absent, not denied.
    func visibleGroups(_ requested: String?) -> GroupFilter {
        switch (accessGroups, requested) {
        case (nil, nil): .all
        case (nil, let r?): .only([r])
        case (let bound?, nil): .only(bound)
        case (let bound?, let r?): .only(bound.contains(r) ? [r] : [])
        }
    }

    /// The group a new item goes to; the session must be bound to it.
    func groupForNewItem(_ requested: String?) throws -> String {
        let g = requested ?? defaultAccessGroup
        if let bound = accessGroups, !bound.contains(g) { throw KeyShareError.notInAccessGroup(g) }
        return g
    }

    func restrict(_ q: inout ItemQuery, to groups: GroupFilter) {
        if case .only(let set) = groups { q.accessGroups = set }
    }

    func accessGroup(of ref: PersistentReference) throws -> String {
        try mapped { try store.accessGroup(of: ref) } ?? KeychainStore.defaultAccessGroup
    }

    /// Called inside the transaction that added the item, so no other
    /// consumer ever sees it in the default group first.
    func assign(_ ref: PersistentReference, to group: String) throws {
        try mapped { try store.setAccessGroup(ref, group) }
    }
}
