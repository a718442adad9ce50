/// A session's active operations, one slot per `OperationKind`, stored
/// inline in the session (issue 13, per-call overhead). It was a
/// `[OperationKind: any Operation]`: every C_*Init paid a hash of the kind
/// (SipHash), a lookup, an insert (a heap allocation the first time after
/// each removal left the storage empty) and every step another lookup and
/// a removal. Here a kind is a `switch` to a stored property: no hashing,
/// no allocation. It offers the few Dictionary operations the session
/// code uses (subscript, isEmpty, removeAll, iteration as (kind, op)).
struct OperationTable: Sequence {
    private var find: (any Operation)?
    private var encrypt: (any Operation)?
    private var decrypt: (any Operation)?
    private var digest: (any Operation)?
    private var sign: (any Operation)?
    private var verify: (any Operation)?
    private var signRecover: (any Operation)?
    private var verifyRecover: (any Operation)?
    private var messageEncrypt: (any Operation)?
    private var messageDecrypt: (any Operation)?

    init() {}

    /// The table holding `operations` (C_SetOperationState).
    init(_ operations: [OperationKind: any Operation]) {
        for (kind, op) in operations { self[kind] = op }
    }

    subscript(kind: OperationKind) -> (any Operation)? {
        get {
            switch kind {
            case .find: find
            case .encrypt: encrypt
            case .decrypt: decrypt
            case .digest: digest
            case .sign: sign
            case .verify: verify
            case .signRecover: signRecover
            case .verifyRecover: verifyRecover
            case .messageEncrypt: messageEncrypt
            case .messageDecrypt: messageDecrypt
            }
        }
        set {
            switch kind {
            case .find: find = newValue
            case .encrypt: encrypt = newValue
            case .decrypt: decrypt = newValue
            case .digest: digest = newValue
            case .sign: sign = newValue
            case .verify: verify = newValue
            case .signRecover: signRecover = newValue
            case .verifyRecover: verifyRecover = newValue
            case .messageEncrypt: messageEncrypt = newValue
            case .messageDecrypt: messageDecrypt = newValue
            }
        }
    }

    var isEmpty: Bool { OperationKind.allCases.allSatisfy { self[$0] == nil } }

    mutating func removeAll() { self = OperationTable() }

    /// The active operations as (kind, operation), in `OperationKind.allCases` order.
    func makeIterator() -> IndexingIterator<[(OperationKind, any Operation)]> {
        OperationKind.allCases.compactMap { k in self[k].map { (k, $0) } }.makeIterator()
    }
}
