import Keychain
import KeyshareCrypto

/// What the caller names on import (`keyshare import --label L --id HEX
/// --with-chain`). nil fields take the defaults: the label and CKA_ID of the
/// key pair already in the token for this public key, else a readable label
/// (IdentityLabel: the PKCS #12 friendlyName, the subject's commonName, its
/// email; for a bare key or a CA certificate the uppercase hex SHA-256) and
/// SHA-1 of the public key bits.
public struct ImportOptions: Sendable, Equatable {
    public var label: String?
    public var id: [UInt8]?
    /// The chain certificates imported with an identity become token objects
    /// (CKA_CERTIFICATE_CATEGORY authority for a CA); by default they are
    /// kept apart (CKA.keyshareChainOnly): in the keychain for trust and
    /// export, not among the token's PKCS #11 objects.
    public var withChain: Bool

    public init(label: String? = nil, id: [UInt8]? = nil, withChain: Bool = false) {
        self.label = label
        self.id = id
        self.withChain = withChain
    }

    /// No object is named (`withChain` names none).
    public var isEmpty: Bool { label == nil && id == nil }
}

/// One object an import created, or found already there.
public struct ImportedItem: Sendable, Equatable {
    public enum Role: String, Sendable {
        case certificate, privateKey = "private-key", publicKey = "public-key", chainCertificate = "chain-certificate"
    }

    public var role: Role
    public var reference: PersistentReference
    /// The label as stored (for an object that was already there: its own label, which `list` shows).
    public var label: String
    public var id: [UInt8]
    /// false when the object was already in the token and nothing was written.
    public var created: Bool
    /// A chain certificate kept apart from the token's PKCS #11 objects (CKA.keyshareChainOnly).
    public var keptApart = false
}

public struct ImportResult: Sendable {
    /// One more chain certificate of this identity (a PEM bundle's CA certificates).
    mutating func appendChain(_ item: ImportedItem) {
        items.append(item)
        chain.append(item.reference)
        if item.created { duplicate = false }
    }

    /// The identity's (or lone certificate's / key pair's) label as stored.
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
    /// Every object of this unit, created or found, in the order above.
    public var items: [ImportedItem]

    public init(label: String, id: [UInt8], items: [ImportedItem]) {
        self.label = label
        self.id = id
        self.items = items
        certificate = items.first { $0.role == .certificate }?.reference
        privateKey = items.first { $0.role == .privateKey }?.reference
        publicKey = items.first { $0.role == .publicKey }?.reference
        chain = items.filter { $0.role == .chainCertificate }.map(\.reference)
        duplicate = !items.contains { $0.created }
    }
}

/// Import refusals that are about the token's contents, not the file.
public enum ImportError: Error, Equatable, CustomStringConvertible, Sendable {
    /// `--id` names an ID that another key or certificate of the token uses.
    case idInUse(id: String, by: String)
    /// `--id` differs from the ID of the key pair this certificate or key belongs to.
    case idMismatch(given: String, pair: String)
    /// `--label`/`--id` name one object but the input holds several.
    case ambiguousTarget(String)

    public var description: String {
        switch self {
        case .idInUse(let id, let by):
            "CKA_ID \(id) is already used by \(by) in this token; choose another --id"
        case .idMismatch(let given, let pair):
            "the key pair in the token for this public key has CKA_ID \(pair), not \(given): give --id \(pair) or leave --id out"
        case .ambiguousTarget(let what):
            "--label and --id name one identity, key or certificate, but the input holds \(what)"
        }
    }
}

extension TokenManager {
    /// Imports a PKCS #12 identity in one transaction. Parse errors are the
    /// CryptoError kinds .wrongPassword / .notPKCS12 / .corruptPKCS12, and a
    /// file without a private key is .noPrivateKey; all are raised before
    /// anything is written.
    public func importPKCS12(_ data: [UInt8], password: String, options: ImportOptions = ImportOptions(),
                             into token: TokenID, key: TokenKey) throws -> ImportResult {
        let contents = try PKCS12.parse(data, password: password)
        guard let privateKey = contents.privateKey else {
            throw CryptoError(.noPrivateKey, "PKCS #12 import", reason: "the file holds no private key (certificate only)")
        }
        guard let cert = contents.certificate else {
            throw CryptoError(.corruptPKCS12, "PKCS #12 import", reason: "the file holds no certificate for its key")
        }
        guard privateKey.matches(cert.publicKey) else { throw TokensError.keyCertificateMismatch }
        return try store.transaction {
            try addIdentity(privateKey: privateKey, certificate: cert, chain: contents.chain, friendlyName: contents.friendlyName,
                            options: options, token: token, key: key)
        }
    }

