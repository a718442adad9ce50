import FoundationEssentials
import Glibc

/// The wire format of the password service (docs/password-service.md): one
/// JSON line in, one JSON line out, then the server closes. Versioned so a
/// later call set can be added without breaking today's clients.
public enum PasswordProtocol {
    public static let version = 1
    public static let serviceName = "red.hound.KeySharingPassword-v1.0.0"
    public static let fetchPassword = "fetchPassword"
    /// A request is a few dozen bytes; anything past this is refused unread.
    public static let maxRequestBytes = 4096
    /// How long a client has to send its whole request line.
    public static let requestTimeoutMilliseconds = 2000

    public struct Request: Codable, Sendable, Equatable {
        public var v: Int
        public var service: String
        public var call: String

        public init(v: Int = PasswordProtocol.version, service: String = PasswordProtocol.serviceName,
                    call: String = PasswordProtocol.fetchPassword) {
            self.v = v
            self.service = service
            self.call = call
        }
    }

    public struct Reply: Codable, Sendable, Equatable {
        public var v: Int
        public var state: String
        public var password: String?
        public var error: String?

        public init(state: AccessState, password: String? = nil, error: String? = nil) {
            v = PasswordProtocol.version
            self.state = state.rawValue
            self.password = password
            self.error = error
        }
    }

    /// Why a request line was not a request; the server answers `no-request`.
    public static func validate(_ line: [UInt8]) -> Result<Request, ProtocolError> {
        guard let request = try? JSONDecoder().decode(Request.self, from: Data(line)) else {
            return .failure(ProtocolError("malformed request: expected one JSON object with v, service and call"))
        }
        guard request.v == version else { return .failure(ProtocolError("unsupported protocol version \(request.v)")) }
        guard request.service == serviceName else { return .failure(ProtocolError("unknown service")) }
        guard request.call == fetchPassword else { return .failure(ProtocolError("unknown call")) }
        return .success(request)
    }

    public static func encode<T: Encodable>(_ value: T) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return ((try? encoder.encode(value)).map { [UInt8]($0) } ?? Array(#"{"v":1,"state":"no-request"}"#.utf8)) + [0x0A]
    }

    public struct ProtocolError: Error, CustomStringConvertible, Sendable {
        public let description: String
        public init(_ message: String) { description = message }
    }
}

/// Where the service listens: $XDG_RUNTIME_DIR/keyshare/password.sock (a
/// per-user tmpfs the login manager makes 0700), else /tmp/keyshare-$UID/.
public enum PasswordSocket {
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty { return runtime + "/keyshare" }
        return "/tmp/keyshare-\(getuid())"
    }

    public static func defaultPath() -> String { defaultDirectory() + "/password.sock" }
}
