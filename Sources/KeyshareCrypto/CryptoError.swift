import COpenSSL

/// Every OpenSSL failure surfaces as one of these, carrying OpenSSL's own
/// reason text so a user sees *why* (bad decrypt, mac verify failure, ...),
/// never a crash and never key material.
public struct CryptoError: Error, Equatable, CustomStringConvertible, Sendable {
    public enum Kind: Sendable, Equatable {
        case openssl
        case invalidInput
        case unsupported
        case authenticationFailed
        case wrongPassword
        case notPKCS12
        case corruptPKCS12
        case noPrivateKey
        case dataTooLong
        case verificationFailed
    }

    public let kind: Kind
    public let operation: String
    public let reason: String

    public init(_ kind: Kind, _ operation: String, reason: String) {
        self.kind = kind
        self.operation = operation
        self.reason = reason
    }

    public var description: String { reason.isEmpty ? operation : "\(operation): \(reason)" }

    /// Drains OpenSSL's thread-local error queue into one error, so the next
    /// call on this thread starts with a clean queue.
    public static func openssl(_ operation: String, kind: Kind = .openssl) -> CryptoError {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            if let r = ERR_reason_error_string(code) {
                reasons.append(String(cString: r))
            } else {
                reasons.append("error \(code)")
            }
        }
        return CryptoError(kind, operation, reason: reasons.isEmpty ? "unknown OpenSSL error" : reasons.joined(separator: "; "))
    }

    static func clearQueue() { ERR_clear_error() }
}
