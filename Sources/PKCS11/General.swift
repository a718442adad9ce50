#if canImport(Glibc)
import Glibc
#endif
import CPKCS11
import Keychain
import KeyshareCrypto

/// C_Initialize's arguments, decoded by the C layer.
public struct InitializeArguments: Sendable, Equatable {
    public var flags: CK_FLAGS
    /// How many of the four mutex callbacks were given (0 or 4 is valid).
    public var mutexCallbackCount: Int
    public var reservedIsNull: Bool
    public init(flags: CK_FLAGS = 0, mutexCallbackCount: Int = 0, reservedIsNull: Bool = true) {
        self.flags = flags
        self.mutexCallbackCount = mutexCallbackCount
        self.reservedIsNull = reservedIsNull
    }
}

/// The process-wide module state: initialised or not, and by which process.
///
/// Locking: the module always uses its own pthread mutexes. With
/// CKF_OS_LOCKING_OK that is what the spec asks; when an application gives
/// only mutex callbacks the spec wants them used, but on Linux the OS
/// primitives always exist and calling application code from inside the
/// module's critical sections is the deadlock the notes warn about, so the
/// callbacks are validated and never called.
///
/// Fork (docs/reliability-findings.md, "Fork with busy threads"): pthread_atfork
/// handlers are registered when the library is loaded
/// (pkcs11/abi/fork_handlers.c → `prepareForFork` / `parentAfterFork` /
/// `childAfterFork`). The prepare handler waits until no thread is inside the
/// module (Keychain.ForkGate) and closes the store connections, so the child
/// inherits no held lock and nothing SQLite-owned. In the child every call
/// then fails with CKR_CRYPTOKI_NOT_INITIALIZED until it calls C_Initialize,
/// which starts a fresh runtime. The inherited runtime is never used and
/// never torn down (its store connection is already closed; its tables may
/// hold keys the child has not logged in for).
public final class Module: @unchecked Sendable {
    public static let shared = Module()

    let lock = Lock()
    private var current: Runtime?
    private var inherited = false
    private var abandoned: [Runtime] = []
    /// The store and group binding this module's runtimes open with: nil and
    /// `.process` in the in-process module; the agent gives each client's
    /// Module the client's store and its (narrowed) access groups.
    private let home: String?
    private let accessGroups: AccessGroupChoice
    /// The first session and object handle of each runtime (the agent starts
    /// each client at a random base, so handles of a previous agent are
    /// invalid in a new one instead of naming other objects).
    private let handleBase: CK_ULONG
    /// Tokens the agent's policy hides from this client (docs/agent.md, "Policy").
    private let hidden: @Sendable (TokenID) -> Bool
    /// The agent's check that a store it opens is the one it serves (its
    /// device and inode, docs/agent.md "Which store"); throws to refuse it.
    private let storeCheck: (@Sendable (KeychainStore) throws -> Void)?
    /// The agent's prompt for this client (Prompt.swift: the protected
    /// authentication path, consent); nil in the in-process module.
    private let prompt: ClientPrompt?

    init() {
        home = nil
        accessGroups = .process
        handleBase = 1
        hidden = { _ in false }
        storeCheck = nil
        prompt = nil
    }

    /// A module for one agent client (docs/agent.md); `hidden` names the
    /// tokens its policy denies it (no slot, CKR_SLOT_ID_INVALID); `prompt`
    /// is the agent's prompt on the client's display (docs/agent.md, "The agent's prompt").
    public init(home: String?, accessGroups: AccessGroupChoice, handleBase: CK_ULONG,
                hidden: @escaping @Sendable (TokenID) -> Bool = { _ in false },
                storeCheck: (@Sendable (KeychainStore) throws -> Void)? = nil,
                prompt: ClientPrompt? = nil) {
        self.home = home
        self.accessGroups = accessGroups
        self.handleBase = max(1, handleBase)
        self.hidden = hidden
        self.storeCheck = storeCheck
        self.prompt = prompt
    }

    /// The module the calling thread serves: the agent sets one per client
    /// connection around each call (`withCurrent`); otherwise `shared`.
    public static var current: Module {
        guard let p = pthread_getspecific(currentKey) else { return shared }
        return Unmanaged<Module>.fromOpaque(p).takeUnretainedValue()
    }

    /// Runs `body` with `module` as this thread's current module.
    public static func withCurrent<T>(_ module: Module, _ body: () throws -> T) rethrows -> T {
        let previous = pthread_getspecific(currentKey)
        pthread_setspecific(currentKey, Unmanaged.passUnretained(module).toOpaque())
        defer { pthread_setspecific(currentKey, previous) }
        return try body()
    }

    private static let currentKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    public var isInitialized: Bool { lock.withLock { current != nil && !inherited } }

