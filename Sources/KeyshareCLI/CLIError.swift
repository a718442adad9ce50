import Keychain
import KeyshareCrypto

/// A failure worded for the user; the message is the whole line they see.
struct CLIError: Error, CustomStringConvertible {
    let description: String
    init(_ message: String) { description = message }
}

/// One clear line per error, whatever layer it came from, and never a secret:
/// lower layers put no key material or PIN into their errors.
enum ErrorText {
    static func describe(_ error: Error) -> String {
        if let e = error as? CLIError { return e.description }
        if let e = error as? CryptoError { return crypto(e) }
        return String(describing: error)
    }

    static func crypto(_ e: CryptoError) -> String {
        switch e.kind {
        case .wrongPassword: "wrong password for the PKCS #12 file"
        case .notPKCS12: "not a PKCS #12 file"
        case .corruptPKCS12: "the PKCS #12 file is corrupt or truncated (\(e.reason))"
        case .noPrivateKey: "the PKCS #12 file holds no private key (certificate only)"
        default: e.description
        }
    }
}