    /// A certificate on its own: a CA, or the certificate issued for a key
    /// already in the token. In the second case it joins that key pair: it
    /// takes the pair's CKA_ID (and label, when the pair has one and none is
    /// given), which is what every PKCS #11 consumer pairs them by.
    public func importCertificate(_ cert: Certificate, options: ImportOptions = ImportOptions(),
                                  into token: TokenID, key: TokenKey?) throws -> ImportResult {
        try store.transaction {
            if let existing = try certificateItem(cert, token: token) {
                // Imported on its own, a chain certificate kept apart becomes a token object.
                try showChainCertificate(existing)
                let item = ImportedItem(existing, role: .certificate)
                return ImportResult(label: item.label, id: item.id, items: [item])
            }
            let pair = try KeyPairing.find(cert.publicKey, in: token, store: store, key: key)
            let pairID = pair.flatMap { $0.id.isEmpty ? nil : $0.id }
            let id = try chooseID(options.id, pairID: pairID, fallback: cert.publicKey.keyIdentifier(),
                                  publicKey: cert.publicKey, token: token, key: key)
            let label = try options.label ?? pair?.label
                ?? (cert.isCA ? ObjectTemplates.hex(cert.sha256Fingerprint)
                              : defaultLabel(friendlyName: nil, certificate: cert, token: token, key: key))
            let category = cert.isCA ? CertificateCategory.authority
                : pair != nil ? CertificateCategory.tokenUser : CertificateCategory.unspecified
            let ref = try store.add(token: token, itemClass: .certificate,
                                    attributes: ObjectTemplates.certificate(cert, label: label, id: id, category: category), key: key)
            return ImportResult(label: label, id: id, items: [
                ImportedItem(role: .certificate, reference: ref, label: label, id: id, created: true),
            ])
        }
    }

    /// A bare private key (and its public key); `label` defaults to the
    /// uppercase hex SHA-256 of its public key's SubjectPublicKeyInfo.
    public func importPrivateKey(_ privateKey: PrivateKey, label: String?, into token: TokenID, key: TokenKey) throws -> ImportResult {
        try importPrivateKey(privateKey, options: ImportOptions(label: label), into: token, key: key)
    }

    /// A bare private key and its public key. When the token already holds
    /// the certificate for it, the key takes that certificate's CKA_ID and
    /// label, usage and subject, so the two form an identity.
    public func importPrivateKey(_ privateKey: PrivateKey, options: ImportOptions, into token: TokenID, key: TokenKey) throws -> ImportResult {
        try store.transaction {
            let pub = privateKey.publicKey
            let pair = try KeyPairing.find(pub, in: token, store: store, key: key)
            let certItem = try KeyPairing.certificate(for: pub, in: token, store: store)
            let cert = certItem.flatMap { $0.attributes[CKA.value] }.flatMap { try? Certificate(der: $0) }
            let knownID = [pair?.id, certItem?.attributes[CKA.id]].compactMap { $0 }.first { !$0.isEmpty }
            let id = try chooseID(options.id, pairID: knownID, fallback: pub.keyIdentifier(), publicKey: pub, token: token, key: key)
            let certLabel = certItem?.attributes.string(CKA.label).flatMap { $0.isEmpty ? nil : $0 }
            let label = try options.label ?? pair?.label ?? certLabel ?? ObjectTemplates.hex(DigestAlgorithm.sha256.hash(pub.spkiDER()))
            let items = try addKeyPair(privateKey, pair: pair, label: label, id: id, usage: cert?.keyUsage,
                                       subject: cert?.subjectDER, token: token, key: key)
            return ImportResult(label: items.first?.label ?? label, id: items.first?.id ?? id, items: items)
        }
    }

