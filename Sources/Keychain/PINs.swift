#if canImport(Glibc)
import Glibc
#endif
import KeyshareCrypto
import KeyshareTPM

/// Login and PIN management. A failed attempt is charged *before* the slow
/// KDF runs, in its own committed transaction, and refunded on success: a
/// brute force spread over many processes (or killed mid-attempt) is counted
/// in full, at the price of the counter reading one high while a login is in
/// flight. When the store cannot be written (read-only mount, full disk) the
/// attempt is charged to a PINLedger outside it instead, and if that fails
/// too the login is refused: PIN guessing stays bounded either way.
extension KeychainStore {
    private enum Charge {
        /// Go on with the KDF; `folded` ledger attempts joined the store's counter.
        case proceed(PINWrap, folded: Int, ledger: PINLedger)
        case locked(folded: Int, ledger: PINLedger?)
        case notInitialized
    }

    /// What a PIN check reads of its token.
    private struct PINRow {
        var wrap: PINWrap?
        var failures: Int
        var locked: Bool
        var maxAttempts: Int
        var userPINInitialized: Bool
    }

    private func columns(_ role: TokenKey.Role) -> (prefix: String, failures: String, locked: String) {
        role == .user ? ("user", "user_failures", "user_locked") : ("so", "so_failures", "so_locked")
    }

    private func pinRow(_ id: TokenID, role: TokenKey.Role) throws -> PINRow {
        let c = columns(role)
        let rows = try db.query("""
            SELECT \(c.prefix)_salt, \(c.prefix)_kdf, \(c.prefix)_wrapped, \(c.failures), \(c.locked), max_attempts,
                   user_pin_initialized, present
            FROM tokens WHERE token_id = ?
            """, [.text(id.description)]) { s in
            (PINRow(wrap: s.isNull(2) ? nil : PINWrap(salt: s.blob(0), cost: s.text(1), wrapped: s.blob(2)),
                    failures: Int(s.int(3)), locked: s.int(4) != 0, maxAttempts: Int(s.int(5)),
                    userPINInitialized: s.int(6) != 0),
             s.int(7) != 0)
        }
        // A removed token is absent, as if it were not in the store.
        guard let (row, present) = rows.first, present else { throw KeychainError.tokenNotFound }
        return row
    }

    /// Verifies a PIN and returns the token key, counting failures in the store.
    func unlock(_ id: TokenID, pin: [UInt8], role: TokenKey.Role) throws -> TokenKey {
        guard !inTransaction else { throw KeychainError.invalidArgument("a PIN cannot be checked inside a transaction") }
        let c = columns(role)
        // A token sealed to a TPM is opened there first: on another machine
        // (or with the PCRs changed) that fails before any PIN is counted.
        let binding = try bindingSecret(id)
        let tcti = tpmSite()
        if let row = try? read({ try pinRow(id, role: role) }), let wrap = row.wrap, wrap.cost == PINWrap.tpmSealCost {
            return try unlockTPM(id, pin: pin, role: role, row: row, wrap: wrap, site: tcti)
        }
        let charge: Charge
        do {
            charge = try write {
                let row = try pinRow(id, role: role)
                if role == .user && !row.userPINInitialized { return .notInitialized }
                guard let wrap = row.wrap else { return role == .user ? .notInitialized : .locked(folded: 0, ledger: nil) }
                if row.locked { return .locked(folded: 0, ledger: nil) }
                // Attempts counted while the store could not be written join its counter now.
                let ledger = PINLedger(store: self, token: id, role: role, salt: wrap.salt)
                let pending = try ledger.pending()
                if row.failures + pending >= row.maxAttempts {
                    try db.run("UPDATE tokens SET \(c.locked) = 1, \(c.failures) = \(c.failures) + ? WHERE token_id = ?",
                               [.int(Int64(pending)), .text(id.description)])
                    return .locked(folded: pending, ledger: ledger)
                }
                try db.run("UPDATE tokens SET \(c.failures) = \(c.failures) + 1 + ? WHERE token_id = ?",
                           [.int(Int64(pending)), .text(id.description)])
                return .proceed(wrap, folded: pending, ledger: ledger)
            }
        } catch let error as KeychainError where error.isWriteImpossible {
            return try unlockCountingElsewhere(id, pin: pin, role: role, cause: error, binding: binding, tcti: tcti)
        }
        let wrap: PINWrap
        switch charge {
        case .locked(let folded, let ledger):
            if folded > 0 { ledger?.release(folded) }
            throw KeychainError.pinLocked
        case .notInitialized: throw KeychainError.pinNotInitialized
        case .proceed(let w, let folded, let ledger):
            if folded > 0 { ledger.release(folded) }
            wrap = w
        }
        let opened: [UInt8]?
        do {
            opened = try wrap.unwrap(pin: pin, token: id, role: role, binding: binding, tcti: tcti)
        } catch {
            // The TPM could not judge the PIN (absent, locked out): no attempt was made.
            _ = try? write {
                try db.run("UPDATE tokens SET \(c.failures) = MAX(0, \(c.failures) - 1) WHERE token_id = ?", [.text(id.description)])
            }
            throw error
        }
        if var keyBytes = opened {
            defer { wipe(&keyBytes) }
            do {
                try write {
                    try db.run("UPDATE tokens SET \(c.failures) = 0 WHERE token_id = ? AND \(c.locked) = 0", [.text(id.description)])
                }
            } catch let error as KeychainError where error.isWriteImpossible {
                // The disk filled up since the charge: the PIN was right, so
                // log in; the counter stays one high until a later good login.
            }
            return try TokenKey(tokenID: id, role: role, bytes: keyBytes)
        }
        let remaining: Int
        do {
            remaining = try write {
                let r = try db.query("SELECT \(c.failures), max_attempts FROM tokens WHERE token_id = ?", [.text(id.description)]) {
                    (Int($0.int(0)), Int($0.int(1)))
                }
                guard let (failures, maxAttempts) = r.first else { throw KeychainError.tokenNotFound }
                if failures >= maxAttempts {
                    try db.run("UPDATE tokens SET \(c.locked) = 1 WHERE token_id = ?", [.text(id.description)])
                }
                return max(0, maxAttempts - failures)
            }
        } catch let error as KeychainError where error.isWriteImpossible {
            // The failure is charged already; the next attempt sets the lock.
            let row = try read { try pinRow(id, role: role) }
            remaining = max(0, row.maxAttempts - row.failures)
        }
        throw KeychainError.pinIncorrect(remaining: remaining)
    }

