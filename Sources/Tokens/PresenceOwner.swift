#if canImport(Glibc)
import Glibc
#endif
import Keychain
import KeyshareCrypto

/// The designated watcher of external tokens: at most one process per store
/// holds an exclusive lock on `<home>/presence.lock`, and while it lives it
/// alone records which cards are present (docs/architecture.md, "Who decides
/// that a card is present"). `keyshare token watch` takes it; the per-user
/// agent will. The kernel drops the lock when the holder dies, however it
/// dies, so a crashed watcher never leaves a stale claim.
public final class PresenceOwner: @unchecked Sendable {
    private let path: String
    private let lock = Lock()
    private var fd: Int32 = -1  // guarded by `lock`

    public init(store: KeychainStore) {
        path = store.home + "/presence.lock"
    }

    /// Tries to become the designated watcher; true when this process holds it.
    @discardableResult
    public func acquire() -> Bool {
        lock.withLock {
            if fd >= 0 { return true }
            let f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard f >= 0 else { return false }
            guard flock(f, LOCK_EX | LOCK_NB) == 0 else {
                close(f)
                return false
            }
            fd = f
            return true
        }
    }

    public var isHeld: Bool { lock.withLock { fd >= 0 } }

    public func release() {
        lock.withLock {
            guard fd >= 0 else { return }
            close(fd)  // drops the flock
            fd = -1
        }
    }

    deinit { release() }

    /// Whether some other process is the designated watcher now (one
    /// open + flock attempt; no lock file means no watcher ever ran).
    public static func watcherAlive(store: KeychainStore) -> Bool {
        let f = open(store.home + "/presence.lock", O_RDONLY | O_CLOEXEC)
        guard f >= 0 else { return false }
        defer { close(f) }
        if flock(f, LOCK_SH | LOCK_NB) == 0 {
            flock(f, LOCK_UN)
            return false
        }
        return errno == EWOULDBLOCK
    }
}
