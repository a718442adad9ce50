#if canImport(Glibc)
import Glibc
#endif
import AgentProtocol
import CLinux
import CPKCS11
import CPKCS11ABI
import KeySharing
import Keychain
import KeyshareCrypto
import PKCS11

/// `keyshare agent` (docs/agent.md): the one process per user that holds the
/// store, the logins, the unlocked keys and the card modules. Each client
/// process of the module (libkeyshare-pkcs11.so in agent mode) is one
/// `AgentClient` here with its own PKCS #11 `Module`, so logins and handles
/// stay per application as the spec requires; the calls run through the
/// same entry points the in-process module uses (ksa_serve).
public final class Agent: @unchecked Sendable {
    public struct Options: Sendable {
        /// Exit after this many seconds with no client connected (0: never).
        public var idleTimeout: Double
        /// Report readiness on this descriptor ('1' listening, '0' another agent runs).
        public var readyFD: Int32?
        public init(idleTimeout: Double = 600, readyFD: Int32? = nil) {
            self.idleTimeout = idleTimeout
            self.readyFD = readyFD
        }
    }

    let options: Options
    let lock = Lock()
    private var clients: [[UInt8]: AgentClient] = [:]
    private var connections = 0
    private var lastActivity = Agent.monotonic()
    private(set) var socketPath = ""
    private var listenFD: Int32 = -1
    private var activated = false
    /// `keyshare unlock`: resolved store home -> token -> its unlocked key
    /// (docs/agent.md, "Unlock across processes"). Guarded by `lock`.
    private var unlocked: [String: [TokenID: Unlocked]] = [:]
    private var unlockGeneration: UInt64 = 0

    struct Unlocked {
        let key: TokenKey
        let generation: UInt64
        let expires: Double
    }

    /// How long a connection thread polls for its client's next call before
    /// blocking (KEYSHARE_AGENT_SPIN_US of the agent's environment, read once;
    /// docs/agent.md "Round trips: bounded polling").
    let spinMicroseconds: UInt32 = ksa_spin_budget_us()
    /// Whether clients get a shared region for their frames (Sources/AgentProtocol/shm.c;
    /// KEYSHARE_AGENT_SHM=0 in the agent's environment: sockets only).
    let sharedRegions: Bool = ksa_shm_wanted() != 0

    public init(options: Options) { self.options = options }