    /// The contents of a PEM bundle in one transaction: each private key with
    /// the certificate of the bundle that matches it (an identity), the other
    /// keys and certificates on their own (joining key pairs or certificates
    /// already in the token). `options` apply to the one key of the bundle,
    /// or to its one end-entity certificate when it has no key; with several
    /// candidates they are refused rather than guessed.
    public func importBundle(privateKeys: [PrivateKey], certificates: [Certificate], options: ImportOptions = ImportOptions(),
                             into token: TokenID, key: TokenKey) throws -> [ImportResult] {
        enum Target: Equatable { case none, key(Int), certificate(Int) }
        var target = Target.none
        let endEntities = certificates.indices.filter { !certificates[$0].isCA }
        if privateKeys.count == 1 {
            target = .key(0)
        } else if privateKeys.isEmpty, endEntities.count == 1 {
            target = .certificate(endEntities[0])
        } else if privateKeys.isEmpty, certificates.count == 1 {
            target = .certificate(0)
        } else if !options.isEmpty {
            throw ImportError.ambiguousTarget(privateKeys.count > 1 ? "\(privateKeys.count) private keys"
                                                                   : "\(endEntities.count) end-entity certificates")
        }
        return try store.transaction {
            var results: [ImportResult] = []
            var used = Set<Int>()
            for (i, k) in privateKeys.enumerated() {
                let o = target == .key(i) ? options : ImportOptions()
                if let ci = certificates.indices.first(where: { !used.contains($0) && k.matches(certificates[$0].publicKey) }) {
                    used.insert(ci)
                    results.append(try addIdentity(privateKey: k, certificate: certificates[ci], chain: [], friendlyName: nil,
                                                   options: o, token: token, key: key))
                } else {
                    results.append(try importPrivateKey(k, options: o, into: token, key: key))
                }
            }
            // With an identity in the bundle, its CA certificates are its chain.
            let owner = results.lastIndex { $0.certificate != nil && $0.privateKey != nil }
            for (ci, c) in certificates.enumerated() where !used.contains(ci) {
                if c.isCA, let owner {
                    results[owner].appendChain(try addChainCertificate(c, withChain: options.withChain, token: token, key: key))
                    continue
                }
                let o = target == .certificate(ci) ? options : ImportOptions()
                results.append(try importCertificate(c, options: o, into: token, key: key))
            }
            return results
        }
    }

    func addIdentity(privateKey: PrivateKey, certificate cert: Certificate, chain: [Certificate], friendlyName: String?,
                     options: ImportOptions = ImportOptions(), token: TokenID, key: TokenKey) throws -> ImportResult {
        let pair = try KeyPairing.find(cert.publicKey, in: token, store: store, key: key)
        let existingCert = try certificateItem(cert, token: token)
        let knownID = [pair?.id, existingCert?.attributes[CKA.id]].compactMap { $0 }.first { !$0.isEmpty }
        let id = try chooseID(options.id, pairID: knownID, fallback: cert.publicKey.keyIdentifier(),
                              publicKey: cert.publicKey, token: token, key: key)
        let existingLabel = existingCert?.attributes.string(CKA.label).flatMap { $0.isEmpty ? nil : $0 }
        let label = try options.label ?? pair?.label ?? existingLabel
            ?? defaultLabel(friendlyName: friendlyName, certificate: cert, token: token, key: key)
        var items: [ImportedItem] = []
        if let existingCert {
            items.append(ImportedItem(existingCert, role: .certificate))
        } else {
            let ref = try store.add(token: token, itemClass: .certificate, attributes: ObjectTemplates.certificate(
                cert, label: label, id: id, category: CertificateCategory.tokenUser), key: key)
            items.append(ImportedItem(role: .certificate, reference: ref, label: label, id: id, created: true))
        }
        items += try addKeyPair(privateKey, pair: pair, label: label, id: id, usage: cert.keyUsage,
                                subject: cert.subjectDER, token: token, key: key)
        for c in chain where c.der != cert.der {
            items.append(try addChainCertificate(c, withChain: options.withChain, token: token, key: key))
        }
        return ImportResult(label: items[0].label, id: items[0].id, items: items)
    }

