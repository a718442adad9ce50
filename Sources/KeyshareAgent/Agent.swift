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

/// `keyshare agent` (docs/agent.md): the one process per user and store that
/// holds the store, the logins, the unlocked keys and the card modules. Each
/// client process of the module (libkeyshare-pkcs11.so in agent mode) is one
/// `AgentClient` here with its own PKCS #11 `Module`, so logins and handles
/// stay per application as the spec requires; the calls run through the
/// same entry points the in-process module uses (ksa_serve).
///
/// The service's rules (docs/agent.md, "The service's rules"):
/// - Who: the uid of the agent (SO_PEERCRED at accept), then the program the
///   caller check identifies and the store's policy (AgentConnection).
/// - Which store: the one this agent was started for (its own environment,
///   resolved once at start and bound to its device and inode); a client
///   names a store only by the socket it connects to (paths.c).
/// - How long an unlock lasts: until its time, checked at every use
///   (`sharedUnlocks`), and the key is dropped on time by this loop.
/// - Connections: the gate (gate.c) bounds those that have not said hello;
///   a client's connections, and clients, are bounded too; a client whose
///   process is gone (its pidfd) is finalised whatever its threads are doing.
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

    /// Bounds (docs/agent.md, "Connections"). Connections waiting for their
    /// first frame: in all, per process, their bytes, their deadline.
    static let maxPending: UInt32 = 256
    static let maxPendingPerProcess: UInt32 = 16
    static let pendingByteBudget = 64 << 20
    static let firstFrameDeadlineMS: Int32 = 5000
    /// Connections with a thread (clients that said hello, control requests).
    static let maxServing = 2048
    /// Connections of one client process (its threads' concurrent calls).
    static let maxConnectionsPerClient = 128
    /// Served connections of one process, whatever it says in its hellos: a
    /// process that sends hello after hello (each a new client) is bounded too.
    static let maxServingPerProcess = 256

    let options: Options
    let lock = Lock()
    private var clients: [[UInt8]: AgentClient] = [:]
    private var serving = 0
    /// Served connections by process. Guarded by `lock`.
    private var servingByPID: [pid_t: Int] = [:]
    private var lastActivity = Agent.monotonic()
    private(set) var socketPath = ""
    private(set) var directory = ""
    private var listenFD: Int32 = -1
    private var lockFD: Int32 = -1
    private var activated = false
    private let started = Agent.monotonic()
    private let startedWall = time(nil)
    /// The wake-up pipe's write end (SIGTERM writes 'T'; `wake()` writes 'W').
    private var wakeWrite: Int32 = -1
    /// Set by a retire (SIGTERM): no new connection; exit when the last client goes.
    private var retired = false
    /// Set by `keyshare agent stop`: exit at the next turn of the loop.
    private var stopRequested = false
    /// `keyshare unlock`: token -> its unlocked key (docs/agent.md, "Unlock
    /// across processes"; Agent+Unlocks.swift). Guarded by `lock`.
    var unlocked: [TokenID: Unlocked] = [:]
    var unlockGeneration: UInt64 = 0
    /// Numbers every unlock table handed to a client (`sharedUnlocks`), in the
    /// order of this agent's lock: a client's runtime applies only a table
    /// newer than the one it has (SharedLogin.swift), so a table computed
    /// before a lock or an expiry never lands after it.
    var unlockSnapshot: UInt64 = 0
    /// Finalizes of exited clients running on their worker threads
    /// (`processGone`); the agent does not idle out while one runs.
    private var finalizing = 0

    /// The store this agent serves: its own environment's, absolute, resolved
    /// once at start (paths.c `ksa_store_home`), never a client's.
    public private(set) var storeHome = ""
    /// (device, inode) of the store's keychain.db once it has been opened
    /// (or created): every later open must find the same file. Guarded by `lock`.
    private var storeIdentity: (device: UInt64, inode: UInt64)?

    struct Unlocked {
        let key: TokenKey
        let generation: UInt64
        let expires: Double
        /// The programs it reaches (UnlockScope: named, never every program).
        let scope: UnlockScope
    }

    /// How long a connection thread polls for its client's next call before
    /// blocking (KEYSHARE_AGENT_SPIN_US of the agent's environment, read once;
    /// docs/agent-transport.md "Round trips: bounded polling").
    let spinMicroseconds: UInt32 = ksa_spin_budget_us()
    /// Whether clients get a shared region for their frames (Sources/AgentProtocol/shm.c;
    /// KEYSHARE_AGENT_SHM=0 in the agent's environment: sockets only).
    let sharedRegions: Bool = ksa_shm_wanted() != 0
    /// The agent's prompt program (KEYSHARE_PINENTRY, else pinentry on PATH) and
    /// its timeout, read once at start (Pinentry.swift); nil: no prompt.
    private(set) var pinentry: PinentrySettings?

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
        // PINs are wrapped at the default cost whoever started the agent (a
        // starter's test setting must not weaken every client's PIN).
        unsetenv("KEYSHARE_KDF_LOG2N")
        // A write to a client's debug log whose reader has gone (its stderr a
        // pipe to `head`) must fail with EPIPE, not kill the agent and every
        // client's logins with it. The prompt program gets the default back
        // (spawn_prompt.h); a driver poller (ChildProcess) inherits the
        // ignore, and is killed when the agent stops reading it early.
        signal(SIGPIPE, SIG_IGN)
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
        var storeBuf = [CChar](repeating: 0, count: Int(PATH_MAX))
        guard ksa_agent_dir(&dirBuf, dirBuf.count) == 0, ksa_socket_path(&pathBuf, pathBuf.count) == 0,
              ksa_store_home(&storeBuf, storeBuf.count) == 0 else {
            AgentLog.line("the agent's socket or store path is too long")
            return 1
        }
        let dir = Self.string(dirBuf)
        directory = dir
        socketPath = Self.string(pathBuf)
        storeHome = Self.string(storeBuf)
        var why = [CChar](repeating: 0, count: 1024)
        guard ksa_check_dir(dir, 1, &why, why.count) == 0 else {
            AgentLog.line(Self.string(why))
            return 1
        }
        var shared: Int32 = 0
        var base = [CChar](repeating: 0, count: 512)
        if getenv("KEYSHARE_AGENT_SOCKET") == nil, ksa_agent_base(&base, base.count, &shared) == 0, shared != 0 {
            AgentLog.line("XDG_RUNTIME_DIR is unset: the agent's directory is \(dir) (checked: owned by uid \(geteuid()), mode 0700)")
        }
        // Exactly one agent: the lock is held for the agent's life (or until it
        // retires); a loser exits 0.
        lockFD = open(dir + "/agent.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
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
        _ = fcntl(listenFD, F_SETFL, fcntl(listenFD, F_GETFL) | O_NONBLOCK)
        let files = keyshare_raise_nofile()
        writePID(dir + "/agent.pid")
        let storeNote = KeychainStore.exists(home: storeHome) ? "store \(storeHome)" : "store \(storeHome) (none yet: created by C_InitToken or keyshare token create)"
        AgentLog.line("listening on \(socketPath) (pid \(getpid()), protocol \(KSA_VERSION), \(storeNote), idle timeout \(options.idleTimeout)s, poll \(spinMicroseconds) us, shared memory \(sharedRegions ? "on (futex park \(ksa_shm_park_us()) us)" : "off"), \(files) descriptors\(activated ? ", socket-activated" : ""))")
        let (prompt, promptNote) = PinentrySettings.fromEnvironment()
        pinentry = prompt
        AgentLog.line(promptNote + " (docs/agent.md, \"The agent's prompt\")")
        ready("1")
        // What a client's card login cannot do for a reason the user must fix
        // (a driver that does not show a token it mirrored) is in this log too.
        Log.warningSink = { AgentLog.line($0) }
        serve()
        if !lock.withLock({ retired }) {
            if !activated { unlink(socketPath) }
            unlink(dir + "/agent.pid")
        }
        return 0
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

    // MARK: the loop

    /// Wakes the loop (a new client's pidfd to watch, a stop request).
    func wake() {
        var c: UInt8 = 0x57  // 'W'
        _ = write(wakeWrite, &c, 1)
    }

    /// One poll loop (docs/agent.md, "Connections"): the listening socket,
    /// the gate's connections until their first frame, every client's pidfd,
    /// the wake-up pipe; timed by the gate's deadlines and the next unlock
    /// expiry, so neither waits for a quiet moment.
    private func serve() {
        let wakeRead = keyshare_wake_pipe(&wakeWrite)
        guard let gate = ksa_gate_new(Self.maxPending, Self.maxPendingPerProcess, Self.pendingByteBudget,
                                      Self.firstFrameDeadlineMS) else {
            AgentLog.line("out of memory")
            return
        }
        var refusals = RefusalLog()
        var acceptPausedUntil = 0.0
        // Kept open to be closed when descriptors run out: room to accept and
        // close one connection, so the kernel's queue drains instead of the
        // loop spinning on EMFILE.
        var reserveFD = open("/dev/null", O_RDONLY | O_CLOEXEC)
        var fds: [pollfd] = []
        while true {
            let now = Agent.monotonic()
            expireUnlocks(now: now)
            let (stop, isRetired) = lock.withLock { (stopRequested, retired) }
            if stop { stopAll(); return }
            if isRetired && lock.withLock({ serving == 0 && finalizing == 0 }) {
                AgentLog.line("retired, and the last client is gone: exiting")
                return
            }
            if options.idleTimeout > 0 && !isRetired {
                // An unlocked token keeps the agent (and so the unlock) alive until it expires.
                let idle = lock.withLock {
                    serving == 0 && finalizing == 0 && unlocked.isEmpty && ksa_gate_count(gate) == 0 && now - lastActivity >= options.idleTimeout
                }
                if idle {
                    AgentLog.line("idle for \(options.idleTimeout)s with no client: exiting")
                    return
                }
            }
            fds.removeAll(keepingCapacity: true)
            let listening = listenFD >= 0 && now >= acceptPausedUntil
            fds.append(pollfd(fd: listening ? listenFD : -1, events: Int16(POLLIN), revents: 0))
            fds.append(pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0))
            let gateStart = fds.count
            fds.append(contentsOf: repeatElement(pollfd(), count: Int(ksa_gate_count(gate))))
            let n = fds.withUnsafeMutableBufferPointer { b in
                ksa_gate_pollfds(gate, b.baseAddress! + gateStart, Int32(b.count - gateStart))
            }
            fds.removeLast(fds.count - gateStart - Int(n))
            let gateEnd = fds.count
            let watched = lock.withLock { clients.values.filter { $0.pidfd >= 0 && !$0.gone } }
            for c in watched { fds.append(pollfd(fd: c.pidfd, events: Int16(POLLIN), revents: 0)) }
            var timeout = 1000.0
            let gateTimeout = ksa_gate_timeout_ms(gate)
            if gateTimeout >= 0 { timeout = min(timeout, Double(gateTimeout)) }
            if let next = nextExpiry() { timeout = min(timeout, max(0, (next - now) * 1000)) }
            if !listening && listenFD >= 0 { timeout = min(timeout, max(0, (acceptPausedUntil - now) * 1000)) }
            _ = poll(&fds, nfds_t(fds.count), Int32(timeout.rounded(.up)))

            if fds[1].revents != 0 {
                var bytes = [UInt8](repeating: 0, count: 64)
                while case let got = read(wakeRead, &bytes, bytes.count), got > 0 {
                    if bytes[0..<got].contains(0x54) { retire() }
                }
            }
            if listening && fds[0].revents != 0 {
                for _ in 0..<64 {
                    let fd = keyshare_accept_cloexec(listenFD)
                    if fd < 0 {
                        if errno == EMFILE || errno == ENFILE {
                            // Out of descriptors: drop one queued connection with the
                            // reserve, and pause accepting for 100 ms.
                            refusals.note("the agent ran out of descriptors (\(errno == EMFILE ? "EMFILE" : "ENFILE"))")
                            if reserveFD >= 0 { close(reserveFD); reserveFD = -1 }
                            let dropped = keyshare_accept_cloexec(listenFD)
                            if dropped >= 0 { close(dropped) }
                            reserveFD = open("/dev/null", O_RDONLY | O_CLOEXEC)
                            acceptPausedUntil = Agent.monotonic() + 0.1
                        }
                        break
                    }
                    admit(fd, gate, &refusals)
                }
            }
            fds.withUnsafeBufferPointer { b in
                ksa_gate_service(gate, b.baseAddress! + gateStart, Int32(gateEnd - gateStart))
            }
            var ev = ksa_gate_event()
            while ksa_gate_take(gate, &ev) == 1 {
                if ev.kind == 0 {
                    let why = ev.why.map { String(cString: $0) } ?? ""
                    if !why.isEmpty { refusals.note("pid \(ev.pid): \(why)") }
                    close(ev.fd)
                } else {
                    startConnection(ev, &refusals)
                }
            }
            for p in fds[gateEnd...] where p.revents != 0 {
                if let c = watched.first(where: { $0.pidfd == p.fd }) { processGone(c) }
            }
            refusals.flush(now: Agent.monotonic())
        }
    }

    /// A new connection: another uid is refused before a byte is read (the
    /// directory's mode already keeps other users out; this holds even if it
    /// were opened); then it waits in the gate for its first frame.
    private func admit(_ fd: Int32, _ gate: OpaquePointer, _ refusals: inout RefusalLog) {
        var pid: pid_t = 0
        var uid: uid_t = 0
        guard keyshare_peer_cred(fd, &pid, &uid) == 0 else {
            refusals.note("a connection without peer credentials")
            close(fd)
            return
        }
        guard uid == geteuid() else {
            AgentLog.line("refused pid \(pid): uid \(uid) is not the agent's uid \(geteuid())")
            close(fd)
            return
        }
        if lock.withLock({ retired }) {
            close(fd)
            return
        }
        var why: UnsafePointer<CChar>?
        if ksa_gate_add(gate, fd, pid, &why) != 0 {
            refusals.note("pid \(pid): \(why.map { String(cString: $0) } ?? "refused")")
            close(fd)
            return
        }
        lock.withLock { lastActivity = Agent.monotonic() }
    }

    private func startConnection(_ ev: ksa_gate_event, _ refusals: inout RefusalLog) {
        let over = lock.withLock { () -> String? in
            guard serving < Self.maxServing else { return "the agent serves its most connections (\(Self.maxServing))" }
            guard servingByPID[ev.pid, default: 0] < Self.maxServingPerProcess else {
                return "this process already has \(Self.maxServingPerProcess) connections served"
            }
            serving += 1
            servingByPID[ev.pid, default: 0] += 1
            lastActivity = Agent.monotonic()
            return nil
        }
        var frame = ksa_buf(data: ev.data, len: ev.len, cap: ev.cap, failed: 0)
        if let over {
            refusals.note("pid \(ev.pid): \(over)")
            ksa_buf_free(&frame)
            close(ev.fd)
            return
        }
        let box = Unmanaged.passRetained(ConnectionBox(agent: self, fd: ev.fd, pid: ev.pid, kind: ev.kind, frame: frame)).toOpaque()
        var thread = pthread_t()
        var attr = pthread_attr_t()
        pthread_attr_init(&attr)
        pthread_attr_setdetachstate(&attr, Int32(PTHREAD_CREATE_DETACHED))
        let rc = pthread_create(&thread, &attr, { raw in
            let box = Unmanaged<ConnectionBox>.fromOpaque(raw!).takeRetainedValue()
            AgentConnection(agent: box.agent, fd: box.fd, pid: box.pid).run(kind: box.kind, first: &box.frame)
            return nil
        }, box)
        pthread_attr_destroy(&attr)
        if rc != 0 {
            let b = Unmanaged<ConnectionBox>.fromOpaque(box).takeRetainedValue()
            ksa_buf_free(&b.frame)
            close(ev.fd)
            connectionEnded(pid: ev.pid)
            refusals.note("pid \(ev.pid): cannot start a thread: \(String(cString: strerror(rc)))")
        }
    }

    func connectionEnded(pid: pid_t) {
        lock.withLock {
            serving -= 1
            let left = servingByPID[pid, default: 1] - 1
            servingByPID[pid] = left > 0 ? left : nil
            lastActivity = Agent.monotonic()
        }
        if lock.withLock({ retired }) { wake() }
    }

    /// SIGTERM (docs/agent.md, "Upgrades"): stop listening now, unlink the
    /// socket and let go of the agent lock, so a newer agent can start at
    /// once; serve the clients already here, exit when the last one goes.
    /// A socket-activated agent leaves the socket to systemd.
    private func retire() {
        guard lock.withLock({ () -> Bool in
            if retired { return false }
            retired = true
            return true
        }) else { return }
        if listenFD >= 0 && !activated {
            close(listenFD)
            listenFD = -1
            unlink(socketPath)
        }
        if lockFD >= 0 {
            unlink(directory + "/agent.pid")
            close(lockFD)
            lockFD = -1
        }
        let n = lock.withLock { clients.count }
        AgentLog.line("retiring (SIGTERM): no new connections; exiting when the last of \(n) client(s) goes")
    }

    /// `keyshare agent stop`: every client finalised (its logins and keys dropped) and exit now.
    func requestStop() {
        lock.withLock { stopRequested = true }
        wake()
    }

    private func stopAll() {
        let all = lock.withLock { () -> [AgentClient] in
            let all = Array(clients.values)
            clients.removeAll()
            unlocked.removeAll()
            return all
        }
        for c in all where c.markGone() {
            if c.module.isInitialized { try? c.module.finalize() }
        }
        AgentLog.line("stopped by keyshare agent stop (\(all.count) client(s) finalised)")
    }

    // MARK: the store

    /// Opens this agent's store (never a client's), checked to be the same
    /// file as at its first open: a store directory replaced behind the
    /// agent's back (a same-uid program re-pointing a link, renaming
    /// directories) is refused rather than served with this agent's unlocks
    /// and policy. nil: no store exists yet (nothing is created here).
    func openStore(creating: Bool = false) throws -> KeychainStore? {
        guard creating || KeychainStore.exists(home: storeHome) else { return nil }
        let store = try KeychainStore(home: storeHome)
        try verify(store)
        return store
    }

    /// The identity check of `openStore`, for a store opened elsewhere (a
    /// client's Module, a KeychainSession).
    func verify(_ store: KeychainStore) throws {
        guard !store.isEmptyView else { return }
        let id = store.fileIdentity
        try lock.withLock { () throws in
            if let known = storeIdentity {
                guard known == id else {
                    AgentLog.line("refusing the store \(storeHome): its keychain.db is no longer the file this agent opened (device:inode \(known.device):\(known.inode), now \(id.device):\(id.inode)); restart the agent (keyshare agent restart)")
                    throw KeychainError.insecurePath("the store \(storeHome) was replaced while the agent served it; restart the agent (keyshare agent restart)")
                }
            } else {
                storeIdentity = id
            }
        }
    }

    /// Applies the unlock table to every client now (a lock or an expiry
    /// must not wait for a client's next call to drop the key).
    func pushUnlocks() {
        let all = lock.withLock { Array(clients.values) }
        for c in all { applyUnlocks(to: c) }
    }

    // MARK: policy

    /// The policy of this agent's store, read at each hello (changes apply to
    /// clients that connect later); none while no store exists. Throws when
    /// the store cannot be opened safely or the policy cannot be read: the
    /// client is then refused.
    func policy() throws -> AgentPolicy {
        guard let store = try openStore() else { return AgentPolicy() }
        return try AgentPolicy.load(from: store)
    }

    // MARK: clients

    func register(_ client: AgentClient) {
        lock.withLock { clients[client.token] = client }
        wake()  // its pidfd joins the loop's watch
    }

    /// Another connection of a known client: only from the same process, and
    /// at most `maxConnectionsPerClient` at once. nil and why when refused.
    func attach(token: [UInt8], pid: pid_t) -> (AgentClient?, String) {
        lock.withLock {
            guard let c = clients[token], c.pid == pid, !c.gone else { return (nil, "unknown client token") }
            guard c.connections < Self.maxConnectionsPerClient else {
                return (nil, "this client already has \(Self.maxConnectionsPerClient) connections")
            }
            c.connections += 1
            return (c, "")
        }
    }

    /// A connection of `client` closed; the last one ends the client: its
    /// sessions and logins are dropped as at C_Finalize.
    func detach(_ client: AgentClient) {
        let last = lock.withLock { () -> Bool in
            client.connections -= 1
            guard client.connections == 0 else { return false }
            if clients[client.token] === client { clients[client.token] = nil }
            return true
        }
        guard last else { return }
        if client.markGone(), client.module.isInitialized { try? client.module.finalize() }
        // Logged when the last connection's call has ended too: "gone" means the
        // agent is done with the client (61-crash waits for this line).
        AgentLog.line("client pid \(client.pid) (\(client.exe)) gone")
        Audit.shared.programGone(pid: client.pid, program: client.exe)
    }

    /// The client's process has exited (its pidfd): finalised now, whatever
    /// its connection threads are doing. A thread blocked in
    /// C_WaitForSlotEvent is woken by the finalize (CKR_CRYPTOKI_NOT_INITIALIZED),
    /// its reply goes nowhere, and its connection ends; a call in flight
    /// finishes on its runtime (as a network HSM finishes a write). "gone" is
    /// logged by `detach` when the last connection has ended.
    ///
    /// The finalize runs on a thread of its own, never on this loop: it calls
    /// the card drivers' C_Finalize, and a hung driver must not stall accepts,
    /// gate deadlines and expiry sweeps. One per client (markGone is true
    /// once); the logins and keys are dropped by that thread as before (the
    /// log line comes after, 76-agent-keys waits for it).
    private func processGone(_ client: AgentClient) {
        lock.withLock { if clients[client.token] === client { clients[client.token] = nil } }
        guard client.markGone() else { return }
        lock.withLock { finalizing += 1 }
        let box = Unmanaged.passRetained(GoneBox(agent: self, client: client)).toOpaque()
        var thread = pthread_t()
        var attr = pthread_attr_t()
        pthread_attr_init(&attr)
        pthread_attr_setdetachstate(&attr, Int32(PTHREAD_CREATE_DETACHED))
        let rc = pthread_create(&thread, &attr, { raw in
            let box = Unmanaged<GoneBox>.fromOpaque(raw!).takeRetainedValue()
            box.agent.finalizeGone(box.client)
            return nil
        }, box)
        pthread_attr_destroy(&attr)
        if rc != 0 {
            // No thread to be had: finalised here, as before.
            let b = Unmanaged<GoneBox>.fromOpaque(box).takeRetainedValue()
            finalizeGone(b.client)
        }
    }

    fileprivate func finalizeGone(_ client: AgentClient) {
        if client.module.isInitialized { try? client.module.finalize() }
        AgentLog.line("client pid \(client.pid) (\(client.exe)): its process exited; its logins and sessions are dropped (calls in flight finish, then it is gone)")
        lock.withLock { finalizing -= 1 }
    }

    // MARK: status

    /// `keyshare agent status` (ControlServer): what a person or a script needs to see.
    func status() -> [String: String] {
        let (nClients, nServing, nUnlocked) = lock.withLock { (clients.count, serving, unlocked.count) }
        return [
            "pid": String(getpid()),
            "protocol": String(KSA_VERSION),
            "version": KeyshareVersion.string,
            "store": storeHome,
            "storeExists": KeychainStore.exists(home: storeHome) ? "1" : "0",
            "socket": socketPath,
            "directory": directory,
            "log": directory + "/agent.log",
            "started": String(startedWall),
            "uptime": String(Int(Agent.monotonic() - started)),
            "clients": String(nClients),
            "connections": String(nServing),
            "unlocked": String(nUnlocked),
            "idleTimeout": String(Int(options.idleTimeout)),
            "retired": lock.withLock { retired } ? "1" : "0",
            "socketActivated": activated ? "1" : "0",
        ]
    }
}

/// An exited client handed to its finalize thread (Agent.processGone).
private final class GoneBox: @unchecked Sendable {
    let agent: Agent
    let client: AgentClient
    init(agent: Agent, client: AgentClient) {
        self.agent = agent
        self.client = client
    }
}

private final class ConnectionBox: @unchecked Sendable {
    let agent: Agent
    let fd: Int32
    let pid: pid_t
    let kind: Int32
    var frame: ksa_buf
    init(agent: Agent, fd: Int32, pid: pid_t, kind: Int32, frame: ksa_buf) {
        self.agent = agent
        self.fd = fd
        self.pid = pid
        self.kind = kind
        self.frame = frame
    }
}