    /// A TPM token's PIN is judged by the TPM, whose dictionary-attack
    /// protection counts and limits wrong ones across every process and every
    /// copy of the store; nothing needs charging here first. The store's
    /// counter only follows, for the PKCS #11 flags: a good login with no
    /// failures recorded writes nothing (two durable writes less per C_Login).
    private func unlockTPM(_ id: TokenID, pin: [UInt8], role: TokenKey.Role, row: PINRow, wrap: PINWrap,
                           site: TPMSite) throws -> TokenKey {
        let c = columns(role)
        if role == .user && !row.userPINInitialized { throw KeychainError.pinNotInitialized }
        if row.locked { throw KeychainError.pinLocked }
        if var keyBytes = try wrap.unwrap(pin: pin, token: id, role: role, tcti: site) {
            defer { wipe(&keyBytes) }
            if row.failures > 0 {
                _ = try? write { try db.run("UPDATE tokens SET \(c.failures) = 0 WHERE token_id = ?", [.text(id.description)]) }
            }
            return try TokenKey(tokenID: id, role: role, bytes: keyBytes)
        }
        // A store that cannot be written still answers: the TPM has counted the attempt.
        let remaining = (try? write { () throws -> Int in
            try db.run("UPDATE tokens SET \(c.failures) = \(c.failures) + 1 WHERE token_id = ?", [.text(id.description)])
            let r = try db.query("SELECT \(c.failures), max_attempts FROM tokens WHERE token_id = ?", [.text(id.description)]) {
                (Int($0.int(0)), Int($0.int(1)))
            }
            guard let (failures, maxAttempts) = r.first else { throw KeychainError.tokenNotFound }
            if failures >= maxAttempts {
                try db.run("UPDATE tokens SET \(c.locked) = 1 WHERE token_id = ?", [.text(id.description)])
            }
            return max(0, maxAttempts - failures)
        }) ?? max(0, row.maxAttempts - row.failures - 1)
        throw KeychainError.pinIncorrect(remaining: remaining)
    }

    /// A PIN check on a store that cannot record it (read-only mount, full
    /// disk): the attempt is charged to the PINLedger before the KDF, on top
    /// of the store's own count, and the ledger is cleared when the PIN is right. If the
    /// ledger cannot be written either, the login is refused: a correct PIN
    /// then cannot log in, but no guess goes uncounted.
    private func unlockCountingElsewhere(_ id: TokenID, pin: [UInt8], role: TokenKey.Role, cause: KeychainError,
                                         binding: [UInt8]?, tcti: TPMSite) throws -> TokenKey {
        let row = try read { try pinRow(id, role: role) }
        if role == .user && !row.userPINInitialized { throw KeychainError.pinNotInitialized }
        guard let wrap = row.wrap else { throw role == .user ? KeychainError.pinNotInitialized : KeychainError.pinLocked }
        if row.locked { throw KeychainError.pinLocked }
        let limit = row.maxAttempts - row.failures
        let ledger = PINLedger(store: self, token: id, role: role, salt: wrap.salt)
        let charged: Bool
        do {
            charged = try ledger.charge(limit: limit)
        } catch {
            let why = "cannot count this PIN attempt: the store cannot be written (\(cause)) and \(error); "
                + "the login is refused so that PIN guessing stays bounded"
            if case .storeFull = cause { throw KeychainError.storeFull(why) }
            throw KeychainError.storage(why)
        }
        guard charged else { throw KeychainError.pinLocked }
        if var keyBytes = try wrap.unwrap(pin: pin, token: id, role: role, binding: binding, tcti: tcti) {
            defer { wipe(&keyBytes) }
            // As a good login clears the store's counter, it clears the
            // ledger; the store's own count waits for a writable login.
            ledger.release(limit)
            return try TokenKey(tokenID: id, role: role, bytes: keyBytes)
        }
        let used = (try? ledger.pending()) ?? limit
        throw KeychainError.pinIncorrect(remaining: max(0, limit - used))
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
        let wrap = try makeWrap(id, tokenKey: key.keyBytes, pin: newPIN, role: role)
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

    /// A new wrap of the token key under a PIN, of the token's kind: sealed in
    /// the TPM for a TPM token, scrypt (with the sealed secret if device-bound) otherwise.
    private func makeWrap(_ id: TokenID, tokenKey: [UInt8], pin: [UInt8], role: TokenKey.Role) throws -> PINWrap {
        guard let rec = try token(id) else { throw KeychainError.tokenNotFound }
        if isTPMToken(rec) {
            return try PINWrap.makeTPM(tokenKey: tokenKey, pin: pin, token: id, role: role, tcti: tpmSite())
        }
        var binding = try bindingSecret(id)
        defer { if binding != nil { wipe(&binding!) } }
        return try PINWrap.make(tokenKey: tokenKey, pin: pin, token: id, role: role, log2N: kdfLog2N, binding: binding)
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
        let so = try makeWrap(id, tokenKey: tokenKey, pin: soPIN, role: .securityOfficer)
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
