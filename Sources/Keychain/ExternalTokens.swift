import KeyshareCrypto

/// Store support for tokens that come and go: external (PKCS #11 driver)
/// tokens, whose items are copies that must vanish with the card, and the
/// driver configuration, kept in the `meta` table so no schema change is
/// needed (rows `driver:<name>` = module path, `driver-status:<name>`,
/// `driver-env:<name>` = its variables, DriverEnvironment; an older
/// keyshare ignores that row).
extension KeychainStore {
    /// An external token disappeared: every item of it is deleted (their
    /// derived references are not retired, so the same card gets them back),
    /// and the token record stays, absent, to keep its slot ID.
    public func withdrawExternalToken(_ id: TokenID) throws {
        try write {
            guard let rec = try tokenLocked(id) else { throw KeychainError.tokenNotFound }
            guard !rec.hasPINs else { throw KeychainError.invalidArgument("\(id) is a soft token") }
            try db.run("DELETE FROM items WHERE token_id = ?", [.text(id.description)])
            try db.run("UPDATE tokens SET present = 0 WHERE token_id = ?", [.text(id.description)])
            try db.run("DELETE FROM meta WHERE key = ?", [.text("mirror:" + id.description)])
            if rec.present { try bumpPresence(id) }
        }
    }

    /// The digest of what was last mirrored for an external token (its items'
    /// references and attributes), so a poll of an unchanged card writes nothing.
    public func mirrorDigest(_ id: TokenID) throws -> [UInt8]? {
        try read {
            try db.query("SELECT value FROM meta WHERE key = ?", [.text("mirror:" + id.description)]) { $0.blob(0) }.first
        }
    }

