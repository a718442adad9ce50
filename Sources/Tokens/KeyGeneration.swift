import Keychain
import KeyshareCrypto

public enum KeySpec: Sendable, Equatable {
    case rsa(bits: Int)
    case ec(ECCurve)
    case ed25519
    /// ML-DSA, ML-KEM or SLH-DSA of a parameter set (OpenSSL ≥ 3.5; `.unsupported` otherwise).
    case postQuantum(KeyType)
}

extension TokenManager {
    /// Generates a key pair inside the token (CKA_LOCAL true). A generated key
    /// is, by default, never extractable, so ALWAYS_SENSITIVE and
    /// NEVER_EXTRACTABLE truthfully hold from birth.
    public func generateKeyPair(_ spec: KeySpec, label: String, id: [UInt8]? = nil, into token: TokenID, key: TokenKey,
                                extractable: Bool = false, sensitive: Bool = true)
        throws -> (privateKey: PersistentReference, publicKey: PersistentReference) {
        let k: PrivateKey
        switch spec {
        case .rsa(let bits): k = try PrivateKey.generateRSA(bits: bits)
        case .ec(let curve): k = try PrivateKey.generateEC(curve)
        case .ed25519: k = try PrivateKey.generateEd25519()
        case .postQuantum(let t): k = try PrivateKey.generate(postQuantum: t)
        }
        let cid = try id ?? k.publicKey.keyIdentifier()
        let privAttrs = try ObjectTemplates.privateKey(k, label: label, id: cid, extractable: extractable, local: true,
                                                       sensitive: sensitive)
        let pubAttrs = try ObjectTemplates.publicKey(k.publicKey, label: label, id: cid, local: true)
        return try store.transaction {
            let priv = try store.add(token: token, itemClass: .privateKey, attributes: privAttrs, key: key)
            let pub = try store.add(token: token, itemClass: .publicKey, attributes: pubAttrs, key: key)
            return (priv, pub)
        }
    }
}
