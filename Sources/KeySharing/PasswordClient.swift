import FoundationEssentials
import Glibc

/// The consumer's side of the password service: one request, one reply.
public enum PasswordClient {
    public enum ClientError: Error, CustomStringConvertible, Equatable {
        /// Nothing answers on the socket (service not running, or not ours to reach).
        case unreachable(path: String, reason: String)
        /// The service answered and refused, naming its state.
        case refused(state: String, reason: String)
        case protocolError(String)
        /// No reply within the client's own time limit (the service is busy or stuck).
        case timedOut(path: String, seconds: Int)

        public var description: String {
            switch self {
            case .unreachable(let path, let reason):
                "cannot reach the password service at \(path): \(reason)"
            case .refused(let state, let reason):
                "the password service refused: \(state) (\(reason))"
            case .protocolError(let why):
                "the password service gave an invalid reply: \(why)"
            case .timedOut(let path, let seconds):
                "the password service at \(path) did not answer within \(seconds) s (it may be overloaded); try again"
            }
        }
    }

    /// Fetches the shared password; throws `.refused` with the service's state.
    public static func fetchPassword(socketPath: String, timeoutSeconds: Int = 5) throws -> String {
        let reply = try exchange(socketPath: socketPath, request: PasswordProtocol.encode(PasswordProtocol.Request()),
                                 timeoutSeconds: timeoutSeconds)
        guard let decoded = try? JSONDecoder().decode(PasswordProtocol.Reply.self, from: Data(reply)) else {
            throw ClientError.protocolError("not a JSON reply")
        }
        guard decoded.v == PasswordProtocol.version else { throw ClientError.protocolError("version \(decoded.v)") }
        if decoded.state == AccessState.notBlocked.rawValue, let password = decoded.password { return password }
        throw ClientError.refused(state: decoded.state, reason: decoded.error ?? "no reason given")
    }

    /// Sends raw bytes and reads the reply line (tests use it for bad requests).
    public static func exchange(socketPath: String, request: [UInt8], timeoutSeconds: Int = 5) throws -> [UInt8] {
        let fd = try connect(socketPath, timeoutSeconds: timeoutSeconds)
        defer { close(fd) }
        var offset = 0
        while offset < request.count {
            let n = request[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { break }  // the server may close early on an oversized request: read its reply
            offset += n
        }
        // One deadline for the whole reply: SO_RCVTIMEO bounds each read, the clock the sum.
        let deadline = Connection.monotonicMilliseconds() + Int64(timeoutSeconds) * 1000
        var reply: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        var timedOut = false
        while reply.count < 65536 {
            let n = read(fd, &buf, buf.count)
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { timedOut = true; break }
            if n <= 0 { break }
            reply += buf[0..<n]
            if reply.last == 0x0A { break }
            if Connection.monotonicMilliseconds() >= deadline { timedOut = true; break }
        }
        if timedOut && reply.last != 0x0A { throw ClientError.timedOut(path: socketPath, seconds: timeoutSeconds) }
        guard !reply.isEmpty else { throw ClientError.protocolError("the service closed the connection without a reply") }
        return reply.last == 0x0A ? Array(reply.dropLast()) : reply
    }

    /// Whether a server accepts connections on `path` (used to detect a stale socket).
    public static func isListening(_ path: String) -> Bool {
        guard let fd = try? connect(path, timeoutSeconds: 1) else { return false }
        close(fd)
        return true
    }

    static func connect(_ path: String, timeoutSeconds: Int) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ClientError.unreachable(path: path, reason: String(cString: strerror(errno))) }
        var tv = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = UnixAddress(path)
        guard addr.withSockaddr({ Glibc.connect(fd, $0, $1) }) == 0 else {
            let code = errno
            close(fd)
            // A full listen queue: connect() waited SO_SNDTIMEO for room.
            if code == EAGAIN || code == EWOULDBLOCK || code == ETIMEDOUT {
                throw ClientError.timedOut(path: path, seconds: timeoutSeconds)
            }
            let reason: String
            switch code {
            case ENOENT, ECONNREFUSED: reason = "no service is running (start it with `keyshare serve`)"
            case EACCES, EPERM: reason = "permission denied (the service belongs to another user)"
            default: reason = String(cString: strerror(code))
            }
            throw ClientError.unreachable(path: path, reason: reason)
        }
        return fd
    }
}
