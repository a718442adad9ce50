import FoundationEssentials
import Glibc
import Keychain
import KeyshareCrypto
import Tokens

/// The bytes behind the share tree's items. The reference builds every file to
/// learn its size; here each identity's PKCS #12 is built once per instance and
/// reused by the root, every folder and every zip that holds it, so listing or
/// exporting the whole tree costs one build per identity.
public final class ShareFiles {
    public let password: String
    public let profile: PKCS12.Profile
    /// Builds one identity's PKCS #12 by label (nil: only the prebuilt files exist).
    private let build: ((String) throws -> [UInt8])?
    private var pkcs12Cache: [String: [UInt8]] = [:]
    private var zipCache: [String: [UInt8]] = [:]
    /// How many PKCS #12 files were actually built (for tests and measurements).
    public private(set) var builds = 0

    public init(identities: [Identity], store: KeychainStore, key: TokenKey, password: String, profile: PKCS12.Profile) {
        self.password = password
        self.profile = profile
        var byLabel: [String: Identity] = [:]
        for i in identities { byLabel[i.label] = i }
        build = { label in
            guard let identity = byLabel[label] else { throw KeychainError.invalidArgument("no shareable identity \(label)") }
            return try IdentityExport.pkcs12(of: identity, store: store, key: key, password: password, profile: profile)
        }
    }

    /// Files built elsewhere (the CLI: by the agent, which holds the keys;
    /// docs/agent.md "The share tree through the agent"): label -> PKCS #12.
    /// This instance builds nothing and never sees a private key or the password.
    public init(prebuilt: [String: [UInt8]], profile: PKCS12.Profile) {
        password = ""
        self.profile = profile
        pkcs12Cache = prebuilt
        build = nil
    }

    /// The identities of a token that can be shared: a certificate with its
    /// private key, and the key exportable. Others cannot leave the keychain.
    public static func shareable(tokens: TokenManager, token: TokenID, key: TokenKey) throws -> [Identity] {
        try partition(tokens: tokens, token: token, key: key).shareable
    }

    /// The token's identities, each named by its key-sharing label, split into
    /// those the tree offers and those it leaves out with a note: a key in the TPM (issue 17: it has no PKCS #8,
    /// only a TPM blob) or marked non-exportable. A certificate without its
    /// private key is no identity of this token's and gets no note.
    public static func partition(tokens: TokenManager, token: TokenID, key: TokenKey) throws
        -> (shareable: [Identity], leftOut: [ShareTree.LeftOut])
    {
        var shareable: [Identity] = []
        var leftOut: [ShareTree.LeftOut] = []
        for var identity in try tokens.identities(in: token, key: key) {
            // A note names the identity as the keychain shows it (a person reads it);
            // the tree's own items use the key-sharing label (spec §1): the
            // certificate's SHA-256 (tree identifiers, legacy friendlyNames).
            let shown = identity.label
            identity.label = identity.certificate.sha256Hex
            guard let ref = identity.privateKeyReference, let item = try? tokens.store.item(ref, key: key) else { continue }
            if item.attributes[CKA.keyshareTPM] != nil {
                leftOut.append(.init(label: shown, reason: .tpm))
            } else if let extractable = item.attributes[CKA.extractable], extractable.first == 0 {
                leftOut.append(.init(label: shown, reason: .notExportable))
            } else if item.attributes[CKA.keysharePKCS8] != nil {
                shareable.append(identity)
            }
        }
        return (shareable, leftOut)
    }

    /// The PKCS #12 of one identity (by label), built on first use.
    public func pkcs12(label: String) throws -> [UInt8] {
        if let cached = pkcs12Cache[label] { return cached }
        guard let build else { throw KeychainError.invalidArgument("no shareable identity \(label)") }
        let bytes = try build(label)
        builds += 1
        pkcs12Cache[label] = bytes
        return bytes
    }

    /// The file behind a tree entry: a PKCS #12 or a zip. Folders have no bytes.
    public func bytes(of entry: ShareTree.Entry) throws -> [UInt8] {
        switch entry.kind {
        case .pkcs12:
            guard let identity = entry.identities.first else { throw KeychainError.invalidArgument("empty entry") }
            return try pkcs12(label: identity.label)
        case .zip:
            if let cached = zipCache[entry.identifier] { return cached }
            let members = try entry.children.map { child in
                (name: child.fileName, bytes: try pkcs12(label: child.identities[0].label))
            }
            let bytes = try ShareZip.build(members, date: Date(timeIntervalSince1970: TimeInterval(entry.date)))
            zipCache[entry.identifier] = bytes
            return bytes
        case .folder:
            throw KeychainError.invalidArgument("\(entry.identifier) is a folder, not a file")
        }
    }

    /// Size in bytes of a file entry (folders: the number of items is shown instead).
    public func size(of entry: ShareTree.Entry) throws -> Int {
        entry.kind == .folder ? 0 : try bytes(of: entry).count
    }
}
