import Keychain
import KeyshareCrypto

/// The label an imported identity gets when the caller names none: a name
/// people read, as browsers, ssh-add and `keyshare list` show it. The
/// PKCS #12 friendlyName (`openssl pkcs12 -name carol`), else the
/// certificate subject's commonName, else its email, else the uppercase hex
/// SHA-256 of the certificate (the key-sharing label, which is also what a
/// shared legacy PKCS #12 carries as its friendlyName).
public enum IdentityLabel {
    /// Longest default label kept (a label is CKA_LABEL and a URI's `object=`).
    static let maxLength = 128

    public static func readable(friendlyName: String?, certificate: Certificate) -> String {
        for candidate in [friendlyName, certificate.commonName, certificate.email] {
            if let c = candidate.map(clean), !c.isEmpty { return c }
        }
        return ObjectTemplates.hex(certificate.sha256Fingerprint)
    }

    /// Without control characters and surrounding spaces, at most maxLength characters.
    static func clean(_ s: String) -> String {
        var t = String(String.UnicodeScalarView(s.unicodeScalars.filter { $0.properties.generalCategory != .control }))
        while t.first == " " { t.removeFirst() }
        while t.last == " " { t.removeLast() }
        return String(t.prefix(maxLength))
    }
}

extension TokenManager {
    /// `base` when no object of the token carries it, else `base (2)`,
    /// `base (3)` ...: a default label names one identity in its token, so
    /// `keyshare export carol` and a URI's `object=carol` find exactly it.
    func uniqueLabel(_ base: String, token: TokenID, key: TokenKey?) throws -> String {
        func taken(_ label: String) throws -> Bool {
            try !store.find(ItemQuery(tokenID: token, attributes: [CKA.label: AttributeCoding.string(label)], limit: .one),
                            key: key).isEmpty
        }
        guard try taken(base) else { return base }
        for n in 2...999 {
            let candidate = "\(base) (\(n))"
            if try !taken(candidate) { return candidate }
        }
        throw KeychainError.invalidArgument("999 objects of this token are labelled \"\(base)\": give --label")
    }

    /// The default label of a new identity (or end-entity certificate) whose
    /// key pair and certificate are not in the token yet.
    func defaultLabel(friendlyName: String?, certificate: Certificate, token: TokenID, key: TokenKey?) throws -> String {
        try uniqueLabel(IdentityLabel.readable(friendlyName: friendlyName, certificate: certificate), token: token, key: key)
    }
}
