import FoundationEssentials
import Glibc

/// The password service (spec §6) on a Unix-domain socket. One thread runs a
/// poll loop over every connection with non-blocking I/O, a size bound and a
/// deadline per connection, so a slow or hostile client costs one descriptor
/// and never holds up the others. The password is answered from memory.
///
/// Load (issue 12, item 10): the listen queue is drained every round (at most
/// `acceptsPerRound` at a time, so accepting never starves replies), up to
/// `capacity` connections are open at once, and when the service is full a
/// new connection displaces the oldest one. Idle connections therefore cannot
/// keep a real client waiting in the kernel's queue: 3,000 of them from one
/// process leave a `keyshare password fetch` answered at once.
///
/// The caller is judged when its request is complete, by `CallerCheck`: the
/// program that made the connection, not whatever its pid runs by then.
public final class PasswordServer: @unchecked Sendable {
    public let socketPath: String
    /// At most this many connections are open at once (fewer if the descriptor
    /// limit is lower); beyond it the oldest connection is closed for a new one.
    public static let maxConnections = 4096
    /// New connections taken from the listen queue per poll round.
    static let acceptsPerRound = 256
    /// This server's bound: `maxConnections`, or what the descriptor limit allows.
    public let capacity: Int
    private let listenFD: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let password: String
    /// Set when the agent answers (AgentAnswer): the service passes it each
    /// valid request's connection and only logs the outcome.
    private let agent: ((Int32) -> AgentAnswer.Outcome)?
    private let policy: () throws -> AccessPolicy?
    private let log: (String) -> Void
    private let serviceUID = getuid()
    /// The socket file this server created (device, inode): the only thing it removes.
    private let socketFile: (dev: UInt64, ino: UInt64)
    private var serial: UInt64 = 0

    public struct ServerError: Error, CustomStringConvertible {
        public let description: String
    }

    /// What `run()` did with the socket file when it stopped.
    public enum SocketCleanup: Sendable, Equatable {
        case removed
        /// Something else is at the path now (replaced while serving): left alone.
        case leftAlone(String)
    }

