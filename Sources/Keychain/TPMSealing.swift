import KeyshareCrypto
import KeyshareTPM

/// TPM failures as the store reports them (docs/tpm.md).
enum TPMErrors {
    static func keychainError(_ e: TPMError, _ token: TokenID) -> KeychainError {
        switch e.kind {
        case .unreachable:
            return .tpmUnavailable("token \(token) needs the TPM, and \(e)")
        case .lockout:
            return .tpmLockout
        case .foreignObject:
            return .deviceBound("token \(token) is sealed to another TPM (another machine, or this TPM was cleared since): "
                + "it cannot be opened here, even with the right PIN")
        case .policyFailed:
            return .deviceBound("token \(token) is sealed to this machine's boot state (PCRs), which has changed: "
                + "it cannot be opened until the PCRs are back to their bound values")
        default:
            return .storage("token \(token): \(e)")
        }
    }

    static func map<T>(_ token: TokenID, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let e as TPMError {
            throw keychainError(e, token)
        }
    }
}

/// A soft token sealed to this machine: a 32-byte secret sealed in the TPM
/// (optionally to PCR values) that both PIN wraps need besides the PIN.
struct TokenBinding {
    var pcrs: [Int]
    var blob: [UInt8]

    static let version: UInt8 = 1

    var encoded: [UInt8] {
        let mask = pcrs.reduce(UInt32(0)) { $0 | 1 << UInt32($1) }
        return [Self.version, UInt8(mask >> 24), UInt8(mask >> 16 & 0xFF), UInt8(mask >> 8 & 0xFF), UInt8(mask & 0xFF)] + blob
    }

    init(pcrs: [Int], blob: [UInt8]) {
        self.pcrs = pcrs.sorted()
        self.blob = blob
    }

    init?(_ bytes: [UInt8]) {
        guard bytes.count > 5, bytes[0] == Self.version else { return nil }
        let mask = UInt32(bytes[1]) << 24 | UInt32(bytes[2]) << 16 | UInt32(bytes[3]) << 8 | UInt32(bytes[4])
        self.init(pcrs: (0..<24).filter { mask & 1 << UInt32($0) != 0 }, blob: Array(bytes[5...]))
    }
}

extension KeychainStore {
    // MARK: where the TPM is

    /// The TCTI recorded in the store (`keyshare tpm config --tcti`), if any.
    public func configuredTCTI() throws -> String? {
        try read {
            try db.query("SELECT value FROM meta WHERE key = 'tpm-tcti'") { String(decoding: $0.blob(0), as: UTF8.self) }.first
        }
    }

    public func setConfiguredTCTI(_ tcti: String?) throws {
        try write {
            if let tcti, !tcti.isEmpty {
                try db.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('tpm-tcti', ?)", [.blob(Array(tcti.utf8))])
            } else {
                try db.run("DELETE FROM meta WHERE key = 'tpm-tcti'")
            }
        }
    }

    /// KEYSHARE_TCTI, else the store's setting, else /dev/tpmrm0.
    public func tpmTCTI() -> String {
        TPMLocation.tcti(configured: (try? configuredTCTI()) ?? nil)
    }

    /// The TPM and the lock file its users in this store take turns with (TPMSite).
    public func tpmSite() -> TPMSite {
        TPMSite(tcti: tpmTCTI(), lockFile: home + "/tpm.lock")
    }

    // MARK: device binding of soft tokens

    func bindingLocked(_ id: TokenID) throws -> TokenBinding? {
        try db.query("SELECT value FROM meta WHERE key = ?", [.text("binding:" + id.description)]) { TokenBinding($0.blob(0)) }
            .first ?? nil
    }

    /// The PCRs a soft token is bound with ([] for none), or nil when it is not bound to a TPM.
    public func tokenBindingPCRs(_ id: TokenID) throws -> [Int]? {
        try read { try bindingLocked(id) }?.pcrs
    }

    /// The sealed secret of a bound token, unsealed by the TPM (nil when not bound).
    func bindingSecret(_ id: TokenID) throws -> [UInt8]? {
        guard let b = try read({ try bindingLocked(id) }) else { return nil }
        let tcti = tpmSite()
        return try TPMErrors.map(id) { try TPM.with(tcti) { try $0.unseal(b.blob, pcrs: b.pcrs) } }
    }

    /// A fresh secret sealed in this TPM. Its own authorization is empty and it
    /// is `noDA`: the PIN is checked (and counted) by the store's wrap.
    func newBinding(_ id: TokenID, pcrs: [Int]) throws -> (secret: [UInt8], binding: TokenBinding) {
        let secret = try SecureRandom.bytes(32)
        let tcti = tpmSite()
        let blob = try TPMErrors.map(id) { try TPM.with(tcti) { try $0.seal(secret, noDA: true, pcrs: pcrs) } }
        return (secret, TokenBinding(pcrs: pcrs, blob: blob))
    }

