#if canImport(Glibc)
import Glibc
#endif
import KeyshareCrypto

/// Login and PIN management. A failed attempt is charged *before* the slow
/// KDF runs, in its own committed transaction, and refunded on success: a
/// brute force spread over many processes (or killed mid-attempt) is counted
/// in full, at the price of the counter reading one high while a login is in
/// flight.
extension KeychainStore {
    private enum Charge {
        case proceed(PINWrap)
        case locked
        case notInitialized
    }

    private func columns(_ role: TokenKey.Role) -> (prefix: String, failures: String, locked: String) {
        role == .user ? ("user", "user_failures", "user_locked") : ("so", "so_failures", "so_locked")
    }

    /// Verifies a PIN and returns the token key, counting failures in the store.
    func unlock(_ id: TokenID, pin: [UInt8], role: TokenKey.Role) throws -> TokenKey {
        guard !inTransaction else { throw KeychainError.invalidArgument("a PIN cannot be checked inside a transaction") }
        let c = columns(role)
        let charge: Charge = try write {
            let rows = try db.query("""
                SELECT \(c.prefix)_salt, \(c.prefix)_kdf, \(c.prefix)_wrapped, \(c.failures), \(c.locked), max_attempts,
                       user_pin_initialized, present
                FROM tokens WHERE token_id = ?
                """, [.text(id.description)]) { s in
                (s.isNull(2) ? nil : PINWrap(salt: s.blob(0), cost: s.text(1), wrapped: s.blob(2)),
                 Int(s.int(3)), s.int(4) != 0, Int(s.int(5)), s.int(6) != 0, s.int(7) != 0)
            }
            guard let row = rows.first else { throw KeychainError.tokenNotFound }
            guard row.5 else { throw KeychainError.tokenNotFound }
            if role == .user && !row.4 { return .notInitialized }
            guard let wrap = row.0 else { return role == .user ? .notInitialized : .locked }
            if row.2 { return .locked }
            if row.1 >= row.3 {
                try db.run("UPDATE tokens SET \(c.locked) = 1 WHERE token_id = ?", [.text(id.description)])
                return .locked
            }
            try db.run("UPDATE tokens SET \(c.failures) = \(c.failures) + 1 WHERE token_id = ?", [.text(id.description)])
            return .proceed(wrap)
        }
        let wrap: PINWrap
        switch charge {
        case .locked: throw KeychainError.pinLocked
        case .notInitialized: throw KeychainError.pinNotInitialized
        case .proceed(let w): wrap = w
        }
        if var keyBytes = try wrap.unwrap(pin: pin, token: id, role: role) {
            defer { wipe(&keyBytes) }
            try write {
                try db.run("UPDATE tokens SET \(c.failures) = 0 WHERE token_id = ? AND \(c.locked) = 0", [.text(id.description)])
            }
            return try TokenKey(tokenID: id, role: role, bytes: keyBytes)
        }
        let remaining: Int = try write {
            let r = try db.query("SELECT \(c.failures), max_attempts FROM tokens WHERE token_id = ?", [.text(id.description)]) {
                (Int($0.int(0)), Int($0.int(1)))
            }
            guard let (failures, maxAttempts) = r.first else { throw KeychainError.tokenNotFound }
            if failures >= maxAttempts {
                try db.run("UPDATE tokens SET \(c.locked) = 1 WHERE token_id = ?", [.text(id.description)])
            }
            return max(0, maxAttempts - failures)
        }
        throw KeychainError.pinIncorrect(remaining: remaining)
    }

    public func unlockUser(_ id: TokenID, pin: [UInt8]) throws -> TokenKey {
        try unlock(id, pin: pin, role: .user)
    }

    public func unlockSO(_ id: TokenID, pin: [UInt8]) throws -> TokenKey {
        try unlock(id, pin: pin, role: .securityOfficer)
    }

    /// C_InitPIN: the SO sets a new user PIN, which also clears a user lock.
    /// Keys survive because the SO wrap holds the same token key.
    public func initUserPIN(_ id: TokenID, soKey: TokenKey, newPIN: [UInt8]) throws {
        guard soKey.role == .securityOfficer, soKey.tokenID == id else {
            throw KeychainError.invalidArgument("initialising the user PIN needs the security officer's login on this token")
        }
        try rewrap(id, key: soKey, role: .user, newPIN: newPIN)
    }

