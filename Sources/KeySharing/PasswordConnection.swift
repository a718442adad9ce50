import Foundation

/// One client connection of the password service: reads at most one request
/// line within the size bound and the deadline, then writes one reply and closes.
final class Connection {
    let fd: Int32
    let peer: PeerCredentials?
    var deadline: Int64
    var input: [UInt8] = []
    var pending: [UInt8] = []
    var answered = false
    private(set) var closed = false

    typealias Handler = (Result<[UInt8], PasswordProtocol.ProtocolError>, PeerCredentials?) -> [UInt8]

    init(fd: Int32, peer: PeerCredentials?) {
        self.fd = fd
        self.peer = peer
        deadline = Self.monotonicMilliseconds() + Int64(PasswordProtocol.requestTimeoutMilliseconds)
    }

    static func monotonicMilliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// Handles readiness; returns true when the connection is finished (closed).
    func service(revents: Int16, handle: Handler) -> Bool {
        if !pending.isEmpty {
            return flush()
        }
        if revents & Int16(POLLIN | POLLHUP | POLLERR) == 0 { return false }
        var buf = [UInt8](repeating: 0, count: PasswordProtocol.maxRequestBytes + 1)
        let room = PasswordProtocol.maxRequestBytes + 1 - input.count
        let n = read(fd, &buf, room)
        if n < 0 {
            if errno == EAGAIN || errno == EINTR { return false }
            return finish()
        }
        if n == 0 {
            // The client shut its side: whatever came is all there is.
            let error = input.isEmpty ? "empty request" : "incomplete request: no end of line"
            return reply(handle(.failure(.init(error)), peer))
        }
        input += buf[0..<n]
        if let newline = input.firstIndex(of: 0x0A) {
            return reply(handle(.success(Array(input[..<newline])), peer))
        }
        if input.count > PasswordProtocol.maxRequestBytes {
            return reply(handle(.failure(.init("request too large (limit \(PasswordProtocol.maxRequestBytes) bytes)")), peer))
        }
        return false
    }

    /// The deadline passed: a client still sending gets a timeout reply (one
    /// non-blocking attempt); one that never read its reply is just closed.
    func expire(handle: Handler) {
        if pending.isEmpty && !answered {
            _ = reply(handle(.failure(.init("timeout: no complete request within \(PasswordProtocol.requestTimeoutMilliseconds) ms")), peer))
        }
        if !closed { _ = finish() }
    }

    private func reply(_ bytes: [UInt8]) -> Bool {
        answered = true
        pending = bytes
        deadline = Self.monotonicMilliseconds() + Int64(PasswordProtocol.requestTimeoutMilliseconds)
        return flush()
    }

    private func flush() -> Bool {
        while !pending.isEmpty {
            let n = pending.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EAGAIN || errno == EINTR { return false }
                return finish()
            }
            pending.removeFirst(n)
        }
        return finish()
    }

    private func finish() -> Bool {
        pending.removeAll()
        if !closed { close(fd) }
        closed = true
        return true
    }
}
