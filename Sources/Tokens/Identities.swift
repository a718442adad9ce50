import Keychain
import KeyshareCrypto

/// A certificate and the private key it certifies, paired by the public key
/// (as on Apple's keychain, where an identity is found through the key's
/// public part): never by CKA_ID alone, so a certificate whose ID differs
/// from its key's (imported before the key, or by a tool that chose another
/// ID) is still an identity, and a key that merely shares an ID is not.
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
    /// Certificates with their keys. Each key is found by its public key
    /// (KeyPairing: index seeks on CKA_PUBLIC_KEY_INFO, modulus or point).
    /// An end-entity certificate is listed with or without its key (nil
    /// reference: not in the token, or not visible). A CA certificate is an
    /// identity only when its private key is in the token: a self-signed
    /// `openssl req -x509` certificate (basicConstraints CA:TRUE, what most
    /// people test with) imported with its key is one and can be exported and
    /// shared; a chain member alone is not. Without the token key private keys
    /// are invisible, so there the public key object stands for the pair.
    public func identities(in token: TokenID?, key: TokenKey?) throws -> [Identity] {
        let certs = try store.find(ItemQuery(tokenID: token, itemClass: .certificate), key: key)
        var out: [Identity] = []
        for item in certs {
            guard let der = item.attributes[CKA.value], let cert = try? Certificate(der: der) else { continue }
            let visibleKey = key?.tokenID == item.tokenID ? key : nil
            let pair = try KeyPairing.find(cert.publicKey, in: item.tokenID, store: store, key: visibleKey)
            if item.attributes.ulong(CKA.certificateCategory) == CertificateCategory.authority || cert.isCA {
                let hasKey = visibleKey == nil ? pair?.publicKey != nil || pair?.privateKey != nil : pair?.privateKey != nil
                if !hasKey { continue }
            }
            out.append(Identity(
                tokenID: item.tokenID, label: item.attributes.string(CKA.label).flatMap { $0.isEmpty ? nil : $0 } ?? ObjectTemplates.hex(cert.sha256Fingerprint),
                id: item.attributes[CKA.id] ?? [], certificate: cert, certificateReference: item.reference,
                privateKeyReference: pair?.privateKey?.reference, publicKeyReference: pair?.publicKey?.reference))
        }
        return out
    }

    /// The private key object of an identity, decrypted (needs the token key).
    public func privateKey(_ ref: PersistentReference, key: TokenKey) throws -> PrivateKey {
        let item = try store.item(ref, key: key)
        guard let der = item.attributes[CKA.keysharePKCS8] else {
            if item.attributes[CKA.keyshareTPM] != nil {
                throw KeychainError.invalidArgument("the private key of item \(ref) lives in the TPM and can never leave it")
            }
            throw KeychainError.invalidArgument("item \(ref) holds no private key material")
        }
        return try PrivateKey(der: der)
    }
}