    public func setMirrorDigest(_ id: TokenID, _ digest: [UInt8]) throws {
        try write {
            try db.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [.text("mirror:" + id.description), .blob(digest)])
        }
    }

    /// Every insertion or removal (creation and deletion included) bumps the
    /// token's presence generation, so a watcher that polls too slowly to see
    /// a quick remove+insert still learns that both happened.
    func bumpPresence(_ id: TokenID) throws {
        try db.run("""
            INSERT INTO meta (key, value) VALUES (?, 1)
            ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1
            """, [.text("presence:" + id.description)])
    }

    /// Token ID -> (present now, presence generation), for every token ever
    /// seen (a deleted token stays listed, absent), in one cheap query.
    public func presence() throws -> [TokenID: (present: Bool, generation: Int64)] {
        try read {
            var out: [TokenID: (present: Bool, generation: Int64)] = [:]
            let rows = try db.query("""
                SELECT substr(m.key, 10), CAST(m.value AS INTEGER), COALESCE(t.present, 0)
                FROM meta m LEFT JOIN tokens t ON t.token_id = substr(m.key, 10)
                WHERE m.key >= 'presence:' AND m.key < 'presence;'
                """) { ($0.text(0), $0.int(1), $0.int(2) != 0) }
            for (id, gen, present) in rows {
                if let tid = TokenID(id) { out[tid] = (present, gen) }
            }
            return out
        }
    }

    /// References of every item of a token (present or not), without loading them.
    public func references(token id: TokenID) throws -> Set<PersistentReference> {
        try read {
            Set(try db.query("SELECT pref FROM items WHERE token_id = ?", [.text(id.description)]) {
                PersistentReference(bytes: $0.blob(0))
            }.compactMap { $0 })
        }
    }

    /// The token an item belongs to even while that token is removed, so a
    /// caller can say "insert token X again" instead of a bare "not found".
    public func owningToken(_ ref: PersistentReference) throws -> TokenRecord? {
        try read {
            guard let row = try itemRow(ref, includeAbsent: true) else { return nil }
            return try tokenLocked(row.tokenID)
        }
    }

    /// The login marker of an external token: the card checks the PIN, so
    /// there is no token key; this random key seals nothing (the token has
    /// no canary, so the store refuses it for writes) and only records, in
    /// the same place as soft tokens' logins, that the user is logged in.
    public func externalLoginKey(_ id: TokenID) throws -> TokenKey {
        guard let rec = try token(id), !rec.hasPINs else { throw KeychainError.tokenNotFound }
        return try TokenKey(tokenID: id, role: .user, bytes: try SecureRandom.bytes(32))
    }

    /// The keyshare executable that polls modules in a child process
    /// (`keyshare driver snapshot`), recorded by `driver add` so the PKCS #11
    /// module, which has no executable of its own, can use it too.
    public func driverHelper() throws -> String? {
        try read {
            try db.query("SELECT value FROM meta WHERE key = 'driver-helper'") { String(decoding: $0.blob(0), as: UTF8.self) }.first
        }
    }

    public func setDriverHelper(_ path: String) throws {
        guard try driverHelper() != path else { return }
        try write {
            try db.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('driver-helper', ?)", [.blob(Array(path.utf8))])
        }
    }

    // MARK: - driver configuration

    public struct DriverConfig: Sendable, Equatable {
        public var name: String
        public var modulePath: String
        /// Empty when fine; otherwise why the last poll failed (crash, hang, error).
        public var status: String
        /// The variables the module is given wherever it is loaded (DriverEnvironment).
        public var environment: [String: String]

        public init(name: String, modulePath: String, status: String, environment: [String: String] = [:]) {
            self.name = name
            self.modulePath = modulePath
            self.status = status
            self.environment = environment
        }
    }

    public func drivers() throws -> [DriverConfig] {
        try read {
            let rows = try db.query("SELECT key, value FROM meta WHERE key LIKE 'driver:%' ORDER BY key") {
                (String($0.text(0).dropFirst("driver:".count)), String(decoding: $0.blob(1), as: UTF8.self))
            }
            return try rows.map { name, path in
                let status = try db.query("SELECT value FROM meta WHERE key = ?", [.text("driver-status:" + name)]) {
                    String(decoding: $0.blob(0), as: UTF8.self)
                }.first ?? ""
                let env = try db.query("SELECT value FROM meta WHERE key = ?", [.text("driver-env:" + name)]) {
                    DriverEnvironment.decode($0.blob(0))
                }.first ?? [:]
                return DriverConfig(name: name, modulePath: path, status: status, environment: env)
            }
        }
    }

    public func addDriver(name: String, modulePath: String, environment: [String: String] = [:]) throws {
        if let why = DriverEnvironment.problem(environment) { throw KeychainError.invalidArgument(why) }
        try write {
            let exists = try !db.query("SELECT 1 FROM meta WHERE key = ?", [.text("driver:" + name)]) { _ in true }.isEmpty
            guard !exists else { throw KeychainError.invalidArgument("a driver named \(name) already exists") }
            try db.run("INSERT INTO meta (key, value) VALUES (?, ?)", [.text("driver:" + name), .blob(Array(modulePath.utf8))])
            try putDriverEnvironment(name, environment)
        }
    }

    /// Replaces a driver's variables (`keyshare driver set-env`).
    public func setDriverEnvironment(name: String, _ environment: [String: String]) throws {
        if let why = DriverEnvironment.problem(environment) { throw KeychainError.invalidArgument(why) }
        try write {
            let exists = try !db.query("SELECT 1 FROM meta WHERE key = ?", [.text("driver:" + name)]) { _ in true }.isEmpty
            guard exists else { throw KeychainError.invalidArgument("no driver named \(name)") }
            try putDriverEnvironment(name, environment)
        }
    }

    /// Called inside a write.
    private func putDriverEnvironment(_ name: String, _ environment: [String: String]) throws {
        if environment.isEmpty {
            try db.run("DELETE FROM meta WHERE key = ?", [.text("driver-env:" + name)])
        } else {
            try db.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                       [.text("driver-env:" + name), .blob(DriverEnvironment.encode(environment))])
        }
    }

    public func removeDriver(name: String) throws {
        try write {
            try db.run("DELETE FROM meta WHERE key = ?", [.text("driver:" + name)])
            guard db.changes == 1 else { throw KeychainError.invalidArgument("no driver named \(name)") }
            try db.run("DELETE FROM meta WHERE key = ?", [.text("driver-status:" + name)])
            try db.run("DELETE FROM meta WHERE key = ?", [.text("driver-env:" + name)])
        }
    }

    /// Records a driver's health only when it changes, so a steady poll does
    /// not write (and wake every process watching the change counter).
    public func setDriverStatus(name: String, _ status: String) throws {
        let current = try read {
            try db.query("SELECT value FROM meta WHERE key = ?", [.text("driver-status:" + name)]) {
                String(decoding: $0.blob(0), as: UTF8.self)
            }.first ?? ""
        }
        guard current != status else { return }
        try write {
            if status.isEmpty {
                try db.run("DELETE FROM meta WHERE key = ?", [.text("driver-status:" + name)])
            } else {
                try db.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                           [.text("driver-status:" + name), .blob(Array(status.utf8))])
            }
        }
    }
}
