import Keychain
import KeyshareCrypto
import Tokens

/// A key from the keychain (the SecKey counterpart): a private key, which
/// signs and decrypts, or a public key, which verifies and encrypts. Each
/// operation first checks the item's usage flags, so a key stored "sign
/// only" refuses to decrypt even though the math would allow it.
public final class KeyRef: @unchecked Sendable {
    public let attributes: ItemAttributes
    let privateKey: PrivateKey?
    /// The public key (of a private key: its public half).
    public let publicKey: PublicKey
    /// A private key of a TPM token: it exists only inside the TPM (docs/tpm.md).
    public let isInTPM: Bool

    init(item: Item, attributes: ItemAttributes) throws {
        self.attributes = attributes
        isInTPM = item.itemClass == .privateKey && item.attributes[CKA.keyshareTPM] != nil
        if isInTPM {
            guard let spki = item.attributes[CKA.publicKeyInfo] else {
                throw KeyShareError.unsupported("TPM key item without SubjectPublicKeyInfo")
            }
            privateKey = nil
            publicKey = try mapped { try PublicKey(spkiDER: spki) }
        } else if item.itemClass == .privateKey {
            guard let der = item.attributes[CKA.keysharePKCS8] else {
                throw KeyShareError.authenticationNeeded("the private key is sealed under its token's key")
            }
            let k = try mapped { try PrivateKey(der: der) }
            privateKey = k
            publicKey = k.publicKey
        } else {
            guard let spki = item.attributes[CKA.publicKeyInfo] else {
                throw KeyShareError.unsupported("public key item without SubjectPublicKeyInfo")
            }
            privateKey = nil
            publicKey = try mapped { try PublicKey(spkiDER: spki) }
        }
    }

    public var isPrivate: Bool { privateKey != nil || isInTPM }
    public var keyType: KeyType { publicKey.keyType }
    public var persistentReference: PersistentReference { attributes.persistentReference }

