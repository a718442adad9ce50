import Keychain

/// Which access groups a lookup may see.
enum GroupFilter: Equatable {
    case all
    case only(Set<String>)
}

extension KeychainStore {
    static var defaultAccessGroup: String { "default" }
}

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

    func restrict(_ q: inout ItemQuery, to groups: GroupFilter) {}

    func accessGroup(of ref: PersistentReference) throws -> String { KeychainStore.defaultAccessGroup }

    func assign(_ ref: PersistentReference, to group: String) throws {}
}
