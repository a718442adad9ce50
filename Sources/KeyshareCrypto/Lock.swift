#if canImport(Glibc)
import Glibc
#endif

/// A pthread mutex rather than `Synchronization.Mutex`: Mutex's
/// priority-inheritance futexes collapse when threads outnumber cores and
/// ThreadSanitizer cannot see them (docs: building-the-module.md, Locking).
/// Recursive on request, because `KeychainStore.transaction` runs caller code
/// that calls back into the store on the same thread.
public final class Lock: @unchecked Sendable {
    /// Usable from inlinable code so `withLock` is specialized and inlined at
    /// every call site in the other modules: called generically it cost a
    /// metadata lookup and an indirect return per call, a dozen times per
    /// C_EncryptInit + C_Encrypt (docs/benchmarks.md, issue 13).
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init(recursive: Bool = false) {
        mutex = .allocate(capacity: 1)
        var attr = pthread_mutexattr_t()
        pthread_mutexattr_init(&attr)
        if recursive {
            pthread_mutexattr_settype(&attr, Int32(PTHREAD_MUTEX_RECURSIVE))
        }
        let rc = pthread_mutex_init(mutex, &attr)
        pthread_mutexattr_destroy(&attr)
        precondition(rc == 0, "pthread_mutex_init failed")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }

    @inlinable @inline(__always)
    public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
