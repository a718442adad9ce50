import Keychain
import KeyshareCrypto

/// The PKCS #11 driver: tokens of other PKCS #11 modules (smart cards via
/// OpenSC, SoftHSM2 in tests) mirrored into the keychain as CryptoTokenKit
/// does. Certificates and public keys are copied; each key pair gets a
/// private-key item that holds no key material, only what routing needs
/// (CKA_KEYSHARE_EXTERNAL = the key's CKA_ID on the card). When the card
/// goes, every item of it is deleted.
public enum ExternalDriver {
    public static let classPrefix = "pkcs11."

    public static func driverClass(_ name: String) -> String { classPrefix + name }

    public static func isExternal(_ id: TokenID) -> Bool { id.driverClass.hasPrefix(classPrefix) }

    /// The name of the driver an external token belongs to.
    public static func driverName(_ id: TokenID) -> String? {
        isExternal(id) ? String(id.driverClass.dropFirst(classPrefix.count)) : nil
    }

    /// `libsofthsm2.so` -> `softhsm2`, `opensc-pkcs11.so` -> `opensc-pkcs11`.
    public static func defaultName(modulePath: String) -> String {
        var base = String(modulePath.split(separator: "/").last ?? "")
        if let dot = base.firstIndex(of: ".") { base = String(base[..<dot]) }
        if base.hasPrefix("lib") { base = String(base.dropFirst(3)) }
        let cleaned = base.lowercased().filter { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }
        return cleaned.isEmpty ? "module" : String(cleaned)
    }

