extension KeychainStore {
    /// How many items a token holds, private ones included: counting reveals
    /// nothing secret and `token list` must not need every token's PIN.
    public func itemCount(token: TokenID) throws -> Int {
        try read {
            try db.query("SELECT COUNT(*) FROM items WHERE token_id = ?", [.text(token.description)]) { Int($0.int(0)) }.first ?? 0
        }
    }
}
