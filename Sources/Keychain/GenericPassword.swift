/// Keychain generic passwords (class `genericPassword`), as the key-sharing
/// export keeps its shared password. Service and account are public
/// attributes (CKA_LABEL, CKA_APPLICATION) so an entry can be listed or
/// deleted without login, as on Apple's keychain; the value is always sealed.
extension KeychainStore {
    private func passwordQuery(_ service: String, _ account: String, _ token: TokenID) -> ItemQuery {
        ItemQuery(tokenID: token, itemClass: .genericPassword,
                  attributes: [CKA.label: Array(service.utf8), CKA.application: Array(account.utf8)], limit: .all)
    }

    /// Creates or replaces the password for (service, account) on the token.
    public func setGenericPassword(service: String, account: String, value: [UInt8], token: TokenID, key: TokenKey) throws {
        try transaction {
            if let existing = try find(passwordQuery(service, account, token), key: key).first {
                try update(existing.reference, attributes: [CKA.value: value], key: key)
            } else {
                try add(token: token, itemClass: .genericPassword, attributes: [
                    CKA.token: AttributeCoding.bool(true),
                    CKA.private: AttributeCoding.bool(false),
                    CKA.label: Array(service.utf8),
                    CKA.application: Array(account.utf8),
                    CKA.value: value,
                ], key: key)
            }
        }
    }

    public func genericPassword(service: String, account: String, token: TokenID, key: TokenKey) throws -> [UInt8]? {
        try find(passwordQuery(service, account, token), key: key).first?.attributes[CKA.value]
    }

    /// True when something was deleted.
    @discardableResult
    public func deleteGenericPassword(service: String, account: String, token: TokenID, key: TokenKey? = nil) throws -> Bool {
        try delete(passwordQuery(service, account, token), key: key) > 0
    }
}
