#if canImport(Glibc)
import Glibc
#endif
import CPKCS11
import Keychain
import KeyshareCrypto
import Tokens

/// The slot that always shows an uninitialised token: C_InitToken on it
/// creates a new soft token, which then appears in a slot of its own. The
/// store hands token slots IDs from 0x100 up, so 1 can never name a token.
public let freeSlotID: CK_SLOT_ID = 1

public let minPINLength = 4
public let maxPINLength = 255

/// Slot IDs of present tokens, refreshed only when the store's change
/// counter moves (another process may have added or removed a token).
struct SlotCache {
    var counter: UInt64?
    var records: [TokenRecord] = []
}

public struct SlotInfo: Sendable, Equatable {
    public var description: String
    public var manufacturer: String
    public var flags: CK_FLAGS
}

public struct TokenInfo: Sendable, Equatable {
    public var label: String
    public var manufacturer: String
    public var model: String
    public var serial: String
    public var flags: CK_FLAGS
    public var sessionCount: CK_ULONG
    public var rwSessionCount: CK_ULONG
    public var minPINLength: CK_ULONG
    public var maxPINLength: CK_ULONG
}

extension Runtime {
    /// Present tokens, re-read only when the store changed.
    func presentTokens() throws -> [TokenRecord] {
        let counter = try store.changeCounter()
        if let cached = lock.withLock({ slotCache.counter == counter ? slotCache.records : nil }) { return cached }
        let records = try store.tokens().filter { $0.present && !hidden($0.tokenID) }
        let ended = lock.withLock { () -> [Session] in
            let gone = Set(slotCache.records.map(\.tokenID)).subtracting(records.map(\.tokenID))
            slotCache = SlotCache(counter: counter, records: records)
            return closeSessionsLocked { gone.contains($0.tokenID) }
        }
        for s in ended { s.endAll() }
        return records
    }

    /// Every slot shows a token (a present token, or the free slot's
    /// uninitialised one), so `tokenPresent` does not change the list.
    public func slotList(tokenPresent: Bool) throws -> [CK_SLOT_ID] {
        syncExternalTokens()  // cards of configured modules (ExternalTokens.swift)
        let recs = try presentTokens()
        // A TPM token without its TPM is not present here (TPMKeys.swift).
        let tpmOK = !recs.contains { TPMToken.isTPM($0.tokenID) } || tpmReachable()
        return recs.filter { tpmOK || !TPMToken.isTPM($0.tokenID) }.map { CK_SLOT_ID($0.slotID) } + [freeSlotID]
    }

    /// The token in a slot, or CKR_SLOT_ID_INVALID; nil for the free slot.
    /// A removed token's slot still answers C_GetSlotInfo (without
    /// CKF_TOKEN_PRESENT) so a caller told of the removal can look; every
    /// other call on it is CKR_TOKEN_NOT_PRESENT.
    func tokenRecord(slot: CK_SLOT_ID) throws -> TokenRecord? {
        if slot == freeSlotID { return nil }
        guard let rec = try store.token(slotID: UInt(slot)), !hidden(rec.tokenID) else { throw PKCS11Error.slotIDInvalid }
        guard rec.present else { throw PKCS11Error.tokenNotPresent }
        if TPMToken.isTPM(rec.tokenID) && !tpmReachable() { throw PKCS11Error.tokenNotPresent }
        return rec
    }

    public func slotInfo(_ slot: CK_SLOT_ID) throws -> SlotInfo {
        if slot != freeSlotID, let rec = try store.token(slotID: UInt(slot)), !rec.present, !hidden(rec.tokenID) {
            return SlotInfo(description: "keyshare token \(rec.tokenID.instance) (removed)",
                            manufacturer: ModuleInfo.manufacturer, flags: CKF_REMOVABLE_DEVICE)
        }
        guard let rec = try tokenRecord(slot: slot) else {
            return SlotInfo(description: "keyshare free slot (C_InitToken creates a token)",
                            manufacturer: ModuleInfo.manufacturer, flags: CKF_TOKEN_PRESENT)
        }
        let kind = TPMToken.isTPM(rec.tokenID) ? "TPM token" : rec.hasPINs ? "soft token" : "external token"
        return SlotInfo(description: "keyshare \(kind) \(rec.tokenID.instance)", manufacturer: ModuleInfo.manufacturer,
                        flags: CKF_TOKEN_PRESENT | CKF_REMOVABLE_DEVICE)
    }

