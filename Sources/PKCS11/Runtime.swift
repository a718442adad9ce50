import CPKCS11
import Keychain
import KeyshareCrypto

/// Everything one C_Initialize .. C_Finalize span owns: the store connection
/// and the per-process tables (slots, sessions, logins, object handles).
///
/// `lock` guards the tables only and is held for dictionary work, never
/// across store I/O, a KDF or a signature; each session has its own lock for
/// its operation state.
public final class Runtime: @unchecked Sendable {
    public let store: KeychainStore
    let lock = Lock()

    // Guarded by `lock` (the hot ones without the runtime's exclusivity
    // check, which the lock makes redundant: Session.swift says why).
    @exclusivity(unchecked) var slotCache = SlotCache()
    @exclusivity(unchecked) var sessions: [CK_SESSION_HANDLE: Session] = [:] { didSet { lastSession = nil } }
    /// The session `session(_:)` found last: an application works in one
    /// session at a time, and this spares the dictionary's hash and probe
    /// on every call. Any change of `sessions` (open, close, removal,
    /// finalize) clears it, so it is always one of `sessions`' values.
    @exclusivity(unchecked) var lastSession: Session?
    var nextSessionHandle: CK_SESSION_HANDLE = 1
    @exclusivity(unchecked) var logins: [TokenID: LoginState] = [:] { didSet { objectGeneration &+= 1 } }
    @exclusivity(unchecked) var objects = ObjectTable() { didSet { objectGeneration &+= 1 } }
    /// Moves with every change of `objects` and `logins` (their didSet,
    /// which leaves the mutation in place) and of a session object's
    /// attributes: what a session's resolved-key memo is checked against
    /// (ResolvedKeyMemo.swift). Guarded by `lock`.
    @exclusivity(unchecked) var objectGeneration: UInt64 = 0
    var closed = false
    /// External (PKCS #11 driver) tokens' card sessions; see ExternalTokens.swift.
    var external = ExternalState()
    /// Slots with a present token as last reported by C_WaitForSlotEvent.
    var slotEventBaseline: Set<CK_SLOT_ID> = []
    /// C_GetOperationState's saved states (OperationState.swift); its own lock.
    let savedStates = SavedStateTable()
    /// The last secret key's attribute set by template (SecretKeyTemplateMemo.swift); its own lock.
    let secretKeyMemo = SecretKeyTemplateMemo()
    /// Tokens this application may not see (the agent's policy, SharedLogin.swift):
    /// no slot, and their slot IDs are CKR_SLOT_ID_INVALID. Set once at creation.
    let hidden: @Sendable (TokenID) -> Bool
    /// Shared unlocks this application ended with C_Logout: token -> the
    /// unlock generation it declined (SharedLogin.swift). Guarded by `lock`.
    var declinedShared: [TokenID: UInt64] = [:]
    /// The number of the agent's newest unlock table applied here
    /// (SharedLogin.swift): older ones are dropped. Guarded by `lock`.
    var sharedSnapshot: UInt64 = 0
    /// The agent's prompt for this client (Prompt.swift); nil in-process. Set once at creation.
    let prompt: ClientPrompt?
    /// Keys this runtime was allowed to use by the consent check (Prompt.swift). Guarded by `lock`.
    var consented: Set<PersistentReference> = []

    init(home: String?, accessGroups: AccessGroupChoice = .process, handleBase: CK_ULONG = 1,
         hidden: @escaping @Sendable (TokenID) -> Bool = { _ in false }, prompt: ClientPrompt? = nil,
         emptyView: Bool = false) throws {
        store = emptyView ? try KeychainStore(emptyViewOf: home) : try KeychainStore(home: home)
        self.hidden = hidden
        self.prompt = prompt
        switch accessGroups {
        case .process:
            // KEYSHARE_ACCESS_GROUPS confines this process: other groups' items are absent.
            try store.bindToProcessAccessGroups()
        case .all:
            break
        case .groups(let groups, let newItems):
            try store.bind(accessGroups: groups, newItems: newItems)
        }
        nextSessionHandle = handleBase
        objects = ObjectTable(firstHandle: handleBase)
        slotEventBaseline = Set(try store.tokens().filter { $0.present && !hidden($0.tokenID) }.map { CK_SLOT_ID($0.slotID) })
    }

    /// C_Finalize: sessions end and unlocked token keys are dropped now, not
    /// when the last in-flight call lets go of the runtime.
    func shutdown() {
        let dropped = lock.withLock { () -> [Session] in
            closed = true
            let all = Array(sessions.values)
            sessions.removeAll()
            logins.removeAll()
            objects.removeAll()
            return all
        }
        for s in dropped { s.endAll() }
        shutdownExternal()  // card sessions closed, then the card modules finalized (ExternalTokens.swift)
    }

    // MARK: - lookups shared by the chapters

    public func session(_ handle: CK_SESSION_HANDLE) throws -> Session {
        // The common case in one lock: the store unchanged since the slot
        // list was last read, so `presentTokens` would answer from its
        // cache and close nothing (every call pays this, twice for an
        // Init + Encrypt pair).
        if let counter = try? store.changeCounter(), let s = try lock.withLock({ () throws -> Session? in
            guard slotCache.counter == counter else { return nil }
            if let l = lastSession, l.handle == handle { return l }
            guard let s = sessions[handle] else { throw PKCS11Error.sessionHandleInvalid }
            lastSession = s
            return s
        }) {
            return s
        }
        // Notices a token removed by another process (one PRAGMA when nothing
        // changed): its sessions are closed, so this handle is then invalid.
        _ = try? presentTokens()
        return try lock.withLock { () throws -> Session in
            guard let s = sessions[handle] else { throw PKCS11Error.sessionHandleInvalid }
            return s
        }
    }

    func login(for token: TokenID) -> LoginState? {
        lock.withLock { logins[token] }
    }

    /// The unlocked user key, the one that shows private objects.
    func userKey(for token: TokenID) -> TokenKey? {
        lock.withLock { () -> TokenKey? in
            guard let l = logins[token], l.role == .user else { return nil }
            return l.key
        }
    }

    func sessionState(_ s: Session) -> CK_STATE {
        let role = lock.withLock { logins[s.tokenID]?.role }
        switch (role, s.readWrite) {
        case (nil, false): return CKS_RO_PUBLIC_SESSION
        case (nil, true): return CKS_RW_PUBLIC_SESSION
        case (.user?, false): return CKS_RO_USER_FUNCTIONS
        case (.user?, true): return CKS_RW_USER_FUNCTIONS
        case (.securityOfficer?, _): return CKS_RW_SO_FUNCTIONS
        }
    }
}

/// The login of one token, shared by all of this process's sessions on it
/// (PKCS #11 login is per application and token, not per session).
struct LoginState {
    var role: TokenKey.Role
    var key: TokenKey
    /// Set when the login is the agent's cross-process unlock (`keyshare
    /// unlock`, SharedLogin.swift): the unlock's generation, not a C_Login.
    var shared: UInt64? = nil
}
