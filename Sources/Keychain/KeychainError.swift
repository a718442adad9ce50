import KeyshareCrypto

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
    /// A write on a store that cannot be written: a read-only mount, no write
    /// permission, a handle opened read-only (PKCS #11: CKR_TOKEN_WRITE_PROTECTED).
    case readOnlyStore(String)
    /// A write that ran out of disk space (PKCS #11: CKR_DEVICE_MEMORY).
    case storeFull(String)
    /// A directory or file another user could have planted or could change
    /// (SecureDirectory); the message is the whole line: path, owner, mode, fix.
    case insecurePath(String)
    /// A token sealed to a TPM that cannot be opened here: another machine's
    /// TPM, a cleared TPM, or PCRs that changed since it was bound (docs/tpm.md).
    case deviceBound(String)
    /// The token needs the TPM and no TPM answers (PKCS #11: token not present).
    case tpmUnavailable(String)
    /// The TPM refuses every authorization until its lockout recovery time has passed.
    case tpmLockout

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
        case .readOnlyStore(let m): "read-only store: \(m)"
        case .storeFull(let m): "disk full: \(m)"
        case .insecurePath(let m): m
        case .deviceBound(let m): m
        case .tpmUnavailable(let m): m
        case .tpmLockout: "the TPM is in dictionary-attack lockout after too many wrong PINs; it accepts PINs again after its recovery time"
        }
    }
}

extension KeychainError {
    /// Whether this is a write that cannot succeed here until the disk or
    /// mount changes (so a PIN check may count the attempt elsewhere).
    var isWriteImpossible: Bool {
        switch self {
        case .readOnlyStore, .storeFull: true
        default: false
        }
    }

    /// The same error with the store file named, for failures at open time
    /// (SQLite's own messages never say which file).
    func naming(_ path: String) -> KeychainError {
        switch self {
        case .storage(let m) where !m.containsText(path): .storage("\(path): \(m)")
        case .readOnlyStore(let m) where !m.containsText(path): .readOnlyStore("\(path): \(m)")
        case .storeFull(let m) where !m.containsText(path): .storeFull("\(path): \(m)")
        default: self
        }
    }
}