    private var keyName: String { "\(attributes.label.map { "\"\($0)\"" } ?? "the key")" }

    private func require(_ flag: UsageFlags, _ what: String) throws {
        guard attributes.usage.contains(flag) else {
            throw KeyShareError.operationNotAllowed("\(keyName) is not allowed to \(what)")
        }
    }

    private func requirePrivate(_ what: String) throws -> PrivateKey {
        if isInTPM {
            throw KeyShareError.unsupported("\(keyName) lives in the TPM: \(what) with it through the PKCS #11 module")
        }
        guard let privateKey else { throw KeyShareError.invalidParameter("\(what) needs the private key, this is the public key") }
        return privateKey
    }

    private func describe(_ p: RSAPadding) -> String {
        switch p {
        case .pkcs1: "PKCS #1 v1.5"
        case .oaep(let md, _, _): "OAEP-\(md.name.uppercased())"
        case .raw: "no padding"
        }
    }

    /// Largest plaintext the key and padding can take (RSA only).
    public func maxPlaintextLength(padding: RSAPadding) -> Int {
        let k = (publicKey.bits + 7) / 8
        switch padding {
        case .pkcs1: return k - 11
        case .oaep(let md, _, _): return k - 2 * md.outputSize - 2
        case .raw: return k
        }
    }

    /// SecKeyCreateEncryptedData: RSA encryption with the public key.
    public func encrypt(_ plaintext: [UInt8], padding: RSAPadding) throws -> [UInt8] {
        guard keyType == .rsa else {
            throw KeyShareError.unsupported("\(keyType) keys do not encrypt (RSA only); use an RSA key")
        }
        if !isPrivate { try require(.encrypt, "encrypt") }
        let max = maxPlaintextLength(padding: padding)
        guard plaintext.count <= max else {
            throw KeyShareError.messageTooLong("\(plaintext.count) bytes, but a \(publicKey.bits)-bit RSA key with \(describe(padding)) padding takes at most \(max)")
        }
        return try mapped { try publicKey.encrypt(plaintext, padding: padding) }
    }

    /// SecKeyCreateDecryptedData: RSA decryption with the private key.
    public func decrypt(_ ciphertext: [UInt8], padding: RSAPadding) throws -> [UInt8] {
        let k = try requirePrivate("decryption")
        guard keyType == .rsa else {
            throw KeyShareError.unsupported("\(keyType) keys do not decrypt (RSA only)")
        }
        try require(.decrypt, "decrypt")
        let size = (publicKey.bits + 7) / 8
        guard ciphertext.count == size else {
            throw KeyShareError.decryptionFailed("the ciphertext is \(ciphertext.count) bytes, a \(publicKey.bits)-bit key's is \(size)")
        }
        do {
            return try k.decrypt(ciphertext, padding: padding)
        } catch {
            throw KeyShareError.decryptionFailed("the ciphertext does not decrypt with this key and \(describe(padding)) padding (wrong padding, wrong key or altered data)")
        }
    }

    /// SecKeyCreateSignature: signs `message` (hashed by the algorithm's digest).
    public func createSignature(_ message: [UInt8], algorithm: SignatureAlgorithm) throws -> [UInt8] {
        let k = try requirePrivate("signing")
        try require(.sign, "sign")
        try check(algorithm)
        return try mapped { try k.sign(message: message, algorithm: algorithm) }
    }

    /// SecKeyVerifySignature: true when `signature` is valid for `message`.
    public func verifySignature(_ signature: [UInt8], message: [UInt8], algorithm: SignatureAlgorithm) throws -> Bool {
        if !isPrivate { try require(.verify, "verify") }
        try check(algorithm)
        return try mapped { try publicKey.verify(signature: signature, message: message, algorithm: algorithm) }
    }

    private func check(_ algorithm: SignatureAlgorithm) throws {
        let fits: Bool
        switch algorithm {
        case .rsaPKCS1, .rsaPSS, .rsaRaw: fits = keyType == .rsa
        case .ecdsa: fits = keyType == .ec
        case .ed25519: fits = keyType == .ed25519
        case .ed448: fits = keyType == .ed448
        case .eddsa(let i): fits = keyType == i.keyType
        case .mlDSA: if case .mlDSA = keyType { fits = true } else { fits = false }
        case .slhDSA: if case .slhDSA = keyType { fits = true } else { fits = false }
        }
        guard fits else { throw KeyShareError.unsupported("the signature algorithm does not fit a \(keyType) key") }
    }
}

/// SecKeyGeneratePair's parameters.
public struct KeyPairParameters: Sendable {
    public var spec: KeySpec
    public var label: String
    /// kSecAttrApplicationTag; a second pair with the same tag is a duplicate.
    public var applicationTag: [UInt8]?
    /// Token label or ID; nil: the only token.
    public var token: String?
    public var accessGroup: String?
    /// What the pair may do; nil: everything its type can (RSA: sign + encrypt).
    public var usage: UsageFlags?
    public var extractable: Bool

    public init(_ spec: KeySpec, label: String, applicationTag: [UInt8]? = nil, token: String? = nil,
                accessGroup: String? = nil, usage: UsageFlags? = nil, extractable: Bool = false) {
        self.spec = spec
        self.label = label
        self.applicationTag = applicationTag
        self.token = token
        self.accessGroup = accessGroup
        self.usage = usage
        self.extractable = extractable
    }
}

