import CPKCS11
import Keychain
import KeyshareCrypto

/// One PKCS #11 session. Its operation state has its own lock so a long
/// signature in one session never blocks another session or the tables.
public final class Session: @unchecked Sendable {
    public let handle: CK_SESSION_HANDLE
    public let slotID: CK_SLOT_ID
    public let tokenID: TokenID
    public let readWrite: Bool

    let lock = Lock()
    // Guarded by `lock`. `@exclusivity(unchecked)`: the lock already makes
    // every access exclusive; the runtime's own check of each access (a
    // thread-local access set) cost ~700 instructions per C_EncryptInit +
    // C_Encrypt pair over the hot properties here and in Runtime
    // (docs/benchmarks.md, issue 13).
    @exclusivity(unchecked) var operations = OperationTable()
    /// Kinds whose operation has had a C_*Update call.
    @exclusivity(unchecked) var multipart = OperationKindSet()
    /// Kinds whose operation a single-part call (a length query or
    /// CKR_BUFFER_TOO_SMALL) left active: only that call may finish it.
    @exclusivity(unchecked) var singlePart = OperationKindSet()
    /// The last keyed AEAD context of a single-part encryption (KeyedCipherCache.swift).
    let cipherCache = KeyedCipherCache()
    /// The last key `Runtime.resolveKey` resolved for this session (ResolvedKeyMemo.swift).
    let keyMemo = ResolvedKeyMemo()

    init(handle: CK_SESSION_HANDLE, slotID: CK_SLOT_ID, tokenID: TokenID, readWrite: Bool) {
        self.handle = handle
        self.slotID = slotID
        self.tokenID = tokenID
        self.readWrite = readWrite
    }

    func endAll() {
        lock.withLock {
            operations.removeAll()
            multipart.removeAll()
            singlePart.removeAll()
        }
        dropKeyedState()
    }
}

public struct SessionInfo: Sendable, Equatable {
    public var slotID: CK_SLOT_ID
    public var state: CK_STATE
    public var flags: CK_FLAGS
}

extension Runtime {
    public func openSession(slot: CK_SLOT_ID, flags: CK_FLAGS) throws -> CK_SESSION_HANDLE {
        guard flags & CKF_SERIAL_SESSION != 0 else { throw PKCS11Error(CKR_SESSION_PARALLEL_NOT_SUPPORTED) }
        guard let rec = try tokenRecord(slot: slot) else {
            // The free slot's token exists only to be initialised.
            throw PKCS11Error.tokenNotRecognized
        }
        let rw = flags & CKF_RW_SESSION != 0
        return try lock.withLock { () throws -> CK_SESSION_HANDLE in
            if !rw, logins[rec.tokenID]?.role == .securityOfficer { throw PKCS11Error(CKR_SESSION_READ_WRITE_SO_EXISTS) }
            let h = nextSessionHandle
            nextSessionHandle += 1
            sessions[h] = Session(handle: h, slotID: slot, tokenID: rec.tokenID, readWrite: rw)
            return h
        }
    }

    public func closeSession(_ handle: CK_SESSION_HANDLE) throws {
        let s = try lock.withLock { () throws -> Session in
            guard let s = sessions.removeValue(forKey: handle) else { throw PKCS11Error.sessionHandleInvalid }
            afterSessionsRemoved([s])
            return s
        }
        s.endAll()
    }

    public func closeAllSessions(slot: CK_SLOT_ID) throws {
        _ = try tokenRecord(slot: slot)
        let closed = lock.withLock { closeSessionsLocked { $0.slotID == slot } }
        for s in closed { s.endAll() }
    }

    /// Called with `lock` held. Also used when a token is seen removed: its
    /// sessions end, as if the token had been pulled from a reader.
    func closeSessionsLocked(where match: (Session) -> Bool) -> [Session] {
        let mine = sessions.values.filter(match)
        for s in mine { sessions[s.handle] = nil }
        afterSessionsRemoved(mine)
        return mine
    }

    /// Called with `lock` held: session objects die with their session, and
    /// the last session of a token logs the application out of it.
    private func afterSessionsRemoved(_ removed: [Session]) {
        for s in removed { objects.destroySessionObjects(of: s.handle) }
        // Other sessions of the token may hold those objects' keys (ResolvedKeyMemo.swift).
        for token in Set(removed.map(\.tokenID)) { dropKeyedStateLocked(token: token) }
        for token in Set(removed.map(\.tokenID)) where !sessions.values.contains(where: { $0.tokenID == token }) {
            logins[token] = nil
            objects.forgetPrivate(token: token)
            savedStates.forget(token: token)
        }
    }

    public func sessionInfo(_ handle: CK_SESSION_HANDLE) throws -> SessionInfo {
        let s = try session(handle)
        return SessionInfo(slotID: s.slotID, state: sessionState(s),
                           flags: CKF_SERIAL_SESSION | (s.readWrite ? CKF_RW_SESSION : 0))
    }