    public func tokenInfo(_ slot: CK_SLOT_ID) throws -> TokenInfo {
        guard let rec = try tokenRecord(slot: slot) else {
            return TokenInfo(label: "", manufacturer: ModuleInfo.manufacturer, model: "keyshare soft", serial: "",
                             flags: CKF_RNG | CKF_LOGIN_REQUIRED, sessionCount: 0, rwSessionCount: 0,
                             minPINLength: CK_ULONG(minPINLength), maxPINLength: CK_ULONG(maxPINLength))
        }
        let (count, rw, shared) = lock.withLock { () -> (Int, Int, Bool) in
            let mine = sessions.values.filter { $0.tokenID == rec.tokenID }
            return (mine.count, mine.filter(\.readWrite).count, logins[rec.tokenID]?.shared != nil)
        }
        var flags = Self.tokenFlags(rec, writeProtected: store.readOnly != nil)
        // Unlocked by the agent for this application (SharedLogin.swift): it
        // need not log in, so hosts that log in whenever the flag is set
        // (pkcs11-tool, libp11, the OpenSSL provider) do not ask for a PIN.
        if shared { flags &= ~CKF_LOGIN_REQUIRED }
        // The agent can ask for the PIN itself (Prompt.swift): C_Login(NULL)
        // then gets it from a pinentry on the client's display or terminal.
        if promptsForPIN(rec) { flags |= CKF_PROTECTED_AUTHENTICATION_PATH }
        return TokenInfo(label: rec.label, manufacturer: ModuleInfo.manufacturer,
                         model: rec.hasPINs ? "keyshare soft" : "keyshare ext", serial: rec.serial,
                         flags: flags, sessionCount: CK_ULONG(count), rwSessionCount: CK_ULONG(rw),
                         minPINLength: CK_ULONG(minPINLength), maxPINLength: CK_ULONG(maxPINLength))
    }

    /// The PIN flags come straight from the store's counters, which every
    /// process shares, so they are truthful across processes.
    ///
    /// CKF_DUAL_CRYPTO_OPERATIONS (PKCS #11 3.0 §3.2, CK_TOKEN_INFO): the four
    /// dual functions of §5.17 run on every token (DualFunction.swift), so
    /// callers that look at this flag before using them may.
    ///
    /// CKF_WRITE_PROTECTED: the store could only be opened read-only (a
    /// read-only mount, a full disk: KeychainStore.readOnly). Sessions may
    /// still be opened read/write, because hosts such as pkcs11-tool and libp11
    /// open R/W sessions only to sign; each write then fails with
    /// CKR_TOKEN_WRITE_PROTECTED (or CKR_DEVICE_MEMORY on a full disk).
    static func tokenFlags(_ rec: TokenRecord, writeProtected: Bool = false) -> CK_FLAGS {
        var f: CK_FLAGS = CKF_RNG | CKF_TOKEN_INITIALIZED | CKF_DUAL_CRYPTO_OPERATIONS
        if writeProtected { f |= CKF_WRITE_PROTECTED }
        // External tokens: the card asks for its user PIN (ExternalTokens.swift).
        guard rec.hasPINs else { return f | CKF_LOGIN_REQUIRED | CKF_USER_PIN_INITIALIZED }
        f |= CKF_LOGIN_REQUIRED
        if rec.userPINInitialized { f |= CKF_USER_PIN_INITIALIZED }
        if rec.userPINLocked {
            f |= CKF_USER_PIN_LOCKED
        } else if rec.userPINFailures > 0 {
            f |= CKF_USER_PIN_COUNT_LOW
            if rec.userPINRemaining == 1 { f |= CKF_USER_PIN_FINAL_TRY }
        }
        if rec.soPINLocked {
            f |= CKF_SO_PIN_LOCKED
        } else if rec.soPINFailures > 0 {
            f |= CKF_SO_PIN_COUNT_LOW
            if rec.soPINRemaining == 1 { f |= CKF_SO_PIN_FINAL_TRY }
        }
        return f
    }

