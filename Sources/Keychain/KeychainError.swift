/// Errors of the store. Messages name what went wrong but never carry a PIN,
/// a key or a decrypted value.
public enum KeychainError: Error, Equatable, CustomStringConvertible, Sendable {
    case itemNotFound
    case duplicateItem
    case tokenNotFound
    case tokenExists
    case pinIncorrect(remaining: Int)
    case pinLocked
    case pinNotInitialized
    case keyRequired
    case decryptionFailed(String)
    case storage(String)
    case invalidArgument(String)

    public var description: String {
        switch self {
        case .itemNotFound: "item not found"
        case .duplicateItem: "the item already exists"
        case .tokenNotFound: "token not found"
        case .tokenExists: "a token with this ID already exists"
        case .pinIncorrect(let r): "incorrect PIN (\(r) attempt\(r == 1 ? "" : "s") left)"
        case .pinLocked: "the PIN is locked after too many failed attempts; the security officer must set a new one"
        case .pinNotInitialized: "the user PIN has not been set; the security officer must initialise it"
        case .keyRequired: "the token must be unlocked (logged in) for this operation"
        case .decryptionFailed(let m): "decryption failed: \(m)"
        case .storage(let m): "keychain storage error: \(m)"
        case .invalidArgument(let m): "invalid argument: \(m)"
        }
    }
}