    static func string(_ c: [CChar]) -> String {
        String(decoding: c.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func monotonic() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Hardens the process, takes the agent lock, listens and serves until idle.
    /// Returns the exit status.
    public func run() -> Int32 {
        // The call log is per client (the descriptor each client sends, docs/agent.md
        // "Debug log"): the starter's KEYSHARE_DEBUG must not log every client here.
        unsetenv("KEYSHARE_DEBUG")
        unsetenv("KEYSHARE_LOG")
        // The agent serves in-process: a copy of the module it loads (a
        // driver) or a helper it starts must never connect back to it.
        setenv("KEYSHARE_IN_PROCESS", "1", 1)
        harden()
        // Socket-activated: the directory (lock, pid file, log) is the one the
        // socket is in, whatever this process's environment says: a manager
        // that does not pass XDG_RUNTIME_DIR (systemd-socket-activate without
        // -E) would otherwise put the agent lock elsewhere than an
        // auto-started agent's, and two agents could serve one socket.
        let inherited = systemdSocket()
        if let fd = inherited, let path = Self.boundPath(fd) {
            setenv("KEYSHARE_AGENT_SOCKET", path, 1)
            // The manager made it (SocketMode= of the unit); the 0700 directory
            // is what protects it, but 0600 as when the agent binds it itself.
            chmod(path, 0o600)
        }
        var dirBuf = [CChar](repeating: 0, count: 512)
        var pathBuf = [CChar](repeating: 0, count: 128)
        guard ksa_agent_dir(&dirBuf, dirBuf.count) == 0, ksa_socket_path(&pathBuf, pathBuf.count) == 0 else {
            AgentLog.line("the agent's socket path is too long")
            return 1
        }
        let dir = Self.string(dirBuf)
        socketPath = Self.string(pathBuf)
        guard ksa_prepare_dir(dir, 1) == 0 else {
            AgentLog.line("refusing \(dir): \(String(cString: strerror(errno))) (it must be a directory owned by uid \(getuid()) with mode 0700)")
            return 1
        }
        // Exactly one agent: the lock is held for the agent's life; a loser exits 0.
        let lockFD = open(dir + "/agent.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard lockFD >= 0 else {
            AgentLog.line("cannot open \(dir)/agent.lock: \(String(cString: strerror(errno)))")
            return 1
        }
        guard flock(lockFD, LOCK_EX | LOCK_NB) == 0 else {
            AgentLog.line("another agent is running for \(dir); exiting")
            ready("0")
            return 0
        }
        if let fd = inherited {
            listenFD = fd
            activated = true
        } else {
            unlink(socketPath)
            listenFD = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var addr = sockaddr_un()
            addr.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &addr.sun_path) { raw in
                let bytes = Array(socketPath.utf8)
                raw.copyBytes(from: bytes.prefix(raw.count - 1))
            }
            let old = umask(0o177)
            let bound = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listenFD, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            umask(old)
            guard listenFD >= 0, bound == 0, listen(listenFD, 128) == 0 else {
                AgentLog.line("cannot listen on \(socketPath): \(String(cString: strerror(errno)))")
                return 1
            }
        }
        writePID(dir + "/agent.pid")
        AgentLog.line("listening on \(socketPath) (pid \(getpid()), idle timeout \(options.idleTimeout)s, poll \(spinMicroseconds) us, shared memory \(sharedRegions ? "on" : "off")\(activated ? ", socket-activated" : ""))")
        ready("1")
        serve()
        if !activated { unlink(socketPath) }
        unlink(dir + "/agent.pid")
        AgentLog.line("idle for \(options.idleTimeout)s with no client: exiting")
        return 0
    }

    /// Non-dumpable (no core, no same-uid ptrace or /proc/PID/mem), no core
    /// file, every page locked when RLIMIT_MEMLOCK allows it, else the key
    /// material alone (docs/reliability.md, "Agent: key material zeroed at
    /// logout"). Each choice is one log line.
    private func harden() {
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
    private func lockKeyMaterial(limit: Int) {
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

    private func ready(_ c: String) {
        guard let fd = options.readyFD else { return }
        _ = c.withCString { write(fd, $0, 1) }
        close(fd)
    }

    /// LISTEN_FDS from systemd (one socket, fd 3), for this very process.
    private func systemdSocket() -> Int32? {
        guard let fds = getenv("LISTEN_FDS").map({ String(cString: $0) }), fds == "1",
              let pid = getenv("LISTEN_PID").map({ String(cString: $0) }), pid_t(pid) == getpid() else { return nil }
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_PID")
        _ = fcntl(3, F_SETFD, FD_CLOEXEC)
        return 3
    }

    /// The filesystem path a listening Unix socket is bound to (nil: abstract or unnamed).
    static func boundPath(_ fd: Int32) -> String? {
        var addr = sockaddr_un()
        var len = socklen_t(MemoryLayout<sockaddr_un>.size)
        let rc = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        guard rc == 0, addr.sun_family == sa_family_t(AF_UNIX) else { return nil }
        let path = withUnsafeBytes(of: &addr.sun_path) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        return path.hasPrefix("/") ? path : nil
    }

    private func writePID(_ path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return }
        let s = "\(getpid())\n"
        _ = s.withCString { write(fd, $0, strlen($0)) }
        close(fd)
    }

    private func serve() {
        while true {
            var p = pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)
            let n = poll(&p, 1, 500)
            if n > 0 {
                let fd = keyshare_accept_cloexec(listenFD)
                if fd >= 0 { startConnection(fd) }
                continue
            }
            expireUnlocks()
            if options.idleTimeout > 0 {
                // An unlocked token keeps the agent (and so the unlock) alive until it expires.
                let idle = lock.withLock {
                    connections == 0 && unlocked.isEmpty && Agent.monotonic() - lastActivity >= options.idleTimeout
                }
                if idle { return }
            }
        }
    }

    private func startConnection(_ fd: Int32) {
        lock.withLock {
            connections += 1
            lastActivity = Agent.monotonic()
        }
        let box = Unmanaged.passRetained(ConnectionBox(agent: self, fd: fd)).toOpaque()
        var thread = pthread_t()
        var attr = pthread_attr_t()
        pthread_attr_init(&attr)
        pthread_attr_setdetachstate(&attr, Int32(PTHREAD_CREATE_DETACHED))
        let rc = pthread_create(&thread, &attr, { raw in
            let box = Unmanaged<ConnectionBox>.fromOpaque(raw!).takeRetainedValue()
            AgentConnection(agent: box.agent, fd: box.fd).run()
            return nil
        }, box)
        pthread_attr_destroy(&attr)
        if rc != 0 {
            Unmanaged<ConnectionBox>.fromOpaque(box).release()
            close(fd)
            connectionEnded()
        }
    }

    func connectionEnded() {
        lock.withLock {
            connections -= 1
            lastActivity = Agent.monotonic()
        }
    }

    // MARK: unlock across processes

    /// A store home as the unlock table keys it: symlinks resolved, so two
    /// spellings of one store share its unlock; nil is the agent's default rule.
    static func resolvedHome(_ home: String?) -> String {
        let h = (home?.isEmpty == false ? home : nil) ?? KeychainStore.defaultHome()
        guard let real = realpath(h, nil) else { return h }
        defer { free(real) }
        return String(cString: real)
    }

    func unlock(home: String, token: TokenID, key: TokenKey, seconds: Double) {
        lock.withLock {
            unlockGeneration += 1
            unlocked[home, default: [:]][token] = Unlocked(key: key, generation: unlockGeneration,
                                                          expires: Agent.monotonic() + seconds)
        }
        pushUnlocks()
    }

    /// Ends unlocks (one token or every token of a store); returns how many.
    /// Every client drops its shared login now, and with the table's and
    /// the clients' references gone each TokenKey is zeroed (its deinit).
    @discardableResult
    func endUnlock(home: String, token: TokenID?, why: String) -> Int {
        let ended = lock.withLock { () -> [TokenID] in
            guard var table = unlocked[home] else { return [] }
            let gone = table.keys.filter { token == nil || $0 == token }
            for t in gone { table[t] = nil }
            unlocked[home] = table.isEmpty ? nil : table
            return gone
        }
        for t in ended { AgentLog.line("token \(t) of \(home): \(why)") }
        if !ended.isEmpty { pushUnlocks() }
        return ended.count
    }

    private func expireUnlocks() {
        let now = Agent.monotonic()
        let expired = lock.withLock { () -> [(String, TokenID)] in
            unlocked.flatMap { home, table in table.filter { $0.value.expires <= now }.map { (home, $0.key) } }
        }
        for (home, token) in expired { endUnlock(home: home, token: token, why: "unlock expired") }
    }

    /// Token -> seconds left, one "ID<TAB>seconds" line per unlocked token of a store.
    func unlockedSummary(home: String) -> String {
        let now = Agent.monotonic()
        return lock.withLock {
            (unlocked[home] ?? [:]).map { "\($0.key)\t\(Int(($0.value.expires - now).rounded(.up)))" }.sorted().joined(separator: "\n")
        }
    }

    /// The unlocks a client gets: its store's, for the tokens its policy lets it see.
    func sharedUnlocks(for client: AgentClient) -> [TokenID: SharedUnlock] {
        lock.withLock {
            guard let table = unlocked[client.home] else { return [:] }
            var out: [TokenID: SharedUnlock] = [:]
            for (t, u) in table where client.policy.allows(exe: client.exe, token: t) {
                out[t] = SharedUnlock(key: u.key, generation: u.generation)
            }
            return out
        }
    }

    /// Applies the unlock table to every client now (a lock or an expiry
    /// must not wait for a client's next call to drop the key).
    private func pushUnlocks() {
        let all = lock.withLock { Array(clients.values) }
        for c in all { c.module.applySharedUnlocks(sharedUnlocks(for: c)) }
    }

    // MARK: policy

    /// The policy of a client's store, read at its hello (changes apply to
    /// clients that connect later). Throws when the store cannot be opened
    /// safely or the policy cannot be read: the client is then refused.
    func policy(home: String?) throws -> AgentPolicy {
        let store = try KeychainStore(home: home)
        return try AgentPolicy.load(from: store)
    }

    // MARK: clients

    func register(_ client: AgentClient) {
        lock.withLock { clients[client.token] = client }
    }

    /// Another connection of a known client: only from the same process.
    func attach(token: [UInt8], pid: pid_t) -> AgentClient? {
        lock.withLock {
            guard let c = clients[token], c.pid == pid else { return nil }
            c.connections += 1
            return c
        }
    }

    /// A connection of `client` closed; the last one ends the client: its
    /// sessions and logins are dropped as at C_Finalize.
    func detach(_ client: AgentClient) {
        let last = lock.withLock { () -> Bool in
            client.connections -= 1
            guard client.connections == 0 else { return false }
            clients[client.token] = nil
            return true
        }
        if last {
            if client.module.isInitialized { try? client.module.finalize() }
            AgentLog.line("client pid \(client.pid) (\(client.exe)) gone")
        }
    }
}

private final class ConnectionBox: @unchecked Sendable {
    let agent: Agent
    let fd: Int32
    init(agent: Agent, fd: Int32) {
        self.agent = agent
        self.fd = fd
    }
}

/// One client process: its own PKCS #11 module state (logins, sessions, handles).
final class AgentClient: @unchecked Sendable {
    let token: [UInt8]
    let pid: pid_t
    let exe: String
    let module: Module
    /// The resolved store home (the unlock table's key) and its policy at the hello.
    let home: String
    let policy: AgentPolicy
    /// The client's debug-log descriptor (-1: no log), closed when the client goes.
    let logFD: Int32
    /// Guarded by Agent.lock.
    var connections = 1

    init(token: [UInt8], pid: pid_t, exe: String, module: Module, home: String, policy: AgentPolicy, logFD: Int32 = -1) {
        self.token = token
        self.pid = pid
        self.exe = exe
        self.module = module
        self.home = home
        self.policy = policy
        self.logFD = logFD
    }

    deinit { if logFD >= 0 { close(logFD) } }
}

/// The agent's log: one line per decision on stderr (the journal under
/// systemd, DIR/agent.log when auto-started). Never a PIN, key or value.
enum AgentLog {
    static func line(_ s: String) {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let text = "keyshare-agent[\(getpid())] \(ts.tv_sec): \(s)\n"
        _ = text.withCString { write(2, $0, strlen($0)) }
    }
}