    /// A chain certificate of an identity: kept apart from the token's
    /// objects (CKA.keyshareChainOnly) unless `withChain`; labelled with its
    /// SHA-256, so it never takes a name an identity could want.
    func addChainCertificate(_ c: Certificate, withChain: Bool, token: TokenID, key: TokenKey?) throws -> ImportedItem {
        if let existing = try certificateItem(c, token: token) {
            if withChain { try showChainCertificate(existing) }
            var item = ImportedItem(existing, role: .chainCertificate)
            item.keptApart = existing.isChainOnly && !withChain
            return item
        }
        let cid = try c.publicKey.keyIdentifier()
        let clabel = ObjectTemplates.hex(c.sha256Fingerprint)
        var attributes = ObjectTemplates.certificate(c, label: clabel, id: cid, category: category(of: c))
        if !withChain { attributes[CKA.keyshareChainOnly] = AttributeCoding.bool(true) }
        let ref = try store.add(token: token, itemClass: .certificate, attributes: attributes, key: key)
        return ImportedItem(role: .chainCertificate, reference: ref, label: clabel, id: cid, created: true, keptApart: !withChain)
    }

    /// The private and public key objects, each unless the token already
    /// holds it (found by the public key, not by CKA_ID).
    func addKeyPair(_ k: PrivateKey, pair: KeyPairMatch?, label: String, id: [UInt8], usage: KeyUsage?, subject: [UInt8]?,
                    token: TokenID, key: TokenKey) throws -> [ImportedItem] {
        var items: [ImportedItem] = []
        if let existing = pair?.privateKey {
            items.append(ImportedItem(existing, role: .privateKey))
        } else {
            let ref = try store.add(token: token, itemClass: .privateKey, attributes: ObjectTemplates.privateKey(
                k, label: label, id: id, extractable: true, local: false, usage: usage, subject: subject), key: key)
            items.append(ImportedItem(role: .privateKey, reference: ref, label: label, id: id, created: true))
        }
        if let existing = pair?.publicKey {
            items.append(ImportedItem(existing, role: .publicKey))
        } else {
            let ref = try store.add(token: token, itemClass: .publicKey, attributes: ObjectTemplates.publicKey(
                k.publicKey, label: label, id: id, local: false, usage: usage, subject: subject), key: key)
            items.append(ImportedItem(role: .publicKey, reference: ref, label: label, id: id, created: true))
        }
        return items
    }

    /// The CKA_ID a new object gets: the one asked for (refused when the
    /// object's key pair already has another, or when another key or
    /// certificate uses it), else the pair's, else `fallback`.
    func chooseID(_ given: [UInt8]?, pairID: [UInt8]?, fallback: [UInt8], publicKey: PublicKey,
                  token: TokenID, key: TokenKey?) throws -> [UInt8] {
        guard let given else { return pairID ?? fallback }
        if let pairID {
            guard pairID == given else {
                throw ImportError.idMismatch(given: ObjectTemplates.hex(given), pair: ObjectTemplates.hex(pairID))
            }
            return given
        }
        let spki = try publicKey.spkiDER()
        for cls in [ItemClass.privateKey, .publicKey, .certificate] {
            let users = try store.find(ItemQuery(tokenID: token, itemClass: cls, attributes: [CKA.id: given], limit: .all), key: key)
            if let other = users.first(where: { KeyPairing.contradicts($0, publicKey, spki: spki) }) {
                let name = other.attributes.string(CKA.label).map { " \"\($0)\"" } ?? ""
                let what = cls == .privateKey ? "private key" : cls == .publicKey ? "public key" : "certificate"
                throw ImportError.idInUse(id: ObjectTemplates.hex(given), by: "the \(what)\(name) (\(other.reference.base64url))")
            }
        }
        return given
    }

    func certificateItem(_ c: Certificate, token: TokenID) throws -> Item? {
        try store.find(ItemQuery(tokenID: token, itemClass: .certificate, attributes: [CKA.value: c.der], limit: .one),
                       key: nil).first
    }

    func findCertificate(_ c: Certificate, token: TokenID) throws -> PersistentReference? {
        try certificateItem(c, token: token)?.reference
    }

    /// Makes a chain certificate kept apart a token object (no change for any other).
    func showChainCertificate(_ item: Item) throws {
        guard item.isChainOnly else { return }
        try store.update(item.reference, attributes: [CKA.keyshareChainOnly: AttributeCoding.bool(false)], key: nil)
    }

    func category(of c: Certificate) -> UInt {
        c.isCA ? CertificateCategory.authority : CertificateCategory.unspecified
    }
}

extension ImportedItem {
    /// An object that was already in the token, named as it is stored.
    init(_ item: Item, role: Role) {
        self.init(role: role, reference: item.reference, label: item.attributes.string(CKA.label) ?? "",
                  id: item.attributes[CKA.id] ?? [], created: false)
    }
}