    /// Binds the socket (0600) and starts listening. `checkDirectory` is called
    /// with the socket's directory before anything is created there;
    /// `maxConnections` lowers the bound (tests). The path
    /// must be free: a stale socket (nothing listens: ECONNREFUSED) is
    /// replaced; a live one, or anything that is not a socket, is an error and
    /// is left as it is.
    /// `agent`: instead of answering from `password`, hand every valid request's
    /// connection to it (the agent judges and answers; issue 28 item 4).
    public init(socketPath: String, password: String, policy: @escaping () throws -> AccessPolicy?,
                log: @escaping (String) -> Void, checkDirectory: (String) throws -> Void = { _ in },
                maxConnections: Int = PasswordServer.maxConnections,
                agent: ((Int32) -> AgentAnswer.Outcome)? = nil) throws {
        self.socketPath = socketPath
        self.password = password
        self.agent = agent
        self.policy = policy
        self.log = log
        guard socketPath.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw ServerError(description: "socket path too long: \(socketPath)")
        }
        try checkDirectory(OutputFile.directory(of: socketPath))
        try Self.claim(socketPath)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ServerError(description: "socket: \(String(cString: strerror(errno)))") }
        var addr = UnixAddress(socketPath)
        let oldMask = umask(0o177)
        let bound = addr.withSockaddr { bind(fd, $0, $1) }
        umask(oldMask)
        guard bound == 0 else {
            let reason = errno == EADDRINUSE ? "the path was taken meanwhile" : String(cString: strerror(errno))
            close(fd)
            throw ServerError(description: "cannot listen on \(socketPath): \(reason)")
        }
        var st = stat()
        guard lstat(socketPath, &st) == 0, (st.st_mode & S_IFMT) == S_IFSOCK else {
            close(fd)
            throw ServerError(description: "cannot listen on \(socketPath): the socket vanished after bind")
        }
        let mine = (dev: UInt64(st.st_dev), ino: UInt64(st.st_ino))
        func fail(_ what: String) -> ServerError {
            let reason = String(cString: strerror(errno))
            close(fd)
            Self.removeSocket(socketPath, ifStill: mine)
            return ServerError(description: "\(what): \(reason)")
        }
        guard chmod(socketPath, 0o600) == 0, listen(fd, 4096) == 0 else {
            throw fail("cannot listen on \(socketPath)")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var pipeFDs: [Int32] = [-1, -1]
        guard pipe(&pipeFDs) == 0 else { throw fail("pipe") }
        for p in pipeFDs { _ = fcntl(p, F_SETFD, FD_CLOEXEC) }
        _ = fcntl(pipeFDs[1], F_SETFL, fcntl(pipeFDs[1], F_GETFL) | O_NONBLOCK)
        listenFD = fd
        wakeRead = pipeFDs[0]
        wakeWrite = pipeFDs[1]
        socketFile = mine
        capacity = Self.raiseDescriptorLimit(for: max(1, maxConnections))
    }

    /// Ends `run()` from any thread (a signal source, a test). Only a pipe write.
    public func stop() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// Serves until `stop()`; then closes every connection and removes the
    /// socket if it is still the one this server created.
    @discardableResult
    public func run() -> SocketCleanup {
        var connections: [Int32: Connection] = [:]
        var order = AcceptOrder()
        defer {
            for c in connections.values { c.abandon(last: nil) }
            close(wakeRead)
            close(wakeWrite)
        }
        while true {
            var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)]
            fds.reserveCapacity(connections.count + 2)
            for (fd, c) in connections { fds.append(pollfd(fd: fd, events: c.events, revents: 0)) }
            let now = Connection.monotonicMilliseconds()
            let nextDeadline = connections.values.lazy.map(\.deadline).min() ?? (now + 1000)
            let timeout = Int32(max(0, min(1000, nextDeadline - now)))
            if poll(&fds, nfds_t(fds.count), timeout) < 0 && errno != EINTR { break }
            if fds[0].revents != 0 { break }
            // Accept first: a connection closed to make room is then never one
            // whose request is about to be answered in this round.
            if fds[1].revents != 0 { acceptSome(into: &connections, order: &order) }
            var ready: [(Connection, Result<[UInt8], PasswordProtocol.ProtocolError>)] = []
            for p in fds.dropFirst(2) where p.revents != 0 {
                // Accepting may have reused a closed descriptor's number: stale
                // readiness only causes a read that finds nothing.
                guard let c = connections[p.fd] else { continue }
                switch c.service(revents: p.revents) {
                case .waiting: break
                case .finished: Self.forget(c, in: &connections)
                case .request(let line): ready.append((c, line))
                }
            }
            if !ready.isEmpty {
                // One view of each calling process serves all of its requests in this round.
                var check = CallerCheck()
                for (c, line) in ready where c.reply(answer(line, on: c, check: &check)) {
                    Self.forget(c, in: &connections)
                }
            }
            let later = Connection.monotonicMilliseconds()
            for c in connections.values where c.deadline <= later {
                c.abandon(last: c.answered ? nil : timeoutReply(c))
                Self.forget(c, in: &connections)
            }
        }
        close(listenFD)
        return Self.removeSocket(socketPath, ifStill: socketFile)
    }

    private static func forget(_ c: Connection, in connections: inout [Int32: Connection]) {
        if connections[c.fd] === c { connections[c.fd] = nil }
    }

    private func acceptSome(into connections: inout [Int32: Connection], order: inout AcceptOrder) {
        var displaced = 0
        for _ in 0..<Self.acceptsPerRound {
            let fd = accept(listenFD, nil, nil)
            guard fd >= 0 else {
                // Out of descriptors: close the oldest connection so the queue keeps moving.
                if (errno == EMFILE || errno == ENFILE), let oldest = order.popOldest(in: connections) {
                    oldest.abandon(last: capacityReply)
                    Self.forget(oldest, in: &connections)
                    displaced += 1
                    continue
                }
                break
            }
            // No exec happens in this process: setting close-on-exec after accept is not racy.
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            if connections.count >= capacity, let oldest = order.popOldest(in: connections) {
                oldest.abandon(last: capacityReply)
                Self.forget(oldest, in: &connections)
                displaced += 1
            }
            serial += 1
            let c = Connection(fd: fd, serial: serial)
            connections[fd] = c
            order.append(c, live: connections)
        }
        if displaced > 0 {
            log("at capacity (\(capacity) connections): closed the \(displaced) oldest")
        }
    }

    private var capacityReply: [UInt8] {
        PasswordProtocol.encode(PasswordProtocol.Reply(
            state: .noRequest, error: "the service is at capacity (\(capacity) connections): this, the oldest, was closed"))
    }

    private func timeoutReply(_ c: Connection) -> [UInt8] {
        let error = "timeout: no complete request within \(PasswordProtocol.requestTimeoutMilliseconds) ms"
        log("\(Self.who(c.credentials)): \(AccessState.noRequest) (\(error))")
        return PasswordProtocol.encode(PasswordProtocol.Reply(state: .noRequest, error: error))
    }

    private static func who(_ cred: (pid: Int32, uid: UInt32, gid: UInt32)?, exe: String? = nil) -> String {
        guard let cred else { return "unknown peer" }
        return "pid \(cred.pid) uid \(cred.uid)" + (exe.map { " exe \($0)" } ?? "")
    }

    /// The reply for one complete request line (or a protocol failure), logged
    /// with the peer and the state. The password itself never reaches the log.
    private func answer(_ line: Result<[UInt8], PasswordProtocol.ProtocolError>, on c: Connection,
                        check: inout CallerCheck) -> [UInt8] {
        var exe: String?
        let reply: PasswordProtocol.Reply
        switch (line.flatMap(PasswordProtocol.validate), c.credentials) {
        case (.failure(let e), _):
            reply = .init(state: .noRequest, error: e.description)
        case (.success, nil):
            reply = .init(state: .noRequest, error: "the caller's credentials cannot be read")
        case (.success, _) where agent != nil:
            // The agent wrote the reply on the connection; the service closes its end.
            let outcome = agent!(c.fd)
            log("\(Self.who(c.credentials, exe: outcome.exe)): \(outcome.state.rawValue) (by the agent)"
                + (outcome.reason.map { " (\($0))" } ?? ""))
            return []
        case (.success, let cred?):
            let decision: AccessDecision
            do {
                let policy = try policy()
                let unseen = PeerCredentials(pid: cred.pid, uid: cred.uid, gid: cred.gid, exe: nil)
                if cred.uid != serviceUID || policy?.allow.isEmpty != false {
                    // Refused whatever the program: no need to look at the process.
                    decision = AccessPolicy.decide(policy, peer: unseen, serviceUID: serviceUID)
                } else {
                    switch check.verify(connection: c.fd, pid: cred.pid) {
                    case .failure(let refusal):
                        decision = AccessDecision(state: .blocked, reason: refusal.reason)
                    case .success(let caller):
                        exe = caller.program.path
                        if let why = caller.unverified { log("pid \(cred.pid): \(why)") }
                        var peer = unseen
                        peer.exe = caller.program.path
                        peer.program = caller.program
                        decision = AccessPolicy.decide(policy, peer: peer, serviceUID: serviceUID)
                    }
                }
            } catch {
                decision = AccessDecision(state: .notEnabled, reason: "\(error)")
            }
            reply = decision.state == .notBlocked
                ? .init(state: .notBlocked, password: password)
                : .init(state: decision.state, error: decision.reason)
        }
        log("\(Self.who(c.credentials, exe: exe)): \(reply.state)" + (reply.error.map { " (\($0))" } ?? ""))
        return PasswordProtocol.encode(reply)
    }

    // MARK: - The socket file

    /// Makes `path` free for bind: nothing there, or a stale socket (removed).
    /// A live socket (another service) or anything else is refused and left alone.
    static func claim(_ path: String) throws {
        var st = stat()
        guard lstat(path, &st) == 0 else {
            if errno == ENOENT { return }
            throw ServerError(description: "cannot use \(path): \(String(cString: strerror(errno)))")
        }
        guard (st.st_mode & S_IFMT) == S_IFSOCK else {
            throw ServerError(description: "\(path) exists and is \(OutputFile.describe(st.st_mode & S_IFMT)), not a socket: refusing to replace it")
        }
        switch probe(path) {
        case 0:
            throw ServerError(description: "a password service is already running on \(path)")
        case ECONNREFUSED:
            // Stale: nobody listens. Remove it only if it is still that same socket.
            removeSocket(path, ifStill: (UInt64(st.st_dev), UInt64(st.st_ino)))
        case ENOENT:
            return
        case let code:
            throw ServerError(description: "cannot use \(path): \(String(cString: strerror(code)))")
        }
    }

    /// connect() without waiting: 0 when a server listens (or its queue is
    /// full, EAGAIN: it exists), else the error.
    static func probe(_ path: String) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        var addr = UnixAddress(path)
        if addr.withSockaddr({ connect(fd, $0, $1) }) == 0 { return 0 }
        return errno == EAGAIN || errno == EINPROGRESS ? 0 : errno
    }

    /// Unlinks `path` only if it is the socket `file` (device, inode).
    @discardableResult
    static func removeSocket(_ path: String, ifStill file: (dev: UInt64, ino: UInt64)) -> SocketCleanup {
        var st = stat()
        guard lstat(path, &st) == 0 else { return .leftAlone("\(path) is gone") }
        guard (st.st_mode & S_IFMT) == S_IFSOCK, UInt64(st.st_dev) == file.dev, UInt64(st.st_ino) == file.ino else {
            return .leftAlone("\(path) is no longer this service's socket")
        }
        unlink(path)
        return .removed
    }

    /// Raises the soft descriptor limit (never lowers it) so `wanted`
    /// connections fit; returns how many the limit allows.
    static func raiseDescriptorLimit(for wanted: Int) -> Int {
        let reserve = 64
        var lim = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &lim) == 0 else { return 512 }
        let need = rlim_t(wanted + reserve)
        if lim.rlim_cur < need {
            var raised = lim
            raised.rlim_cur = min(need, lim.rlim_max)
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { lim = raised }
        }
        return max(1, min(wanted, Int(lim.rlim_cur) - reserve))
    }
}

/// Connections in accept order, oldest first; entries of closed connections
/// (or of a descriptor number since reused) are skipped when met.
struct AcceptOrder {
    private var queue: [(fd: Int32, serial: UInt64)] = []
    private var head = 0

    mutating func append(_ c: Connection, live connections: [Int32: Connection]) {
        queue.append((c.fd, c.serial))
        // Most connections end by themselves: drop their entries now and then (amortised O(1)).
        if queue.count - head > 2 * max(connections.count, 1024) {
            queue = queue[head...].filter { e in connections[e.fd].map { $0.serial == e.serial && !$0.closed } ?? false }
            head = 0
        }
    }

    mutating func popOldest(in connections: [Int32: Connection]) -> Connection? {
        while head < queue.count {
            let entry = queue[head]
            head += 1
            if head > 4096 && head * 2 > queue.count {
                queue.removeFirst(head)
                head = 0
            }
            if let c = connections[entry.fd], c.serial == entry.serial, !c.closed { return c }
        }
        return nil
    }
}

/// A `sockaddr_un` for a path, handed to bind/connect.
struct UnixAddress {
    var storage = sockaddr_un()

    init(_ path: String) {
        storage.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &storage.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
    }

    mutating func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        withUnsafePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }
}