    /// Binds a soft token to this machine's TPM (`pcrs` non-nil, [] for no PCR
    /// policy) or unbinds it (nil). Both wraps are remade, so both PINs are
    /// needed: the SO PIN authorises, the user PIN (if set) re-wraps the user's copy.
    public func setTokenBinding(_ id: TokenID, soPIN: [UInt8], userPIN: [UInt8]?, pcrs: [Int]?) throws {
        guard let rec = try token(id) else { throw KeychainError.tokenNotFound }
        guard rec.kdfCost != PINWrap.tpmSealCost else {
            throw KeychainError.invalidArgument("token \(id) is a TPM token: its keys live in the TPM already")
        }
        let soKey = try unlockSO(id, pin: soPIN)
        if rec.userPINInitialized {
            guard let userPIN else { throw KeychainError.invalidArgument("re-wrapping the user's copy of the token key needs the user PIN") }
            let userKey = try unlockUser(id, pin: userPIN)
            guard userKey.keyBytes == soKey.keyBytes else { throw KeychainError.storage("the user and SO wraps hold different keys") }
        }
        let fresh = try pcrs.map { try newBinding(id, pcrs: $0) }
        let so = try PINWrap.make(tokenKey: soKey.keyBytes, pin: soPIN, token: id, role: .securityOfficer, log2N: kdfLog2N,
                                  binding: fresh?.secret)
        let user = try rec.userPINInitialized ? userPIN.map {
            try PINWrap.make(tokenKey: soKey.keyBytes, pin: $0, token: id, role: .user, log2N: kdfLog2N, binding: fresh?.secret)
        } : nil
        try write {
            guard try checkKey(soKey) else { throw KeychainError.invalidArgument("the token was re-initialised meanwhile") }
            try db.run("UPDATE tokens SET so_salt = ?, so_kdf = ?, so_wrapped = ? WHERE token_id = ?",
                       [.blob(so.salt), .text(so.cost), .blob(so.wrapped), .text(id.description)])
            if let user {
                try db.run("UPDATE tokens SET user_salt = ?, user_kdf = ?, user_wrapped = ? WHERE token_id = ?",
                           [.blob(user.salt), .text(user.cost), .blob(user.wrapped), .text(id.description)])
            }
            if let b = fresh?.binding {
                try db.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [.text("binding:" + id.description), .blob(b.encoded)])
            } else {
                try db.run("DELETE FROM meta WHERE key = ?", [.text("binding:" + id.description)])
            }
        }
    }

    // MARK: TPM tokens

    /// A TPM token: the token key sealed in the TPM twice, under the user
    /// PIN's and the SO PIN's derived authorization (dictionary-attack
    /// protected), so the store holds nothing a PIN can be tested against.
    public func createTPMToken(_ id: TokenID, label: String, soPIN: [UInt8], userPIN: [UInt8], serial: String,
                               maxPINAttempts: Int = 10, consent: TokenConsent = .off) throws -> TokenRecord {
        var tokenKey = try SecureRandom.bytes(AESGCM.keySize)
        defer { wipe(&tokenKey) }
        let tcti = tpmSite()
        let so = try PINWrap.makeTPM(tokenKey: tokenKey, pin: soPIN, token: id, role: .securityOfficer, tcti: tcti)
        let user = try PINWrap.makeTPM(tokenKey: tokenKey, pin: userPIN, token: id, role: .user, tcti: tcti)
        return try write {
            guard try tokenLocked(id) == nil else { throw KeychainError.tokenExists }
            let slot = try allocateSlot(id)
            try db.run("""
                INSERT INTO tokens (token_id, label, serial, slot_id, present, created, user_salt, user_kdf, user_wrapped,
                    so_salt, so_kdf, so_wrapped, user_pin_initialized, max_attempts, consent)
                VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
                """, [
                    .text(id.description), .text(label), .text(serial), .int(Int64(slot)), .int(Self.now()),
                    .blob(user.salt), .text(user.cost), .blob(user.wrapped), .blob(so.salt), .text(so.cost), .blob(so.wrapped),
                    .int(Int64(maxPINAttempts)), .int(consent == .ask ? 1 : 0),
                ])
            try storeCanary(id, tokenKey: tokenKey)
            try bumpPresence(id)
            guard let rec = try tokenLocked(id) else { throw KeychainError.storage("token vanished after insert") }
            return rec
        }
    }

    /// Whether a token's keys live in the TPM.
    public func isTPMToken(_ rec: TokenRecord) -> Bool { rec.kdfCost == PINWrap.tpmSealCost }
}