    /// Sets a new PIN for `role` given an unlocked key (C_SetPIN after login).
    public func setPIN(_ id: TokenID, key: TokenKey, role: TokenKey.Role, newPIN: [UInt8]) throws {
        guard key.tokenID == id, key.role == role else {
            throw KeychainError.invalidArgument("the key was not unlocked with this PIN")
        }
        try rewrap(id, key: key, role: role, newPIN: newPIN)
    }

    public func changeUserPIN(_ id: TokenID, old: [UInt8], new: [UInt8]) throws {
        let key = try unlockUser(id, pin: old)
        try rewrap(id, key: key, role: .user, newPIN: new)
    }

    public func changeSOPIN(_ id: TokenID, old: [UInt8], new: [UInt8]) throws {
        let key = try unlockSO(id, pin: old)
        try rewrap(id, key: key, role: .securityOfficer, newPIN: new)
    }

    /// One UPDATE, so the PIN change is all-or-nothing.
    private func rewrap(_ id: TokenID, key: TokenKey, role: TokenKey.Role, newPIN: [UInt8]) throws {
        let wrap = try PINWrap.make(tokenKey: key.keyBytes, pin: newPIN, token: id, role: role, log2N: kdfLog2N)
        let c = columns(role)
        let initialized = role == .user ? ", user_pin_initialized = 1" : ""
        try write {
            guard try checkKey(key) else {
                throw KeychainError.invalidArgument("the token was re-initialised since this login")
            }
            try db.run("""
                UPDATE tokens SET \(c.prefix)_salt = ?, \(c.prefix)_kdf = ?, \(c.prefix)_wrapped = ?,
                    \(c.failures) = 0, \(c.locked) = 0\(initialized) WHERE token_id = ?
                """, [.blob(wrap.salt), .text(wrap.cost), .blob(wrap.wrapped), .text(id.description)])
            guard db.changes == 1 else { throw KeychainError.tokenNotFound }
        }
    }

    /// Whether `key` is still this token's key: a canary sealed under it.
    func checkKey(_ key: TokenKey) throws -> Bool {
        let rows = try db.query("SELECT value FROM meta WHERE key = ?", [.text("canary:" + key.tokenID.description)]) { $0.blob(0) }
        guard let sealed = rows.first else { return false }
        return (try? AESGCM.open(key: key.keyBytes, sealed: sealed, aad: Array("keyshare canary".utf8))) != nil
    }

    /// Seals an empty canary under a new token key, so a key from before a
    /// re-initialisation can be told apart and refused.
    func storeCanary(_ id: TokenID, tokenKey: [UInt8]) throws {
        let canary = try AESGCM.seal(key: tokenKey, plaintext: [], aad: Array("keyshare canary".utf8))
        try db.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [.text("canary:" + id.description), .blob(canary)])
    }

    /// C_InitToken on an existing token: checks the SO PIN, destroys every
    /// item, and starts over with a new token key; the user PIN must be set again.
    public func reinitializeToken(_ id: TokenID, soPIN: [UInt8], label: String) throws {
        _ = try unlockSO(id, pin: soPIN)
        var tokenKey = try SecureRandom.bytes(AESGCM.keySize)
        defer { wipe(&tokenKey) }
        let so = try PINWrap.make(tokenKey: tokenKey, pin: soPIN, token: id, role: .securityOfficer, log2N: kdfLog2N)
        try write {
            try db.run("INSERT OR IGNORE INTO retired_refs (pref) SELECT pref FROM items WHERE token_id = ?", [.text(id.description)])
            try db.run("DELETE FROM items WHERE token_id = ?", [.text(id.description)])
            try storeCanary(id, tokenKey: tokenKey)
            try db.run("""
                UPDATE tokens SET label = ?, so_salt = ?, so_kdf = ?, so_wrapped = ?, so_failures = 0, so_locked = 0,
                    user_salt = NULL, user_kdf = NULL, user_wrapped = NULL, user_pin_initialized = 0,
                    user_failures = 0, user_locked = 0 WHERE token_id = ?
                """, [.text(label), .blob(so.salt), .text(so.cost), .blob(so.wrapped), .text(id.description)])
        }
    }
}
