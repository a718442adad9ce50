import Foundation

/// The password service (spec §6) on a Unix-domain socket. One thread runs a
/// poll loop over every connection with non-blocking I/O, a size bound and a
/// deadline per connection, so a slow or hostile client costs one descriptor
/// and never holds up the others. The password is answered from memory.
public final class PasswordServer: @unchecked Sendable {
    public let socketPath: String
    /// At most this many connections are open at once; further ones wait in
    /// the kernel's listen queue until a slot frees.
    public static let maxConnections = 512
    private let listenFD: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let password: String
    private let policy: () throws -> AccessPolicy?
    private let log: (String) -> Void
    private let serviceUID = getuid()

    public struct ServerError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Binds the socket (0600) and starts listening. An existing socket that no
    /// server answers on is stale and replaced; a live one is an error.
    public init(socketPath: String, password: String, policy: @escaping () throws -> AccessPolicy?,
                log: @escaping (String) -> Void) throws {
        self.socketPath = socketPath
        self.password = password
        self.policy = policy
        self.log = log
        guard socketPath.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw ServerError(description: "socket path too long: \(socketPath)")
        }
        if PasswordClient.isListening(socketPath) {
            throw ServerError(description: "a password service is already running on \(socketPath)")
        }
        unlink(socketPath)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ServerError(description: "socket: \(String(cString: strerror(errno)))") }
        var addr = UnixAddress(socketPath)
        let oldMask = umask(0o177)
        let bound = addr.withSockaddr { bind(fd, $0, $1) }
        umask(oldMask)
        guard bound == 0, chmod(socketPath, 0o600) == 0, listen(fd, 4096) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw ServerError(description: "cannot listen on \(socketPath): \(reason)")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var pipeFDs: [Int32] = [-1, -1]
        guard pipe(&pipeFDs) == 0 else {
            close(fd)
            unlink(socketPath)
            throw ServerError(description: "pipe: \(String(cString: strerror(errno)))")
        }
        for p in pipeFDs { _ = fcntl(p, F_SETFD, FD_CLOEXEC) }
        _ = fcntl(pipeFDs[1], F_SETFL, fcntl(pipeFDs[1], F_GETFL) | O_NONBLOCK)
        listenFD = fd
        wakeRead = pipeFDs[0]
        wakeWrite = pipeFDs[1]
    }

    /// Ends `run()` from any thread (a signal source, a test). Only a pipe write.
    public func stop() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// Serves until `stop()`; then closes every connection and removes the socket.
    public func run() {
        var connections: [Int32: Connection] = [:]
        defer {
            for fd in connections.keys { close(fd) }
            close(listenFD)
            unlink(socketPath)
            close(wakeRead)
            close(wakeWrite)
        }
        while true {
            var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            if connections.count < Self.maxConnections {
                fds.append(pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0))
            }
            for (fd, c) in connections {
                fds.append(pollfd(fd: fd, events: Int16(c.pending.isEmpty ? POLLIN : POLLOUT), revents: 0))
            }
            let now = Connection.monotonicMilliseconds()
            let nextDeadline = connections.values.map(\.deadline).min() ?? (now + 1000)
            let timeout = Int32(max(0, min(1000, nextDeadline - now)))
            if poll(&fds, nfds_t(fds.count), timeout) < 0 && errno != EINTR { return }
            if fds[0].revents != 0 { return }
            for p in fds.dropFirst() where p.revents != 0 {
                if p.fd == listenFD {
                    acceptAll(into: &connections)
                } else if let c = connections[p.fd] {
                    if c.service(revents: p.revents, handle: answer) { connections[p.fd] = nil }
                }
            }
            let later = Connection.monotonicMilliseconds()
            for (fd, c) in connections where c.deadline <= later {
                c.expire(handle: answer)
                connections[fd] = nil
            }
        }
    }

    private func acceptAll(into connections: inout [Int32: Connection]) {
        while connections.count < Self.maxConnections {
            let fd = accept(listenFD, nil, nil)
            guard fd >= 0 else { return }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            connections[fd] = Connection(fd: fd, peer: Self.peerCredentials(fd))
        }
    }

    /// The reply for one complete request line (or a protocol failure), logged
    /// with the peer and the state. The password itself never reaches the log.
    private func answer(_ line: Result<[UInt8], PasswordProtocol.ProtocolError>, peer: PeerCredentials?) -> [UInt8] {
        let who = peer.map { "pid \($0.pid) uid \($0.uid) exe \($0.exe ?? "?")" } ?? "unknown peer"
        let reply: PasswordProtocol.Reply
        switch line.flatMap(PasswordProtocol.validate) {
        case .failure(let e):
            reply = .init(state: .noRequest, error: e.description)
        case .success:
            if let peer {
                let decision: AccessDecision
                do {
                    decision = AccessPolicy.decide(try policy(), peer: peer, serviceUID: serviceUID)
                } catch {
                    decision = AccessDecision(state: .notEnabled, reason: "\(error)")
                }
                reply = decision.state == .notBlocked
                    ? .init(state: .notBlocked, password: password)
                    : .init(state: decision.state, error: decision.reason)
            } else {
                reply = .init(state: .noRequest, error: "the caller's credentials cannot be read")
            }
        }
        log("\(who): \(reply.state)" + (reply.error.map { " (\($0))" } ?? ""))
        return PasswordProtocol.encode(reply)
    }

    /// SO_PEERCRED: the kernel's record of the connecting process.
    static func peerCredentials(_ fd: Int32) -> PeerCredentials? {
        var cred: (Int32, UInt32, UInt32) = (0, 0, 0)
        var len = socklen_t(MemoryLayout.size(ofValue: cred))
        let soPeerCred: Int32 = 17  // SO_PEERCRED on Linux (asm-generic/socket.h)
        guard getsockopt(fd, SOL_SOCKET, soPeerCred, &cred, &len) == 0, cred.0 > 0 else { return nil }
        var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/\(cred.0)/exe", &buf, Int(PATH_MAX))
        let exe = n > 0 ? String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
        return PeerCredentials(pid: cred.0, uid: cred.1, gid: cred.2, exe: exe)
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
