import Keychain
import KeyshareCrypto

public struct ImportResult: Sendable {
    /// Uppercase hex SHA-256 of the certificate (or of the public key when there is none).
    public var label: String
    /// CKA_ID shared by the key, public key and certificate.
    public var id: [UInt8]
    public var certificate: PersistentReference?
    public var privateKey: PersistentReference?
    public var publicKey: PersistentReference?
    /// References of the chain certificates (already present ones included).
    public var chain: [PersistentReference]
    /// True when everything was already in the token: nothing was written.
    public var duplicate: Bool
}

extension TokenManager {
    /// Imports a PKCS #12 identity in one transaction. Parse errors are the
    /// CryptoError kinds .wrongPassword / .notPKCS12 / .corruptPKCS12, and a
    /// file without a private key is .noPrivateKey; all are raised before
    /// anything is written.
    public func importPKCS12(_ data: [UInt8], password: String, into token: TokenID, key: TokenKey) throws -> ImportResult {
        let contents = try PKCS12.parse(data, password: password)
        guard let privateKey = contents.privateKey else {
            throw CryptoError(.noPrivateKey, "PKCS #12 import", reason: "the file holds no private key (certificate only)")
        }
        guard let cert = contents.certificate else {
            throw CryptoError(.corruptPKCS12, "PKCS #12 import", reason: "the file holds no certificate for its key")
        }
        guard privateKey.matches(cert.publicKey) else { throw TokensError.keyCertificateMismatch }
        return try store.transaction {
            try addIdentity(privateKey: privateKey, certificate: cert, chain: contents.chain, token: token, key: key)
        }
    }

    /// A certificate on its own (for example a CA, or the certificate for a
    /// key already in the token, with which it then forms an identity).
    public func importCertificate(_ cert: Certificate, into token: TokenID, key: TokenKey?) throws -> ImportResult {
        try store.transaction {
            let id = try cert.publicKey.keyIdentifier()
            let label = ObjectTemplates.hex(cert.sha256Fingerprint)
            let existing = try findCertificate(cert, token: token)
            let ref = try existing ?? store.add(
                token: token, itemClass: .certificate,
                attributes: ObjectTemplates.certificate(cert, label: label, id: id, category: category(of: cert)), key: key)
            return ImportResult(label: label, id: id, certificate: ref, privateKey: nil, publicKey: nil, chain: [],
                                duplicate: existing != nil)
        }
    }

    /// A bare private key (and its public key); `label` defaults to the
    /// uppercase hex SHA-256 of its public key's SubjectPublicKeyInfo.
    public func importPrivateKey(_ privateKey: PrivateKey, label: String?, into token: TokenID, key: TokenKey) throws -> ImportResult {
        try store.transaction {
            let id = try privateKey.publicKey.keyIdentifier()
            let name = try label ?? ObjectTemplates.hex(DigestAlgorithm.sha256.hash(privateKey.publicKey.spkiDER()))
            let (priv, pub, added) = try addKeyPair(privateKey, label: name, id: id, usage: nil, subject: nil, token: token, key: key)
            return ImportResult(label: name, id: id, certificate: nil, privateKey: priv, publicKey: pub, chain: [], duplicate: !added)
        }
    }

    func addIdentity(privateKey: PrivateKey, certificate cert: Certificate, chain: [Certificate],
                     token: TokenID, key: TokenKey) throws -> ImportResult {
        let id = try cert.publicKey.keyIdentifier()
        let label = ObjectTemplates.hex(cert.sha256Fingerprint)
        let existingCert = try findCertificate(cert, token: token)
        let certRef = try existingCert ?? store.add(
            token: token, itemClass: .certificate,
            attributes: ObjectTemplates.certificate(cert, label: label, id: id, category: CertificateCategory.tokenUser),
            key: key)
        let (priv, pub, keyAdded) = try addKeyPair(privateKey, label: label, id: id, usage: cert.keyUsage,
                                                   subject: cert.subjectDER, token: token, key: key)
        var chainRefs: [PersistentReference] = []
        var chainAdded = false
        for c in chain where c.der != cert.der {
            if let r = try findCertificate(c, token: token) {
                chainRefs.append(r)
                continue
            }
            let cid = try c.publicKey.keyIdentifier()
            chainRefs.append(try store.add(
                token: token, itemClass: .certificate,
                attributes: ObjectTemplates.certificate(c, label: ObjectTemplates.hex(c.sha256Fingerprint), id: cid,
                                                        category: category(of: c)),
                key: key))
            chainAdded = true
        }
        return ImportResult(label: label, id: id, certificate: certRef, privateKey: priv, publicKey: pub, chain: chainRefs,
                            duplicate: existingCert != nil && !keyAdded && !chainAdded)
    }

    /// Adds the private and public key objects unless a key with this CKA_ID
    /// is already there; returns whether anything was written.
    func addKeyPair(_ k: PrivateKey, label: String, id: [UInt8], usage: KeyUsage?, subject: [UInt8]?,
                    token: TokenID, key: TokenKey) throws -> (PersistentReference, PersistentReference?, Bool) {
        var added = false
        let priv: PersistentReference
        if let existing = try store.find(
            ItemQuery(tokenID: token, itemClass: .privateKey, attributes: [CKA.id: id], limit: .one), key: key).first {
            priv = existing.reference
        } else {
            priv = try store.add(token: token, itemClass: .privateKey, attributes: ObjectTemplates.privateKey(
                k, label: label, id: id, extractable: true, local: false, usage: usage, subject: subject), key: key)
            added = true
        }
        let pub: PersistentReference
        if let existing = try store.find(
            ItemQuery(tokenID: token, itemClass: .publicKey, attributes: [CKA.id: id], limit: .one), key: key).first {
            pub = existing.reference
        } else {
            pub = try store.add(token: token, itemClass: .publicKey, attributes: ObjectTemplates.publicKey(
                k.publicKey, label: label, id: id, local: false, usage: usage, subject: subject), key: key)
            added = true
        }
        return (priv, pub, added)
    }

    func findCertificate(_ c: Certificate, token: TokenID) throws -> PersistentReference? {
        try store.find(ItemQuery(tokenID: token, itemClass: .certificate, attributes: [CKA.value: c.der], limit: .one),
                       key: nil).first?.reference
    }

    func category(of c: Certificate) -> UInt {
        c.isCA ? CertificateCategory.authority : CertificateCategory.unspecified
    }
}