    /// The PIN check (a KDF, deliberately slow) runs without any lock; the
    /// state is checked before and again after, so two racing logins cannot
    /// both win. A PIN outside the bounds the token advertises (ulMinPinLen,
    /// ulMaxPinLen) cannot be right: CKR_PIN_LEN_RANGE before anything is
    /// counted, so a mistyped or truncated PIN costs no attempt (issue 28).
    ///
    /// `pin` nil is a NULL pPin: the PIN comes from the agent's prompt
    /// (Prompt.swift, the protected authentication path), asked only once
    /// every other check has passed (a login that cannot succeed shows no
    /// prompt), and zeroed after the check; without a prompt,
    /// CKR_ARGUMENTS_BAD, not counted.
    public func login(session handle: CK_SESSION_HANDLE, userType: CK_USER_TYPE, pin given: [UInt8]?) throws {
        let s = try session(handle)
        switch userType {
        case CKU_CONTEXT_SPECIFIC:
            guard userKey(for: s.tokenID) != nil else { throw PKCS11Error.userNotLoggedIn }
            let active = s.lock.withLock { !s.operations.isEmpty }
            guard active else { throw PKCS11Error.operationNotInitialized }
            var pin = try given ?? promptedPIN(try tokenForPrompt(s), .contextSpecific)
            defer { if given == nil { for i in pin.indices { pin[i] = 0 } } }
            if try store.token(s.tokenID)?.hasPINs ?? true { try Self.checkPINLength(pin) }
            _ = try store.unlockUser(s.tokenID, pin: pin)
            return
        case CKU_USER, CKU_SO:
            break
        default:
            throw PKCS11Error(CKR_USER_TYPE_INVALID)
        }
        let role: TokenKey.Role = userType == CKU_SO ? .securityOfficer : .user
        try checkCanLogin(s, role: role)
        guard let rec = try store.token(s.tokenID) else { throw PKCS11Error(CKR_DEVICE_REMOVED) }
        // An external token: the card checks the PIN (ExternalTokens.swift).
        guard rec.hasPINs else {
            guard let given else { throw PKCS11Error.argumentsBad }
            return try externalLogin(s, role: role, pin: given)
        }
        if role == .user, !rec.userPINInitialized { throw PKCS11Error(CKR_USER_PIN_NOT_INITIALIZED) }
        var pin = try given ?? promptedPIN(rec, role == .user ? .user : .securityOfficer)
        defer { if given == nil { for i in pin.indices { pin[i] = 0 } } }
        try Self.checkPINLength(pin)
        let key = role == .user ? try store.unlockUser(s.tokenID, pin: pin) : try store.unlockSO(s.tokenID, pin: pin)
        try lock.withLock { () throws in
            try checkCanLoginLocked(s, role: role)
            logins[s.tokenID] = LoginState(role: role, key: key)
            if role == .user { objects.loggedIn(token: s.tokenID) }
        }
    }

    /// The session's token record, for a prompt (none: the token is gone).
    private func tokenForPrompt(_ s: Session) throws -> TokenRecord {
        guard let rec = try store.token(s.tokenID) else { throw PKCS11Error(CKR_DEVICE_REMOVED) }
        return rec
    }

    private func checkCanLogin(_ s: Session, role: TokenKey.Role) throws {
        try lock.withLock { () throws in try checkCanLoginLocked(s, role: role) }
    }

    private func checkCanLoginLocked(_ s: Session, role: TokenKey.Role) throws {
        if let current = logins[s.tokenID] {
            // The agent's shared unlock: the application's own C_Login with
            // the user PIN (checked, counted) takes it over (SharedLogin.swift).
            let takesOver = current.shared != nil && role == .user
            if !takesOver {
                throw PKCS11Error(current.role == role ? CKR_USER_ALREADY_LOGGED_IN : CKR_USER_ANOTHER_ALREADY_LOGGED_IN)
            }
        }
        if role == .securityOfficer, sessions.values.contains(where: { $0.tokenID == s.tokenID && !$0.readWrite }) {
            throw PKCS11Error(CKR_SESSION_READ_ONLY_EXISTS)
        }
    }

    /// Logout drops the unlocked token key; handles of private objects become
    /// invalid and private session objects are destroyed, as the spec says.
    public func logout(session handle: CK_SESSION_HANDLE) throws {
        let s = try session(handle)
        let ended = try lock.withLock { () throws -> [Session] in
            guard let ended = logins.removeValue(forKey: s.tokenID) else { throw PKCS11Error.userNotLoggedIn }
            // Logging out of the agent's shared unlock ends it for this
            // application only, until the next `keyshare unlock` (SharedLogin.swift).
            if let generation = ended.shared { declinedShared[s.tokenID] = generation }
            objects.forgetPrivate(token: s.tokenID)
            return sessions.values.filter { $0.tokenID == s.tokenID }
        }
        // Operations on private keys cannot go on without the key, nor can
        // their saved states be restored (OperationState.swift).
        for t in ended { t.endAll() }
        savedStates.forget(token: s.tokenID)
        externalLogout(s.tokenID)  // an external token's card (ExternalTokens.swift)
    }
}
