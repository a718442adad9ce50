import Keychain
import KeyshareCrypto
import KeyshareTPM

/// TPM tokens (docs/tpm.md): keys created in the TPM, whose private part
/// never leaves it; the store keeps the TPM-encrypted blob and the public
/// parts. The token ID names the TPM: `com.keyshare.tpm:<EK>-<token>`, the
/// first part a fingerprint of the TPM's endorsement key.
public enum TPMToken {
    public static let driverClass = "com.keyshare.tpm"

    public static func isTPM(_ id: TokenID) -> Bool { id.driverClass == driverClass }

    public static func keyKind(_ spec: KeySpec) throws -> TPMKeyKind {
        switch spec {
        case .ec(.p256): return .p256
        case .ec(.p384): return .p384
        case .rsa(2048): return .rsa2048
        case .rsa(3072): return .rsa3072
        default: throw TokensError.unsupported("a TPM token makes EC P-256/P-384 and RSA 2048/3072 keys")
        }
    }

    /// The public key of a TPM key blob, as OpenSSL sees it.
    public static func publicKey(ofBlob blob: [UInt8]) throws -> PublicKey {
        switch try TPM.publicKey(ofBlob: blob) {
        case .ec(let kind, let x, let y):
            return try PublicKey(curve: kind == .p256 ? .p256 : .p384, point: [0x04] + x + y)
        case .rsa(_, let n, let e):
            return try PublicKey(rsaModulus: n, exponent: e)
        }
    }
}

extension TokenManager {
    /// A soft token whose key also needs a secret sealed in this machine's TPM (`bindPCRs` non-nil).
    public func createSoftToken(label: String, soPIN: [UInt8], userPIN: [UInt8], bindPCRs: [Int]?,
                                consent: TokenConsent = .off) throws -> TokenRecord {
        while true {
            let serial = ObjectTemplates.hex(try SecureRandom.bytes(8))
            guard let id = TokenID(driverClass: SoftToken.driverClass, instance: serial) else {
                throw KeychainError.invalidArgument("bad token ID")
            }
            do {
                return try store.createToken(id, label: label, soPIN: soPIN, userPIN: userPIN, serial: serial, bindPCRs: bindPCRs,
                                             consent: consent)
            } catch KeychainError.tokenExists {
                continue
            }
        }
    }

    /// A TPM token on the TPM the store's TCTI names.
    public func createTPMToken(label: String, soPIN: [UInt8], userPIN: [UInt8], consent: TokenConsent = .off) throws -> TokenRecord {
        let tcti = store.tpmSite()
        let ek: [UInt8]
        do {
            ek = try TPM.with(tcti) { try $0.endorsementKeyPublic() }
        } catch let e as TPMError {
            throw KeychainError.tpmUnavailable("cannot create a TPM token: \(e)")
        }
        let tpmPart = ObjectTemplates.hex(Array(DigestAlgorithm.sha256.hash(ek).prefix(8)))
        while true {
            let serial = ObjectTemplates.hex(try SecureRandom.bytes(8))
            guard let id = TokenID(driverClass: TPMToken.driverClass, instance: tpmPart + "-" + serial) else {
                throw KeychainError.invalidArgument("bad token ID")
            }
            do {
                return try store.createTPMToken(id, label: label, soPIN: soPIN, userPIN: userPIN, serial: serial, consent: consent)
            } catch KeychainError.tokenExists {
                continue
            }
        }
    }

    /// A key pair generated inside the TPM (CKA_LOCAL true, never extractable).
    public func generateTPMKeyPair(_ spec: KeySpec, label: String, id: [UInt8]? = nil, into token: TokenID, key: TokenKey)
        throws -> (privateKey: PersistentReference, publicKey: PersistentReference) {
        let kind = try TPMToken.keyKind(spec)
        let tcti = store.tpmSite()
        let auth = try key.tpmObjectAuth()
        let blob: [UInt8]
        do {
            blob = try TPM.with(tcti) { c in
                guard c.supports(kind) else { throw TokensError.unsupported("this TPM does not offer \(kind) keys") }
                return try c.createKey(kind, auth: auth)
            }
        } catch let e as TPMError {
            throw KeychainError.tpmUnavailable("cannot create the key in the TPM: \(e)")
        }
        return try storeTPMKey(blob: blob, label: label, id: id, into: token, key: key, local: true, auth: auth)
    }

    /// TPM2_Import of an existing key (CKA_LOCAL false: it was not born in the TPM).
    ///
    /// As `keyshare import` does for soft tokens (`importPrivateKey`), the key
    /// is first looked for in the token by its public key (`KeyPairing.find`):
    /// a private key already there is the result, with nothing imported
    /// (`duplicate`), so a second import of the same file makes no second TPM
    /// object; a public key or certificate already there gives the new private
    /// key its CKA_ID and label. `label` nil: the pair's label, else the
    /// SHA-256 hex of the public key. A `--id` that contradicts the pair's is
    /// refused (`ImportError.idMismatch`), as for soft tokens.
    public func importIntoTPM(_ k: PrivateKey, label: String?, id: [UInt8]? = nil, into token: TokenID, key: TokenKey)
        throws -> ImportResult {
        let pub = k.publicKey
        let pair = try KeyPairing.find(pub, in: token, store: store, key: key)
        let chosenID = try chooseID(id, pairID: pair.flatMap { $0.id.isEmpty ? nil : $0.id }, fallback: pub.keyIdentifier(),
                                    publicKey: pub, token: token, key: key)
        let name = try label ?? pair?.label ?? ObjectTemplates.hex(DigestAlgorithm.sha256.hash(pub.spkiDER()))
        if let existing = pair?.privateKey {
            let items = [ImportedItem(existing, role: .privateKey)] + (pair?.publicKey.map { [ImportedItem($0, role: .publicKey)] } ?? [])
            return ImportResult(label: items[0].label, id: items[0].id, items: items)
        }
        let tcti = store.tpmSite()
        let auth = try key.tpmObjectAuth()
        let blob: [UInt8]
        do {
            blob = try importBlob(k, site: tcti, auth: auth)
        } catch let e as TPMError {
            throw KeychainError.tpmUnavailable("cannot import the key into the TPM: \(e)")
        }
        let (priv, pubAttrs) = try TPMToken.keyAttributes(blob: blob, label: name, id: chosenID, local: false)
        return try store.transaction {
            let p = try store.add(token: token, itemClass: .privateKey, attributes: priv, key: key)
            var items = [ImportedItem(role: .privateKey, reference: p, label: name, id: chosenID, created: true)]
            if let q = pair?.publicKey {
                items.append(ImportedItem(q, role: .publicKey))
            } else {
                let q = try store.add(token: token, itemClass: .publicKey, attributes: pubAttrs, key: key)
                items.append(ImportedItem(role: .publicKey, reference: q, label: name, id: chosenID, created: true))
            }
            return ImportResult(label: name, id: chosenID, items: items)
        }
    }

