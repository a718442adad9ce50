#if canImport(Glibc)
import Glibc
#endif
import KeyshareCrypto
import Synchronization

/// The fork gate: what makes fork() safe while other threads are inside the
/// PKCS #11 module (docs/reliability-findings.md, "Fork with busy threads").
///
/// A forked child has only the forking thread. Any lock another thread held
/// at the fork (SQLite's global mutexes, OpenSSL's, the Swift runtime's, the
/// module's own) stays held in the child for good, so a child that calls
/// C_Initialize could hang. Every module entry point therefore holds the
/// gate's shared side (`enter`/`leave`, one atomic add each), and the
/// pthread_atfork prepare handler closes it: new entries wait, and the
/// handler waits until the last thread inside has left. At the fork no module
/// thread is then inside SQLite, OpenSSL or the runtime; the parent handler
/// reopens the gate and the child handler starts it afresh.
///
/// Rules for code inside the module:
/// - Never block for long while inside: a fork would wait as long. Waits
///   that can last (C_WaitForSlotEvent's sleep, waiting for a card-poller
///   child) run in `outside { }`, which must not hold any store or module
///   lock and must not use the store.
/// - Nested entries (the same thread entering again) pass without waiting:
///   the depth is per thread, so a waiting fork cannot deadlock on them.
/// - A thread that forks from inside the module (only a card module's own
///   code could) cannot wait for itself: the gate then waits only for the
///   other threads and reports the fork as not quiesced.
///
/// posix_spawn (the card poller, Tokens/ChildProcess.swift) runs no atfork
/// handler in glibc ≥ 2.24 (clone with CLONE_VM|CLONE_VFORK), so a thread
/// inside the module may spawn without meeting its own gate.
public enum ForkGate {
    /// Threads inside the module (a thread's nested entries count once).
    private static let inside = Atomic<Int>(0)
    /// True from a fork's prepare handler to its parent or child handler.
    private static let closed = Atomic<Bool>(false)
    /// Where entrants wait during a fork and the forking thread waits for the last one out.
    private static let room = WaitRoom()
    /// This thread's nesting depth: 0 outside the module.
    private static let depthKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    private static var depth: Int {
        get { Int(bitPattern: pthread_getspecific(depthKey)) }
        set { pthread_setspecific(depthKey, UnsafeRawPointer(bitPattern: newValue)) }
    }

    /// Whether the calling thread is inside the module.
    public static var isInside: Bool { depth > 0 }

    /// A module call begins. Waits only while a fork is being prepared.
    public static func enter() {
        let d = depth
        if d == 0 { admit() }
        depth = d + 1
    }

    /// A module call ends.
    public static func leave() {
        let d = depth - 1
        depth = d
        if d == 0 { release() }
    }

    /// Runs `body` with this thread counted outside the module, so a fork
    /// need not wait for it (a sleep, a wait for a child process). `body`
    /// must hold no store or module lock and must not use the store: a fork
    /// may close the store connection meanwhile.
    public static func outside<T>(_ body: () throws -> T) rethrows -> T {
        let d = depth
        guard d > 0 else { return try body() }
        depth = 0
        release()
        defer {
            admit()
            depth = d
        }
        return try body()
    }

    private static func admit() {
        while true {
            inside.wrappingAdd(1, ordering: .sequentiallyConsistent)
            if !closed.load(ordering: .sequentiallyConsistent) { return }
            // A fork is being prepared: step back out and wait for it.
            release()
            room.lock()
            while closed.load(ordering: .sequentiallyConsistent) { room.wait() }
            room.unlock()
        }
    }

    private static func release() {
        inside.wrappingSubtract(1, ordering: .sequentiallyConsistent)
        // Sequentially consistent with the preparer's store of `closed` and
        // its load of `inside`: either it sees this thread gone, or this
        // thread sees the gate closed and wakes it (under the room's lock,
        // so the wake cannot fall between its check and its wait).
        if closed.load(ordering: .sequentiallyConsistent) {
            room.lock()
            room.broadcast()
            room.unlock()
        }
    }

    /// The prepare handler: closes the gate and waits until no other thread
    /// is inside. True when no thread at all is inside (the calling one
    /// included), so module state may be put aside for the fork.
    public static func closeForFork() -> Bool {
        let mine = depth > 0 ? 1 : 0
        room.lock()
        closed.store(true, ordering: .sequentiallyConsistent)
        while inside.load(ordering: .sequentiallyConsistent) > mine { room.wait() }
        room.unlock()
        return mine == 0
    }

    /// The parent handler: the waiting entrants go on.
    public static func reopenAfterFork() {
        room.lock()
        closed.store(false, ordering: .sequentiallyConsistent)
        room.broadcast()
        room.unlock()
    }

    /// The child handler: the only thread is this one. The room's mutex and
    /// condition are made anew (the parent's waiters do not exist here).
    public static func resetInChild() {
        room.reinitialize()
        inside.store(depth > 0 ? 1 : 0, ordering: .sequentiallyConsistent)
        closed.store(false, ordering: .sequentiallyConsistent)
    }
}

/// A pthread mutex and condition variable that can be made anew in a forked child.
private final class WaitRoom: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() { reinitialize() }

    func reinitialize() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(cond, nil)
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
    func wait() { pthread_cond_wait(cond, mutex) }
    func broadcast() { pthread_cond_broadcast(cond) }
}

/// The store side of a fork: with every module thread out (ForkGate), each
/// open store closes its SQLite connection, so the child inherits nothing
/// SQLite-owned for the keychain file.
///
/// Why close rather than just not use: SQLite keeps one in-process record
/// per database file (unixInodeInfo, the WAL-index's unixShmNode) holding
/// the POSIX locks it believes it has. A child inherits that memory but not
/// the locks (fcntl locks belong to a process). A connection the child opens
/// on the same file would find the inherited record and skip taking the
/// shared and DMS locks it believes are held; once the parent exits, another
/// process could then checkpoint and delete the WAL or reinitialise the
/// shared memory under the child. With no connection open at the fork there
/// is no record to inherit, and the child's C_Initialize opens from scratch.
///
/// The parent reopens lazily, on the next statement (SQLiteConnection.resume);
/// the close never checkpoints or deletes the WAL (NO_CKPT_ON_CLOSE), and the
/// child never closes a connection of the parent's.
public enum ForkSafety {
    private static let registry = StoreRegistry()

    static func register(_ store: KeychainStore) { registry.add(store) }

    /// Closes every open store connection of this process (the prepare
    /// handler, after ForkGate.closeForFork reported every thread out).
    public static func suspendStores() {
        for store in registry.live() { store.suspendConnection() }
    }

    /// How many store connections are open (tests).
    public static var openConnections: Int { registry.live().filter(\.connectionIsOpen).count }
}

extension KeychainStore {
    func suspendConnection() { lock.withLock { db.suspend() } }
    var connectionIsOpen: Bool { lock.withLock { db.isOpen } }
}

/// Weak references to the stores of this process.
private final class StoreRegistry: @unchecked Sendable {
    private struct Entry { weak var store: KeychainStore? }
    private let lock = Lock()
    private var entries: [Entry] = []

    func add(_ store: KeychainStore) {
        lock.withLock {
            entries.removeAll { $0.store == nil }
            entries.append(Entry(store: store))
        }
    }

    func live() -> [KeychainStore] { lock.withLock { entries.compactMap(\.store) } }
}