    public static func validName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64 && name.allSatisfy { ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "-" || $0 == "_" || $0 == "." }
    }

    /// `<driver class>:<token serial>`; a card without a serial is named by its label.
    public static func tokenID(driver: String, token: DriverSnapshot.Token) -> TokenID? {
        let instance = token.serial.isEmpty ? "label-" + token.label : token.serial
        return TokenID(driverClass: driverClass(driver), instance: instance)
    }

    /// The card-side identity an item's reference is derived from:
    /// CKA_UNIQUE_ID when the card has one, else class + CKA_ID + a hash of
    /// the public key, so re-initialising a card with the same keys gives
    /// the same references.
    static func identity(cls: UInt, attrs: AttributeMap, publicKey: [UInt8]?) -> [UInt8] {
        if let u = attrs[CKA.uniqueID], !u.isEmpty { return [0x55] + u }
        let id = attrs[CKA.id] ?? []
        return AttributeCoding.ulong(cls) + AttributeCoding.ulong(UInt(id.count)) + id
            + DigestAlgorithm.sha256.hash(publicKey ?? attrs[CKA.value] ?? attrs[CKA.label] ?? [])
    }

    /// The public key of an object (certificate or key), from its bytes
    /// alone (CardPublicKeys.swift says why not through OpenSSL).
    static func publicKey(_ cls: UInt, _ a: AttributeMap) -> CardPublicKey? {
        if cls == CKO.certificate {
            guard let der = a[CKA.value] else { return nil }
            return CardPublicKey(certificate: der)
        }
        return CardPublicKey(attributes: a)
    }

    /// The public key bits of an object (modulus+exponent, EC point), the same
    /// for a certificate and its key objects.
    static func publicMaterial(_ cls: UInt, _ a: AttributeMap) -> [UInt8]? {
        publicKey(cls, a)?.material
    }

    /// The items one card should have in the keychain, by reference.
    static func items(token: TokenID, snapshot t: DriverSnapshot.Token) -> [PersistentReference: (ItemClass, AttributeMap)] {
        var out: [PersistentReference: (ItemClass, AttributeMap)] = [:]
        // Public material by CKA_ID, to name private keys and build their proxies.
        var pairs: [[UInt8]: (material: [UInt8], source: AttributeMap, key: CardPublicKey)] = [:]
        for o in t.objects {
            guard let cls = o.ulong(CKA.class), let id = o[CKA.id], !id.isEmpty,
                  let k = publicKey(cls, o), let m = k.material else { continue }
            if pairs[id] == nil || cls == CKO.publicKey { pairs[id] = (m, o, k) }
        }
        var proxied: Set<[UInt8]> = []
        for o in t.objects {
            guard let cls = o.ulong(CKA.class) else { continue }
            var a = o
            a[CKA.token] = AttributeCoding.bool(true)
            a[CKA.private] = AttributeCoding.bool(false)
            a[CKA.uniqueID] = nil
            switch cls {
            case CKO.certificate, CKO.publicKey:
                let key = publicKey(cls, o)
                let ref = PersistentReference.derived(token: token, identity: identity(cls: cls, attrs: o, publicKey: key?.material))
                out[ref] = (cls == CKO.certificate ? .certificate : .publicKey, mirrored(a, cls: cls, key: key))
            case CKO.privateKey:
                // A private key the card shows without login: a proxy from its own public facts.
                guard let id = o[CKA.id], !id.isEmpty else { continue }
                proxied.insert(id)
                let p = proxy(id: id, facts: o, pair: pairs[id]?.source, key: pairs[id]?.key)
                out[PersistentReference.derived(token: token, identity: identity(cls: cls, attrs: o, publicKey: pairs[id]?.material))] = (.privateKey, p)
            default:
                continue
            }
        }
        // Private keys are usually hidden before login: a proxy per public key / certificate ID.
        for (id, pair) in pairs where !proxied.contains(id) {
            let facts: AttributeMap = [CKA.id: id]
            out[PersistentReference.derived(token: token, identity: identity(cls: CKO.privateKey, attrs: facts, publicKey: pair.material))]
                = (.privateKey, proxy(id: id, facts: facts, pair: pair.source, key: pair.key))
        }
        return out
    }

    /// A copied certificate or public key, completed with the attributes a
    /// native one stores, so every find template that matches a soft
    /// token's object matches a card's (values the card gave are kept).
    static func mirrored(_ copied: AttributeMap, cls: UInt, key: CardPublicKey?) -> AttributeMap {
        var a = copied
        // A copy: changing it would only be undone by the next mirror.
        a[CKA.modifiable] = AttributeCoding.bool(false)
        if cls == CKO.publicKey {
            if a[CKA.local] == nil { a[CKA.local] = AttributeCoding.bool(false) }
            if a[CKA.keyGenMechanism] == nil { a[CKA.keyGenMechanism] = AttributeCoding.ulong(ObjectTemplates.unavailable) }
            if a[CKA.keyType] == nil, let key { a[CKA.keyType] = AttributeCoding.ulong(key.keyType) }
            if a[CKA.modulusBits] == nil, let bits = key?.modulusBits { a[CKA.modulusBits] = AttributeCoding.ulong(UInt(bits)) }
        }
        if a[CKA.publicKeyInfo] == nil, let spki = key?.spki { a[CKA.publicKeyInfo] = spki }
        return a
    }

    /// A private key item that carries no key material: public facts, usage
    /// flags, and the card-side CKA_ID every operation is routed to. It holds
    /// every attribute a native private key stores (the PKCS #11 module shows
    /// it as CKA_PRIVATE, as the card does), so consumers that search by
    /// any of them find it.
    static func proxy(id: [UInt8], facts: AttributeMap, pair: AttributeMap?, key: CardPublicKey? = nil) -> AttributeMap {
        var a: AttributeMap = [:]
        var keyType = facts.ulong(CKA.keyType) ?? pair?.ulong(CKA.keyType)
        var modulus = facts[CKA.modulus] ?? pair?[CKA.modulus]
        var exponent = facts[CKA.publicExponent] ?? pair?[CKA.publicExponent]
        var params = facts[CKA.ecParams] ?? pair?[CKA.ecParams]
        var point = pair?[CKA.ecPoint]
        if let key, pair?.ulong(CKA.class) == CKO.certificate {
            keyType = key.keyType
            switch key.keyType {
            case CKK.rsa: modulus = key.modulus; exponent = key.exponent
            case CKK.ec: params = key.ecParams; point = key.ecPointDER
            default: break
            }
        }
        a[CKA.class] = AttributeCoding.ulong(CKO.privateKey)
        a[CKA.token] = AttributeCoding.bool(true)
        a[CKA.private] = AttributeCoding.bool(false)
        a[CKA.id] = id
        a[CKA.label] = facts[CKA.label] ?? pair?[CKA.label] ?? []
        if let s = facts[CKA.subject] ?? pair?[CKA.subject] { a[CKA.subject] = s }
        if let keyType { a[CKA.keyType] = AttributeCoding.ulong(keyType) }
        if let modulus { a[CKA.modulus] = modulus }
        if let exponent { a[CKA.publicExponent] = exponent }
        if let params { a[CKA.ecParams] = params }
        if let point { a[CKA.ecPoint] = point }
        if let bits = key?.modulusBits, keyType == CKK.rsa { a[CKA.modulusBits] = AttributeCoding.ulong(UInt(bits)) }
        if let spki = key?.spki { a[CKA.publicKeyInfo] = spki }
        let rsa = keyType == CKK.rsa
        a[CKA.sign] = AttributeCoding.bool(true)
        a[CKA.decrypt] = AttributeCoding.bool(rsa)
        a[CKA.derive] = AttributeCoding.bool(keyType == CKK.ec)
        a[CKA.unwrap] = AttributeCoding.bool(false)
        a[CKA.signRecover] = AttributeCoding.bool(false)
        a[CKA.sensitive] = AttributeCoding.bool(true)
        a[CKA.alwaysSensitive] = AttributeCoding.bool(true)
        a[CKA.extractable] = AttributeCoding.bool(false)
        a[CKA.neverExtractable] = AttributeCoding.bool(true)
        a[CKA.local] = AttributeCoding.bool(false)
        a[CKA.modifiable] = AttributeCoding.bool(false)
        a[CKA.keyGenMechanism] = AttributeCoding.ulong(ObjectTemplates.unavailable)
        a[CKA.wrapWithTrusted] = AttributeCoding.bool(false)
        a[CKA.alwaysAuthenticate] = facts[CKA.alwaysAuthenticate] ?? AttributeCoding.bool(false)
        a[CKA.keyshareExternal] = id
        return a
    }

    /// Applies one poll of driver `name` to the store: new cards are
    /// registered and their items added, changed cards brought in line, and
    /// cards no longer there withdrawn (all their items deleted) when
    /// `mayRemove` allows it: who may decide that a card left is the
    /// presence rule of docs/architecture.md (DriverPoller applies it).
    /// Writes nothing when nothing changed, so a steady poll wakes no one.
    @discardableResult
    public static func mirror(_ snapshot: DriverSnapshot, driver name: String, store: KeychainStore,
                              mayRemove: (TokenID) -> Bool = { _ in true }) throws -> (inserted: [TokenID], removed: [TokenID]) {
        var inserted: [TokenID] = []
        let records = Dictionary(try store.tokens().map { ($0.tokenID, $0) }, uniquingKeysWith: { a, _ in a })
        let seen = presentTokens(snapshot, driver: name)
        for (id, t) in seen {
            let want = items(token: id, snapshot: t)
            let digest = contentDigest(want)
            let rec = records[id]
            let label = String(t.label.prefix(32))
            if let rec, rec.present, rec.label == label, try store.mirrorDigest(id) == digest,
               try store.references(token: id) == Set(want.keys) { continue }
            try store.transaction {
                if rec == nil || rec?.present == false || rec?.label != label {
                    try store.registerExternalToken(id, label: label, serial: String(t.serial.prefix(16)))
                }
                // Items whose content changed (a new keyshare version completes
                // them, the card changed a label) are replaced under the same reference.
                let replace = try store.mirrorDigest(id) != digest
                let have = try store.references(token: id)
                for ref in have where want[ref] == nil || replace { try store.delete(ref) }
                for (ref, (cls, attrs)) in want where !have.contains(ref) || replace {
                    try store.add(token: id, itemClass: cls, attributes: attrs, key: nil, reference: ref)
                }
                try store.setMirrorDigest(id, digest)
            }
            if rec?.present != true { inserted.append(id) }
        }
        var removed: [TokenID] = []
        for rec in records.values.sorted(by: { $0.tokenID < $1.tokenID })
        where rec.present && rec.tokenID.driverClass == driverClass(name) && seen[rec.tokenID] == nil && mayRemove(rec.tokenID) {
            try store.withdrawExternalToken(rec.tokenID)
            removed.append(rec.tokenID)
        }
        return (inserted, removed)
    }

    /// The tokens of one snapshot by token ID (the first of a duplicated serial wins).
    public static func presentTokens(_ snapshot: DriverSnapshot, driver name: String) -> [TokenID: DriverSnapshot.Token] {
        var out: [TokenID: DriverSnapshot.Token] = [:]
        for t in snapshot.tokens {
            guard let id = tokenID(driver: name, token: t), out[id] == nil else { continue }
            out[id] = t
        }
        return out
    }

    /// A digest of everything mirrored for one card (references, classes,
    /// attributes), so an unchanged card costs one meta read per poll.
    static func contentDigest(_ want: [PersistentReference: (ItemClass, AttributeMap)]) -> [UInt8] {
        var bytes: [UInt8] = []
        for (ref, (cls, attrs)) in want.sorted(by: { $0.key.bytes.lexicographicallyPrecedes($1.key.bytes) }) {
            bytes += ref.bytes + AttributeCoding.ulong(cls.rawValue) + AttributeCoding.ulong(UInt(attrs.count))
            for (type, value) in attrs.sorted(by: { $0.key < $1.key }) {
                bytes += AttributeCoding.ulong(type) + AttributeCoding.ulong(UInt(value.count)) + value
            }
        }
        return DigestAlgorithm.sha256.hash(bytes)
    }

    /// `keyshare driver remove`: the module is no longer configured, so its
    /// cards are withdrawn. A driver that merely failed is not this: see DriverPoller.
    public static func withdrawAll(driver name: String, store: KeychainStore) throws {
        for rec in try store.tokens() where rec.present && rec.tokenID.driverClass == driverClass(name) {
            try store.withdrawExternalToken(rec.tokenID)
        }
    }
}
