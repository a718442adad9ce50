import FoundationEssentials
import Glibc

/// One client connection of the password service: reads at most one request
/// line within the size bound and the deadline, then writes one reply and
/// closes. The server decides the reply; a connection only moves bytes.
final class Connection {
    let fd: Int32
    /// Accept order: the oldest connection is the one closed when the service is full.
    let serial: UInt64
    /// SO_PEERCRED, read at accept: the kernel's record of the connecting process.
    let credentials: (pid: Int32, uid: UInt32, gid: UInt32)?
    var deadline: Int64
    private var input: [UInt8] = []
    private var pending: [UInt8] = []
    private(set) var answered = false
    private(set) var closed = false

    /// What reading brought.
    enum Progress {
        case waiting
        /// The connection is closed (an error, or its reply is out).
        case finished
        /// A complete request line, or why there is none: the server must reply.
        case request(Result<[UInt8], PasswordProtocol.ProtocolError>)
    }

    init(fd: Int32, serial: UInt64) {
        self.fd = fd
        self.serial = serial
        credentials = Self.peerCredentials(fd)
        deadline = Self.monotonicMilliseconds() + Int64(PasswordProtocol.requestTimeoutMilliseconds)
    }

    static func monotonicMilliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// Which poll events this connection waits for.
    var events: Int16 { Int16(pending.isEmpty ? POLLIN : POLLOUT) }

    /// Handles readiness.
    func service(revents: Int16) -> Progress {
        if closed { return .finished }
        if !pending.isEmpty { return flush() ? .finished : .waiting }
        if answered { return .waiting }
        if revents & Int16(POLLIN | POLLHUP | POLLERR) == 0 { return .waiting }
        var buf = [UInt8](repeating: 0, count: PasswordProtocol.maxRequestBytes + 1)
        let room = PasswordProtocol.maxRequestBytes + 1 - input.count
        let n = read(fd, &buf, room)
        if n < 0 {
            if errno == EAGAIN || errno == EINTR { return .waiting }
            finish()
            return .finished
        }
        if n == 0 {
            // The client shut its side: whatever came is all there is.
            let error = input.isEmpty ? "empty request" : "incomplete request: no end of line"
            return .request(.failure(.init(error)))
        }
        input += buf[0..<n]
        if let newline = input.firstIndex(of: 0x0A) {
            return .request(.success(Array(input[..<newline])))
        }
        if input.count > PasswordProtocol.maxRequestBytes {
            return .request(.failure(.init("request too large (limit \(PasswordProtocol.maxRequestBytes) bytes)")))
        }
        return .waiting
    }

    /// Sends the reply (as far as the socket takes it now); true when finished.
    func reply(_ bytes: [UInt8]) -> Bool {
        guard !closed else { return true }
        answered = true
        pending = bytes
        deadline = Self.monotonicMilliseconds() + Int64(PasswordProtocol.requestTimeoutMilliseconds)
        return flush()
    }

    /// Closes without waiting: one non-blocking attempt at `last` (if the
    /// client has had no reply yet), then close.
    func abandon(last: [UInt8]?) {
        guard !closed else { return }
        if let last, !answered, pending.isEmpty {
            answered = true
            pending = last
            _ = flush()
        }
        finish()
    }

    private func flush() -> Bool {
        while !pending.isEmpty {
            let n = pending.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EAGAIN || errno == EINTR { return false }
                finish()
                return true
            }
            pending.removeFirst(n)
        }
        finish()
        return true
    }

    private func finish() {
        pending.removeAll()
        if !closed { close(fd) }
        closed = true
    }

    /// SO_PEERCRED: pid, uid and gid of the process that called connect().
    static func peerCredentials(_ fd: Int32) -> (pid: Int32, uid: UInt32, gid: UInt32)? {
        var cred: (Int32, UInt32, UInt32) = (0, 0, 0)
        var len = socklen_t(MemoryLayout.size(ofValue: cred))
        let soPeerCred: Int32 = 17  // SO_PEERCRED on Linux (asm-generic/socket.h)
        guard getsockopt(fd, SOL_SOCKET, soPeerCred, &cred, &len) == 0, cred.0 > 0 else { return nil }
        return cred
    }
}
