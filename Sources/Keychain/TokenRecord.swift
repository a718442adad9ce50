import KeyshareCrypto

/// Whether the agent asks before a program uses a token's private keys
/// (docs/agent.md, "Consent").
public enum TokenConsent: String, Sendable, Equatable, CaseIterable {
    /// A program with no allow rule for the token is asked about at its first
    /// use of each key (a pinentry CONFIRM).
    case ask
    /// No question: what the policy allows is used as is.
    case off
}

/// What the store knows about a token, without any key material.
public struct TokenRecord: Sendable, Equatable {
    public var tokenID: TokenID
    public var label: String
    public var serial: String
    /// Stable across processes and restarts, unique, never given to another token.
    public var slotID: UInt
    public var present: Bool
    /// False for tokens of other PKCS #11 modules (their PINs live there).
    public var hasPINs: Bool
    public var userPINInitialized: Bool
    public var userPINFailures: Int
    public var soPINFailures: Int
    public var userPINLocked: Bool
    public var soPINLocked: Bool
    public var maxPINAttempts: Int
    /// The user wrap's KDF cost (`scrypt$N$r$p`), empty without a user PIN.
    public var kdfCost: String
    /// Unix seconds.
    public var created: Int64
    /// Whether the agent asks the person before a program uses one of the
    /// token's private keys (`keyshare token set --consent`, docs/agent.md
    /// "Consent"). Off for tokens made before schema 5 and by C_InitToken.
    public var consent: TokenConsent = .off

    public var userPINRemaining: Int { max(0, maxPINAttempts - userPINFailures) }
    public var soPINRemaining: Int { max(0, maxPINAttempts - soPINFailures) }
}

extension KeychainStore {
    static let tokenColumns = """
        token_id, label, serial, slot_id, present, so_wrapped IS NOT NULL, user_pin_initialized,
        user_failures, so_failures, user_locked, so_locked, max_attempts, COALESCE(user_kdf, ''), created, consent
        """

    static func tokenRecord(_ s: Statement) -> TokenRecord? {
        guard let id = TokenID(s.text(0)) else { return nil }
        return TokenRecord(
            tokenID: id, label: s.text(1), serial: s.text(2), slotID: UInt(s.int(3)), present: s.int(4) != 0,
            hasPINs: s.int(5) != 0, userPINInitialized: s.int(6) != 0, userPINFailures: Int(s.int(7)),
            soPINFailures: Int(s.int(8)), userPINLocked: s.int(9) != 0, soPINLocked: s.int(10) != 0,
            maxPINAttempts: Int(s.int(11)), kdfCost: s.text(12), created: s.int(13),
            consent: s.int(14) == 1 ? .ask : .off)
    }

    public func tokens() throws -> [TokenRecord] {
        try read {
            try db.query("SELECT \(Self.tokenColumns) FROM tokens ORDER BY created, token_id") { Self.tokenRecord($0) }
                .compactMap { $0 }
        }
    }

    public func token(_ id: TokenID) throws -> TokenRecord? {
        try read { try tokenLocked(id) }
    }

    func tokenLocked(_ id: TokenID) throws -> TokenRecord? {
        try db.query("SELECT \(Self.tokenColumns) FROM tokens WHERE token_id = ?", [.text(id.description)]) {
            Self.tokenRecord($0)
        }.first ?? nil
    }

    public func token(slotID: UInt) throws -> TokenRecord? {
        try read {
            try db.query("SELECT \(Self.tokenColumns) FROM tokens WHERE slot_id = ?", [.int(Int64(slotID))]) {
                Self.tokenRecord($0)
            }.first ?? nil
        }
    }