extension KeychainSession {
    /// SecKeyGeneratePair: both keys are permanent items of the token, made
    /// in one transaction by TokenManager (CKA_LOCAL, never extractable by
    /// default), then tagged and narrowed to `usage`.
    public func generateKeyPair(_ p: KeyPairParameters) throws -> (privateKey: KeyRef, publicKey: KeyRef) {
        let record = try resolve(p.token)
        let t = record.tokenID
        let key = try requireKey(t)
        let group = try groupForNewItem(p.accessGroup)
        let refs = try mapped {
            try store.transaction { () throws -> (PersistentReference, PersistentReference) in
                if let tag = p.applicationTag {
                    var dq = ItemQuery(tokenID: t, itemClass: .privateKey, attributes: [KeyShareAttribute.applicationTag: tag], limit: .one)
                    restrict(&dq, to: .only([group]))
                    if try !store.find(dq, key: key).isEmpty { throw KeyShareError.duplicateItem }
                }
                // A TPM token's keys are made in the TPM and can never leave it (docs/tpm.md).
                if TPMToken.isTPM(t) && p.extractable {
                    throw KeyShareError.unsupported("a TPM token's keys cannot be extractable")
                }
                let (priv, pub) = TPMToken.isTPM(t)
                    ? try tokens.generateTPMKeyPair(p.spec, label: p.label, into: t, key: key)
                    : try tokens.generateKeyPair(p.spec, label: p.label, into: t, key: key, extractable: p.extractable)
                var privAttrs: AttributeMap = [:], pubAttrs: AttributeMap = [:]
                if let tag = p.applicationTag {
                    privAttrs[KeyShareAttribute.applicationTag] = tag
                    pubAttrs[KeyShareAttribute.applicationTag] = tag
                }
                if let u = p.usage, case .postQuantum(let t) = p.spec {
                    // One job per post-quantum key (PKCS #11 3.2): ML-KEM's "encrypt" is CKA_ENCAPSULATE /
                    // CKA_DECAPSULATE and it never signs; ML-DSA / SLH-DSA only sign.
                    let sign = !u.isDisjoint(with: [.sign, .verify]), crypt = !u.isDisjoint(with: [.encrypt, .decrypt])
                    if case .mlKEM = t {
                        privAttrs[CKA.decapsulate] = AttributeCoding.bool(crypt)
                        pubAttrs[CKA.encapsulate] = AttributeCoding.bool(crypt)
                    } else {
                        privAttrs[CKA.sign] = AttributeCoding.bool(sign)
                        pubAttrs[CKA.verify] = AttributeCoding.bool(sign)
                    }
                } else if let u = p.usage {
                    let sign = !u.isDisjoint(with: [.sign, .verify]), crypt = !u.isDisjoint(with: [.encrypt, .decrypt])
                    let wrap = !u.isDisjoint(with: [.wrap, .unwrap]) || crypt
                    privAttrs[CKA.sign] = AttributeCoding.bool(sign)
                    privAttrs[CKA.decrypt] = AttributeCoding.bool(crypt)
                    privAttrs[CKA.unwrap] = AttributeCoding.bool(wrap)
                    privAttrs[CKA.derive] = AttributeCoding.bool(u.contains(.derive))
                    pubAttrs[CKA.verify] = AttributeCoding.bool(sign)
                    pubAttrs[CKA.encrypt] = AttributeCoding.bool(crypt)
                    pubAttrs[CKA.wrap] = AttributeCoding.bool(wrap)
                    pubAttrs[CKA.derive] = AttributeCoding.bool(u.contains(.derive))
                }
                if !privAttrs.isEmpty {
                    try store.update(priv, attributes: privAttrs, key: key)
                    try store.update(pub, attributes: pubAttrs, key: key)
                }
                try assign(priv, to: group)
                try assign(pub, to: group)
                return (priv, pub)
            }
        }
        return (try keyRef(refs.0), try keyRef(refs.1))
    }

    /// SecItemCopyMatching with kSecReturnRef for one key.
    public func keyRef(_ ref: PersistentReference) throws -> KeyRef {
        guard case .key(let k)? = try copyFirst(Query(persistentReference: ref, returning: .reference)).reference else {
            throw KeyShareError.invalidParameter("the item is not a key")
        }
        return k
    }

    /// The key of `itemClass` whose application tag is `tag`.
    public func key(tag: [UInt8], itemClass: ItemClass, token: TokenID? = nil) throws -> KeyRef {
        guard case .key(let k)? = try copyFirst(Query(itemClass: itemClass, applicationTag: tag, tokenID: token,
                                                      returning: .reference)).reference else {
            throw KeyShareError.itemNotFound
        }
        return k
    }
}
