import Keychain
import KeyshareCrypto
import Tokens

/// The key-sharing fallback for apps that cannot use PKCS #11: an identity
/// leaves the keychain only as a PKCS #12 sealed with the shared password.
public enum IdentityExport {
    public enum ExportError: Error, CustomStringConvertible {
        case notExportable(String)
        case noPrivateKey(String)
        case inTPM(String)

        public var description: String {
            switch self {
            case .notExportable(let label): "the private key of \(label) is marked non-exportable"
            case .noPrivateKey(let label): "\(label) has no private key in the keychain (certificate only)"
            case .inTPM(let label): "the private key of \(label) lives in the TPM and can never leave it: a TPM token's keys cannot be exported"
            }
        }
    }

    /// Builds the PKCS #12 bytes of one identity under `password`.
    public static func pkcs12(
        of identity: Identity, store: KeychainStore, key: TokenKey,
        password: String, profile: PKCS12.Profile
    ) throws -> [UInt8] {
        guard let keyRef = identity.privateKeyReference else {
            throw ExportError.noPrivateKey(identity.label)
        }
        let item = try store.item(keyRef, key: key)
        if item.attributes[CKA.keyshareTPM] != nil { throw ExportError.inTPM(identity.label) }
        if let extractable = item.attributes[CKA.extractable], extractable.first == 0 {
            throw ExportError.notExportable(identity.label)
        }
        guard let pkcs8 = item.attributes[CKA.keysharePKCS8] else {
            throw ExportError.noPrivateKey(identity.label)
        }
        let privateKey = try PrivateKey(der: pkcs8)
        let chain = profile == .modern ? try chainCertificates(for: identity.certificate, store: store) : []
        return try PKCS12.build(
            privateKey: privateKey, certificate: identity.certificate, chain: chain,
            friendlyName: identity.label, password: password, profile: profile)
    }

    /// Issuers of the certificate found in the keychain, leaf-first order, stopping
    /// at a self-signed one. The modern profile includes them (spec §4).
    static func chainCertificates(for leaf: Certificate, store: KeychainStore) throws -> [Certificate] {
        var chain: [Certificate] = []
        var current = leaf
        var seen: Set<[UInt8]> = [leaf.der]
        while current.issuerDER != current.subjectDER, chain.count < 8 {
            let query = ItemQuery(itemClass: .certificate, attributes: [CKA.subject: current.issuerDER], limit: .all)
            guard let issuerItem = try store.find(query, key: nil).first,
                  let der = issuerItem.attributes[CKA.value],
                  let issuer = try? Certificate(der: der),
                  !seen.contains(issuer.der) else { break }
            seen.insert(issuer.der)
            chain.append(issuer)
            current = issuer
        }
        return chain
    }
}
