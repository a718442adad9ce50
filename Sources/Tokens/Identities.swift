import Keychain
import KeyshareCrypto

/// A certificate and the private key it certifies, paired by CKA_ID as on
/// Apple's keychain (where an identity is found through the key's public part).
public struct Identity: Sendable {
    public var tokenID: TokenID
    public var label: String
    public var id: [UInt8]
    public var certificate: Certificate
    public var certificateReference: PersistentReference
    /// nil when the key is not in the keychain, or not visible without the token key.
    public var privateKeyReference: PersistentReference?
    public var publicKeyReference: PersistentReference?
}

extension TokenManager {
    /// End-entity certificates with their keys. CA certificates (chain
    /// members) are not identities. Each key is an index seek by CKA_ID.
    public func identities(in token: TokenID?, key: TokenKey?) throws -> [Identity] {
        let certs = try store.find(ItemQuery(tokenID: token, itemClass: .certificate), key: key)
        var out: [Identity] = []
        for item in certs {
            guard let der = item.attributes[CKA.value], let cert = try? Certificate(der: der) else { continue }
            if item.attributes.ulong(CKA.certificateCategory) == CertificateCategory.authority || cert.isCA { continue }
            let id = item.attributes[CKA.id] ?? []
            let visibleKey = key?.tokenID == item.tokenID ? key : nil
            let priv = try store.find(ItemQuery(tokenID: item.tokenID, itemClass: .privateKey, attributes: [CKA.id: id],
                                                limit: .one), key: visibleKey).first
            let pub = try store.find(ItemQuery(tokenID: item.tokenID, itemClass: .publicKey, attributes: [CKA.id: id],
                                               limit: .one), key: visibleKey).first
            out.append(Identity(
                tokenID: item.tokenID, label: item.attributes.string(CKA.label) ?? ObjectTemplates.hex(cert.sha256Fingerprint),
                id: id, certificate: cert, certificateReference: item.reference,
                privateKeyReference: priv?.reference, publicKeyReference: pub?.reference))
        }
        return out
    }

    /// The private key object of an identity, decrypted (needs the token key).
    public func privateKey(_ ref: PersistentReference, key: TokenKey) throws -> PrivateKey {
        let item = try store.item(ref, key: key)
        guard let der = item.attributes[CKA.keysharePKCS8] else {
            throw KeychainError.invalidArgument("item \(ref) holds no private key material")
        }
        return try PrivateKey(der: der)
    }
}