    /// One slot whose token appeared or disappeared since the last report
    /// (or since C_Initialize), or nil. Polls the store's change counter, so
    /// it notices other processes' insertions and removals.
    public func pollSlotEvent() throws -> CK_SLOT_ID? {
        syncExternalTokens()  // cards of configured modules, at most once a second (ExternalTokens.swift)
        let now = Set(try presentTokens().map { CK_SLOT_ID($0.slotID) })
        return lock.withLock { () -> CK_SLOT_ID? in
            guard let changed = now.symmetricDifference(slotEventBaseline).min() else { return nil }
            slotEventBaseline.formSymmetricDifference([changed])
            return changed
        }
    }

    /// C_WaitForSlotEvent. A blocking wait polls a few times a second and
    /// ends with CKR_CRYPTOKI_NOT_INITIALIZED when C_Finalize runs meanwhile.
    public func waitForSlotEvent(block: Bool) throws -> CK_SLOT_ID {
        while true {
            if lock.withLock({ closed }) { throw PKCS11Error.notInitialized }
            if let slot = try pollSlotEvent() { return slot }
            guard block else { throw PKCS11Error(CKR_NO_EVENT) }
            // Not inside the module while asleep: a fork need not wait (ForkGate).
            ForkGate.outside { _ = usleep(200_000) }
        }
    }

    static func checkPINLength(_ pin: [UInt8]) throws {
        guard pin.count >= minPINLength, pin.count <= maxPINLength else { throw PKCS11Error.pinLenRange }
    }

    /// On the free slot: a new soft token whose user PIN is not set yet (the
    /// SO sets it with C_InitPIN). On a token: SO PIN check, then every object
    /// is wiped and the user PIN is uninitialised again.
    @discardableResult
    public func initToken(slot: CK_SLOT_ID, soPIN: [UInt8], label: String) throws -> TokenRecord {
        try Self.checkPINLength(soPIN)
        guard let rec = try tokenRecord(slot: slot) else {
            // The same ID and serial form as TokenManager.createSoftToken, but
            // without a user PIN: the SO sets it with C_InitPIN.
            let serial = ObjectTemplates.hex(try SecureRandom.bytes(8))
            guard let id = TokenID(driverClass: SoftToken.driverClass, instance: serial) else { throw PKCS11Error.generalError }
            return try store.createToken(id, label: label, soPIN: soPIN, userPIN: nil, serial: serial)
        }
        guard rec.hasPINs else { throw PKCS11Error.functionNotSupported }
        let busy = lock.withLock { sessions.values.contains { $0.tokenID == rec.tokenID } }
        if busy { throw PKCS11Error(CKR_SESSION_EXISTS) }
        try store.reinitializeToken(rec.tokenID, soPIN: soPIN, label: label)
        lock.withLock {
            logins[rec.tokenID] = nil
            objects.forget(token: rec.tokenID)
        }
        return try store.token(rec.tokenID) ?? rec
    }

    public func initPIN(session handle: CK_SESSION_HANDLE, pin: [UInt8]) throws {
        let s = try session(handle)
        guard let l = login(for: s.tokenID), l.role == .securityOfficer, s.readWrite else {
            throw PKCS11Error.userNotLoggedIn
        }
        try Self.checkPINLength(pin)
        try store.initUserPIN(s.tokenID, soKey: l.key, newPIN: pin)
    }

    /// The SO changes the SO PIN; anyone else (user or public session)
    /// changes the user PIN, as the spec's session-state table says.
    public func setPIN(session handle: CK_SESSION_HANDLE, old: [UInt8], new: [UInt8]) throws {
        let s = try session(handle)
        guard s.readWrite else { throw PKCS11Error.sessionReadOnly }
        try Self.checkPINLength(new)
        if login(for: s.tokenID)?.role == .securityOfficer {
            try store.changeSOPIN(s.tokenID, old: old, new: new)
        } else {
            try store.changeUserPIN(s.tokenID, old: old, new: new)
        }
    }
}
