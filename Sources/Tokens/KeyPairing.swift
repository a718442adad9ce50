import Keychain
import KeyshareCrypto

/// A key pair already in a token, found by its public key.
public struct KeyPairMatch: Sendable {
    /// The pair's CKA_ID (the private key's, else the public key's).
    public var id: [UInt8]
    /// The pair's label when it has a non-empty one.
    public var label: String?
    /// nil when the token holds only the public half, or the private key is
    /// not visible (no token key given).
    public var privateKey: Item?
    public var publicKey: Item?
}

/// Certificates and keys belong together by their public key, never by
/// CKA_ID alone. PKI enrolment makes the key first (`pkcs11-tool
/// --keypairgen --id 01`, `keyshare key generate`) under an ID of the
/// user's choice; the certificate arrives later and must join that pair,
/// because every consumer (NSS, OpenVPN, libp11, OpenSC) pairs a key with
/// its certificate by CKA_ID. So the search is by value: the
/// SubjectPublicKeyInfo (every object keyshare writes carries
/// CKA_PUBLIC_KEY_INFO), the RSA modulus or the EC point, each an index
/// seek; a private key without public data (a card's key proxy) is reached
/// through the public key object that shares its ID, and an ID candidate is
/// refused when its own public data says it is another key.
public enum KeyPairing {
    public static func find(_ publicKey: PublicKey, in token: TokenID, store: KeychainStore, key: TokenKey?) throws -> KeyPairMatch? {
        let spki = try publicKey.spkiDER()
        func search(_ cls: ItemClass, _ attrs: AttributeMap) throws -> [Item] {
            try store.find(ItemQuery(tokenID: token, itemClass: cls, attributes: attrs, limit: .all), key: key)
        }
        func byValue(_ cls: ItemClass) throws -> Item? {
            if let hit = try search(cls, [CKA.publicKeyInfo: spki]).first { return hit }
            for probe in valueProbes(publicKey) {
                if let hit = try search(cls, probe).first(where: { !contradicts($0, publicKey, spki: spki) }) { return hit }
            }
            return nil
        }
        var priv = try byValue(.privateKey)
        var pub = try byValue(.publicKey)
        if priv == nil, let id = pub?.attributes[CKA.id], !id.isEmpty {
            priv = try search(.privateKey, [CKA.id: id]).first { !contradicts($0, publicKey, spki: spki) }
        }
        if pub == nil, let id = priv?.attributes[CKA.id], !id.isEmpty {
            pub = try search(.publicKey, [CKA.id: id]).first { !contradicts($0, publicKey, spki: spki) }
        }
        guard priv != nil || pub != nil else { return nil }
        let id = priv?.attributes[CKA.id] ?? pub?.attributes[CKA.id] ?? []
        let label = [priv, pub].compactMap { $0?.attributes.string(CKA.label) }.first { !$0.isEmpty }
        return KeyPairMatch(id: id, label: label, privateKey: priv, publicKey: pub)
    }

    /// The certificate in `token` for this public key (certificates carry
    /// CKA_PUBLIC_KEY_INFO, written by ObjectTemplates), end-entity first.
    public static func certificate(for publicKey: PublicKey, in token: TokenID, store: KeychainStore) throws -> Item? {
        let certs = try store.find(ItemQuery(tokenID: token, itemClass: .certificate,
                                             attributes: [CKA.publicKeyInfo: try publicKey.spkiDER()], limit: .all), key: nil)
        return certs.first { $0.attributes.ulong(CKA.certificateCategory) != CertificateCategory.authority } ?? certs.first
    }

    /// The C_CreateObject hook: a certificate created without CKA_ID takes
    /// the CKA_ID of the key pair its public key matches (and that pair's
    /// label when the template gave none), so the new certificate and the key
    /// already in the token form one identity for every consumer. Any other
    /// object, or a certificate without a matching pair, is returned unchanged.
    public static func certificateJoiningKeyPair(_ attrs: AttributeMap, template: AttributeMap, token: TokenID,
                                                 store: KeychainStore, key: TokenKey?) throws -> AttributeMap {
        guard template[CKA.id] == nil, attrs.ulong(CKA.class) == CKO.certificate,
              let der = attrs[CKA.value], let cert = try? Certificate(der: der),
              let match = try find(cert.publicKey, in: token, store: store, key: key), !match.id.isEmpty else { return attrs }
        var out = attrs
        out[CKA.id] = match.id
        if template[CKA.label] == nil, let label = match.label { out[CKA.label] = AttributeCoding.string(label) }
        return out
    }

    /// Further index seeks that name the key by value when an object has no
    /// CKA_PUBLIC_KEY_INFO (a card's objects): the RSA modulus, or the EC /
    /// Ed25519 point in both the DER and the raw form modules use.
    static func valueProbes(_ k: PublicKey) -> [AttributeMap] {
        switch k.keyType {
        case .rsa:
            return k.rsaModulus.map { [[CKA.modulus: $0]] } ?? []
        case .ec:
            return [k.ecPointDER, k.ecPoint].compactMap { $0.map { [CKA.ecPoint: $0] } }
        case .ed25519, .ed448, .x25519, .x448:
            guard let raw = k.ecxRaw else { return [] }
            return [[CKA.ecPoint: ECXCurve.octetString(raw)], [CKA.ecPoint: raw]]
        case .mlDSA, .mlKEM, .slhDSA:
            return k.postQuantumRaw.map { [[CKA.value: $0]] } ?? []
        }
    }

    /// True when the item's own public data names a different key.
    static func contradicts(_ item: Item, _ k: PublicKey, spki: [UInt8]) -> Bool {
        let a = item.attributes
        if let other = a[CKA.publicKeyInfo], !other.isEmpty {
            if other == spki { return false }
            guard let parsed = try? PublicKey(spkiDER: other) else { return true }
            return (try? parsed.spkiDER()) != spki
        }
        if let type = a.ulong(CKA.keyType), type != ObjectTemplates.keyType(k.keyType) { return true }
        switch k.keyType {
        case .rsa:
            if let n = a[CKA.modulus], n.drop(while: { $0 == 0 }) != (k.rsaModulus ?? []).drop(while: { $0 == 0 }) { return true }
        case .ec:
            if let params = a[CKA.ecParams], let curve = k.curve, params != curve.paramsDER,
               ECCurve(paramsDER: params) != curve { return true }  // explicit parameters of the same curve agree
            if let p = a[CKA.ecPoint], p != k.ecPointDER, p != k.ecPoint { return true }
        case .ed25519, .ed448, .x25519, .x448:
            if let params = a[CKA.ecParams], let curve = k.ecxCurve, ECXCurve(paramsDER: params) != nil,
               params != curve.paramsDER { return true }
            if let p = a[CKA.ecPoint], let raw = k.ecxRaw, p != raw, p != ECXCurve.octetString(raw) { return true }
        case .mlDSA, .mlKEM, .slhDSA:
            if let set = a.ulong(CKA.parameterSet), set != ObjectTemplates.parameterSet(k.keyType) { return true }
            if item.itemClass == .publicKey, let v = a[CKA.value], v != k.postQuantumRaw { return true }
        }
        return false
    }
}

extension TokenManager {
    /// The key pair in `token` whose public key is `publicKey` (see KeyPairing).
    public func keyPair(matching publicKey: PublicKey, in token: TokenID, key: TokenKey?) throws -> KeyPairMatch? {
        try KeyPairing.find(publicKey, in: token, store: store, key: key)
    }
}