    /// TPM2_Import under the storage root key: the blob the store keeps.
    private func importBlob(_ k: PrivateKey, site tcti: TPMSite, auth: [UInt8]) throws -> [UInt8] {
        try TPM.with(tcti) { c in
            switch k.keyType {
            case .ec:
                guard let point = k.publicKey.ecPoint, let curve = k.publicKey.curve, curve == .p256 || curve == .p384 else {
                    throw TokensError.unsupported("a TPM token imports EC P-256/P-384 and RSA 2048/3072 keys")
                }
                let n = (point.count - 1) / 2
                return try c.importEC(curve == .p256 ? .p256 : .p384, d: try k.ecPrivateScalar(), x: Array(point[1...n]),
                                      y: Array(point[(n + 1)...]), auth: auth)
            case .rsa where k.bits == 2048 || k.bits == 3072:
                let parts = try k.rsaPrivateComponents()
                let e = parts.publicExponent.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                return try c.importRSA(k.bits == 2048 ? .rsa2048 : .rsa3072, modulus: Array(parts.modulus.drop { $0 == 0 }),
                                       exponent: e, prime: Array(parts.p.drop { $0 == 0 }), auth: auth)
            default:
                throw TokensError.unsupported("a TPM token imports EC P-256/P-384 and RSA 2048/3072 keys")
            }
        }
    }

    /// A generated key also gets its attestation, certified by the token's AK at once, as a
    /// CKO_DATA object (`TPMToken.generationAttestation`, docs/tpm.md "Key attestation").
    private func storeTPMKey(blob: [UInt8], label: String, id: [UInt8]?, into token: TokenID, key: TokenKey, local: Bool,
                             auth: [UInt8]) throws -> (privateKey: PersistentReference, publicKey: PersistentReference) {
        let (priv, pubAttrs) = try TPMToken.keyAttributes(blob: blob, label: label, id: id, local: local)
        let attestation = local ? TPMToken.generationAttestation(blob: blob, auth: auth, token: token, label: label,
                                                                 id: pubAttrs[CKA.id] ?? [], site: store.tpmSite()) : nil
        return try store.transaction {
            let p = try store.add(token: token, itemClass: .privateKey, attributes: priv, key: key)
            let q = try store.add(token: token, itemClass: .publicKey, attributes: pubAttrs, key: key)
            if let attestation { _ = try store.add(token: token, itemClass: .data, attributes: attestation, key: key) }
            return (p, q)
        }
    }
}

extension TPMToken {
    /// The private and public key objects of a TPM key blob.
    public static func keyAttributes(blob: [UInt8], label: String, id: [UInt8]?, local: Bool) throws -> (AttributeMap, AttributeMap) {
        let pub = try TPMToken.publicKey(ofBlob: blob)
        let cid = try id ?? pub.keyIdentifier()
        let pubAttrs = try ObjectTemplates.publicKey(pub, label: label, id: cid, local: local)
        // The private key object: the public key's attributes plus the private-key
        // ones; no PKCS #8 (there is none outside the TPM), the TPM blob instead.
        let f = ObjectTemplates.flags(pub.keyType, nil)
        var priv = pubAttrs.filter { [CKA.keyType, CKA.label, CKA.id, CKA.subject, CKA.publicKeyInfo, CKA.modulus,
                                       CKA.publicExponent, CKA.modulusBits, CKA.ecParams, CKA.keyGenMechanism].contains($0.key) }
        priv.merge([
            CKA.class: AttributeCoding.ulong(CKO.privateKey),
            CKA.token: AttributeCoding.bool(true),
            CKA.private: AttributeCoding.bool(true),
            CKA.modifiable: AttributeCoding.bool(true),
            CKA.sensitive: AttributeCoding.bool(true),
            CKA.extractable: AttributeCoding.bool(false),
            CKA.alwaysSensitive: AttributeCoding.bool(local),
            CKA.neverExtractable: AttributeCoding.bool(local),
            CKA.local: AttributeCoding.bool(local),
            CKA.alwaysAuthenticate: AttributeCoding.bool(false),
            CKA.wrapWithTrusted: AttributeCoding.bool(false),
            CKA.sign: AttributeCoding.bool(f.sign),
            CKA.signRecover: AttributeCoding.bool(false),
            CKA.decrypt: AttributeCoding.bool(f.decrypt),
            CKA.unwrap: AttributeCoding.bool(f.decrypt),
            CKA.derive: AttributeCoding.bool(false),
            CKA.keyshareTPM: blob,
        ]) { _, new in new }
        return (priv, pubAttrs)
    }
}