    /// A soft token: a fresh random token key wrapped under the SO PIN and,
    /// if given, the user PIN. The scrypt work happens before the write lock.
    public func createToken(_ id: TokenID, label: String, soPIN: [UInt8], userPIN: [UInt8]?,
                            serial: String? = nil, maxPINAttempts: Int = 10, bindPCRs: [Int]? = nil,
                            consent: TokenConsent = .off) throws -> TokenRecord {
        guard !inTransaction else { throw KeychainError.invalidArgument("createToken cannot run inside a transaction") }
        guard maxPINAttempts > 0 else { throw KeychainError.invalidArgument("maxPINAttempts must be positive") }
        var tokenKey = try SecureRandom.bytes(AESGCM.keySize)
        defer { wipe(&tokenKey) }
        // Sealed to this machine's TPM: both wraps also need the sealed secret (docs/tpm.md).
        var fresh = try bindPCRs.map { try newBinding(id, pcrs: $0) }
        defer { if fresh != nil { wipe(&fresh!.secret) } }
        let so = try PINWrap.make(tokenKey: tokenKey, pin: soPIN, token: id, role: .securityOfficer, log2N: kdfLog2N,
                                  binding: fresh?.secret)
        let user = try userPIN.map {
            try PINWrap.make(tokenKey: tokenKey, pin: $0, token: id, role: .user, log2N: kdfLog2N, binding: fresh?.secret)
        }
        return try write {
            guard try tokenLocked(id) == nil else { throw KeychainError.tokenExists }
            let slot = try allocateSlot(id)
            try db.run("""
                INSERT INTO tokens (token_id, label, serial, slot_id, present, created, user_salt, user_kdf, user_wrapped,
                    so_salt, so_kdf, so_wrapped, user_pin_initialized, max_attempts, consent)
                VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, [
                    .text(id.description), .text(label), .text(serial ?? String(id.instance.prefix(16))),
                    .int(Int64(slot)), .int(Self.now()),
                    user.map { .blob($0.salt) } ?? .null, user.map { .text($0.cost) } ?? .null,
                    user.map { .blob($0.wrapped) } ?? .null,
                    .blob(so.salt), .text(so.cost), .blob(so.wrapped), .int(user == nil ? 0 : 1),
                    .int(Int64(maxPINAttempts)), .int(consent == .ask ? 1 : 0),
                ])
            try storeCanary(id, tokenKey: tokenKey)
            if let b = fresh?.binding {
                try db.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [.text("binding:" + id.description), .blob(b.encoded)])
            }
            try bumpPresence(id)
            guard let rec = try tokenLocked(id) else { throw KeychainError.storage("token vanished after insert") }
            return rec
        }
    }

    /// A token of another PKCS #11 module (no key of ours, no PINs): created
    /// on first sight, marked present again on later ones, keeping its slot ID.
    @discardableResult
    public func registerExternalToken(_ id: TokenID, label: String, serial: String) throws -> TokenRecord {
        try write {
            if let old = try tokenLocked(id) {
                try db.run("UPDATE tokens SET present = 1, label = ?, serial = ? WHERE token_id = ?",
                           [.text(label), .text(serial), .text(id.description)])
                if !old.present { try bumpPresence(id) }
            } else {
                try bumpPresence(id)
                let slot = try allocateSlot(id)
                try db.run("INSERT INTO tokens (token_id, label, serial, slot_id, present, created) VALUES (?, ?, ?, ?, 1, ?)",
                           [.text(id.description), .text(label), .text(serial), .int(Int64(slot)), .int(Self.now())])
            }
            guard let rec = try tokenLocked(id) else { throw KeychainError.storage("token vanished after insert") }
            return rec
        }
    }

    /// Slot IDs come from a hash of the token ID so they are stable everywhere;
    /// a collision probes upward. Every ID handed out is recorded for good, so
    /// a slot never names a different token, even after deletion. IDs start at
    /// 0x100: the module keeps the low numbers (its free slot) for itself.
    func allocateSlot(_ id: TokenID) throws -> UInt {
        let owned = try db.query("SELECT slot_id FROM used_slot_ids WHERE token_id = ? ORDER BY slot_id LIMIT 1",
                                 [.text(id.description)]) { UInt($0.int(0)) }
        if let slot = owned.first { return slot }
        let h = DigestAlgorithm.sha256.hash(Array(id.description.utf8))
        var slot = (UInt(h[0]) << 24 | UInt(h[1]) << 16 | UInt(h[2]) << 8 | UInt(h[3])) & 0x7FFF_FFFF
        if slot < 0x100 { slot += 0x100 }
        func used(_ slot: UInt) throws -> Bool {
            try !db.query("SELECT 1 FROM used_slot_ids WHERE slot_id = ?", [.int(Int64(slot))]) { _ in true }.isEmpty
        }
        while try used(slot) {
            slot = slot >= 0x7FFF_FFFF ? 0x100 : slot + 1
        }
        try db.run("INSERT INTO used_slot_ids (slot_id, token_id) VALUES (?, ?)", [.int(Int64(slot)), .text(id.description)])
        return slot
    }

    /// Removes the token and all its items; their references are retired.
    public func deleteToken(_ id: TokenID) throws {
        try write {
            guard let rec = try tokenLocked(id) else { throw KeychainError.tokenNotFound }
            if rec.present { try bumpPresence(id) }
            // Derived references (external tokens) always name the same card object: not retired.
            try db.run("INSERT OR IGNORE INTO retired_refs (pref) SELECT pref FROM items WHERE token_id = ? AND substr(pref, 1, 1) = x'01'",
                       [.text(id.description)])
            try db.run("DELETE FROM items WHERE token_id = ?", [.text(id.description)])
            try db.run("DELETE FROM tokens WHERE token_id = ?", [.text(id.description)])
            try db.run("DELETE FROM meta WHERE key = ?", [.text("canary:" + id.description)])
            try db.run("DELETE FROM meta WHERE key = ?", [.text("binding:" + id.description)])
        }
    }

    /// Removal hides the token's items (references give itemNotFound) without
    /// deleting them, so they resolve again when the token comes back.
    public func setPresent(_ id: TokenID, _ present: Bool) throws {
        try write {
            guard let rec = try tokenLocked(id) else { throw KeychainError.tokenNotFound }
            guard rec.present != present else { return }
            try db.run("UPDATE tokens SET present = ? WHERE token_id = ?", [.int(present ? 1 : 0), .text(id.description)])
            try bumpPresence(id)
        }
    }

    /// `keyshare token set --consent ask|off`; the agent reads it at each use.
    public func setConsent(_ id: TokenID, _ consent: TokenConsent) throws {
        try write {
            try db.run("UPDATE tokens SET consent = ? WHERE token_id = ?", [.int(consent == .ask ? 1 : 0), .text(id.description)])
            guard db.changes == 1 else { throw KeychainError.tokenNotFound }
        }
    }

    public func setLabel(_ id: TokenID, _ label: String) throws {
        try write {
            try db.run("UPDATE tokens SET label = ? WHERE token_id = ?", [.text(label), .text(id.description)])
            guard db.changes == 1 else { throw KeychainError.tokenNotFound }
        }
    }
}