    /// - Parameter home: the store directory; nil uses KeychainStore's default rule (tests pass one).
    public func initialize(_ args: InitializeArguments?, home explicitHome: String? = nil) throws {
        if let args {
            guard args.reservedIsNull else { throw PKCS11Error.argumentsBad }
            guard args.mutexCallbackCount == 0 || args.mutexCallbackCount == 4 else { throw PKCS11Error.argumentsBad }
        }
        try lock.withLock { () throws in
            if current != nil {
                guard inherited else { throw PKCS11Error(CKR_CRYPTOKI_ALREADY_INITIALIZED) }
                if let old = current { abandoned.append(old) }
                current = nil
                inherited = false
            }
        }
        // Opening the store does I/O: outside the lock; a racing second
        // C_Initialize loses below and its runtime is simply dropped.
        let runtime: Runtime
        do {
            // No store yet: an empty view (the free slot, no token) that creates
            // nothing; the first call that needs a store makes it (runtimeCreatingStore).
            let where_ = explicitHome ?? home
            runtime = try Runtime(home: where_, accessGroups: accessGroups, handleBase: handleBase, hidden: hidden, prompt: prompt,
                                  emptyView: !KeychainStore.exists(home: where_))
            if !runtime.store.isEmptyView { try storeCheck?(runtime.store) }
        } catch {
            Log.message("C_Initialize: cannot open the keychain store: \(error)")
            throw PKCS11Error(CKR_DEVICE_ERROR)
        }
        try lock.withLock { () throws in
            guard current == nil else { throw PKCS11Error(CKR_CRYPTOKI_ALREADY_INITIALIZED) }
            current = runtime
        }
    }

    /// In-flight calls keep their own reference to the runtime and finish on
    /// it; new calls see CKR_CRYPTOKI_NOT_INITIALIZED at once.
    public func finalize(reservedIsNull: Bool = true) throws {
        guard reservedIsNull else { throw PKCS11Error.argumentsBad }
        let old = try lock.withLock { () throws -> Runtime in
            guard let rt = current, !inherited else { throw PKCS11Error.notInitialized }
            current = nil
            return rt
        }
        old.shutdown()
    }

    /// The pthread_atfork prepare handler: every module thread out (new
    /// calls wait), then every store connection closed. Returns whether the
    /// module was quiesced (not when the forking thread is itself inside it).
    @discardableResult
    public func prepareForFork() -> Bool {
        let quiesced = ForkGate.closeForFork()
        if quiesced { ForkSafety.suspendStores() }
        return quiesced
    }

    /// The parent handler: waiting calls go on; the store reopens on its next use.
    public func parentAfterFork() {
        ForkGate.reopenAfterFork()
    }

    /// The child handler: the runtime is the parent's, so the child must call
    /// C_Initialize, as the spec asks of a forked child ("Applications and
    /// processes": the child must call C_Initialize before using Cryptoki).
    public func childAfterFork() {
        ForkGate.resetInChild()
        lock.withLock { inherited = current != nil }
    }

    /// The live runtime, or CKR_CRYPTOKI_NOT_INITIALIZED (also in a forked child).
    public func runtime() throws -> Runtime {
        try lock.withLock { () throws -> Runtime in
            guard let rt = current, !inherited else { throw PKCS11Error.notInitialized }
            return rt
        }
    }

    /// The runtime, on a real store: where C_Initialize found no store
    /// (docs/agent.md, "No store, no agent"), the calls that need one
    /// (C_InitToken, C_OpenSession) create it here and carry on with a runtime
    /// on it; listing never does.
    public func runtimeCreatingStore() throws -> Runtime {
        let rt = try runtime()
        guard rt.store.isEmptyView else { return rt }
        let fresh: Runtime
        do {
            fresh = try Runtime(home: rt.store.home, accessGroups: accessGroups, handleBase: handleBase, hidden: hidden, prompt: prompt)
            try storeCheck?(fresh.store)
        } catch {
            Log.message("cannot create the keychain store \(rt.store.home): \(error)")
            throw PKCS11Error(CKR_DEVICE_ERROR)
        }
        let replaced = try lock.withLock { () throws -> Runtime? in
            guard let now = current, !inherited else { throw PKCS11Error.notInitialized }
            guard now === rt else { return nil }   // another thread upgraded first
            current = fresh
            return now
        }
        guard let old = replaced else { return try runtime() }
        old.shutdown()
        return fresh
    }
}

/// Which access groups a runtime's store handle is bound to.
public enum AccessGroupChoice: Sendable, Equatable {
    /// This process's KEYSHARE_ACCESS_GROUPS (the in-process module).
    case process
    /// Every group (no binding).
    case all
    /// Exactly these; new items go to `newItems`.
    case groups(Set<String>, newItems: String)
}

/// C_GetInfo's content, from the semantics side so tests can see it.
public struct ModuleInfo: Sendable {
    public static let cryptokiVersion = (major: UInt8(3), minor: UInt8(0))
    public static let manufacturer = "keyshare"
    /// Names the OpenSSL in use (issue 18): "keyshare, OpenSSL 3.5.9" (at most 32 characters).
    public static let description = String("keyshare, \(CryptoEngine.name)".prefix(32))
    public static let libraryVersion = (major: KeyshareVersion.major, minor: KeyshareVersion.minor)
}
