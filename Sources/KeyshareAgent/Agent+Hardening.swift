#if canImport(Glibc)
import Glibc
#endif
import CLinux
import KeyshareCrypto

/// The agent process's own protection (docs/agent.md "Hardening").
extension Agent {
    /// Non-dumpable (no core, no same-uid ptrace or /proc/PID/mem), no core
    /// file, every page locked when RLIMIT_MEMLOCK allows it, else the key
    /// material alone (docs/reliability.md, "Agent: key material zeroed at
    /// logout"). Each choice is one log line.
    func harden() {
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
        if keyshare_set_dumpable(0) != 0 {
            AgentLog.line("warning: cannot make the agent non-dumpable")
        }
        // `keyshare agent` re-executed itself under these (AgentCommand):
        // freed memory keeps no key bytes, so what a logout drops is gone.
        AgentLog.line(keyshare_agent_heap_scrubbed() != 0
            ? "freed heap memory is overwritten (glibc malloc perturb, no tcache): dropped key copies do not linger"
            : "warning: glibc malloc tunables not in force: freed key copies may linger until reused")
        // mlockall only when the limit is large enough for the whole process:
        // with MCL_FUTURE, allocations past the limit would fail later.
        var lim = rlimit()
        getrlimit(__rlimit_resource_t(8) /* RLIMIT_MEMLOCK */, &lim)
        if lim.rlim_cur == rlim_t.max || lim.rlim_cur >= 1 << 30 {
            if mlockall(MCL_CURRENT | MCL_FUTURE) == 0 {
                AgentLog.line("all agent memory is locked (mlockall), key material included")
                return
            }
            AgentLog.line("mlockall failed: \(String(cString: strerror(errno)))")
        }
        lockKeyMaterial(limit: Int(lim.rlim_cur))
    }

    /// The part of RLIMIT_MEMLOCK the secure heap takes: half of it, at most
    /// 16 MiB (a power of two: 4 MiB under Debian's 8 MiB default, room for
    /// the private numbers of about 4,000 parsed RSA-2048 keys at once).
    static func lockedHeapSize(limit: Int) -> Int { min(limit / 2, 16 << 20) }

    /// Without mlockall: the private numbers of parsed keys (OpenSSL puts
    /// them in its secure heap once it exists) and the token keys
    /// (TokenKey) go to one locked arena, not swapped, not dumped, zeroed on
    /// free. Below 1 MiB of limit nothing is locked: a full arena makes a
    /// key parse fail, and a few hundred kilobytes would be too tight.
    func lockKeyMaterial(limit: Int) {
        let size = Self.lockedHeapSize(limit: limit)
        guard size >= 512 << 10 else {
            AgentLog.line("RLIMIT_MEMLOCK is \(limit) bytes: key material is not locked (needs 1 MiB; docs/agent.md)")
            return
        }
        switch LockedMemory.start(bytes: size) {
        case .locked:
            AgentLog.line("RLIMIT_MEMLOCK is \(limit) bytes, too small for mlockall: key material is locked "
                + "(\(size >> 10) KiB secure heap: token keys, private key numbers; decrypted PKCS #8 copies are not locked)")
        case .notLocked:
            AgentLog.line("key material is in a secure heap (zeroed on free, not dumped) but mlock failed: not locked")
        case .failed:
            AgentLog.line("RLIMIT_MEMLOCK is \(limit) bytes: the secure heap failed; key material is not locked")
        }
    }
}
