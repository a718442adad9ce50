import KeyshareCrypto

/// One identity as the share tree sees it.
public struct ShareIdentity: Sendable {
    public var label: String
    public var certificate: Certificate
    public var category: CertificateCategory

    public init(label: String, certificate: Certificate) {
        self.label = label
        self.certificate = certificate
        self.category = CertificateCategory(certificate: certificate)
    }

    /// `<type>_<SERIAL>.p12`: the file name a consumer sees and the zip entry name.
    public var displayName: String { category.displayFileName(for: certificate) }
}

/// The default generation rule (spec §2): newest of each type (latest notBefore,
/// ties kept), except encryption, whose every generation stays readable.
/// Unknown identities are never offered by default: only no-filter shows them.
public enum Generations {
    public static func offeredByDefault(_ all: [ShareIdentity]) -> [ShareIdentity] {
        var newest: [CertificateCategory: Int64] = [:]
        for i in all where i.category != .encryption {
            newest[i.category] = max(newest[i.category] ?? Int64.min, i.certificate.notBefore)
        }
        return all.filter { i in
            i.category == .encryption || (i.category != .unknown && i.certificate.notBefore == newest[i.category])
        }
    }

    public static func select(_ all: [ShareIdentity], filter: ShareFilter) -> [ShareIdentity] {
        let pool = filter.showsAllGenerations ? all : offeredByDefault(all)
        return pool.filter { filter.accepts($0.category) }.sorted { $0.displayName < $1.displayName }
    }
}

/// The provider's view (spec §3): root PKCS #12 items, seven folders (always,
/// even empty) and seven zips.
public struct ShareTree: Sendable {
    public enum Kind: String, Sendable, Codable { case pkcs12, folder, zip }

    public struct Entry: Sendable {
        /// The item identifier: label, `<Folder>.<label>`, `<Folder>.zip` or the folder name.
        public var identifier: String
        public var fileName: String
        public var kind: Kind
        public var selector: String
        /// Unix seconds: notBefore for a PKCS #12, now for a zip.
        public var date: Int64
        public var identities: [ShareIdentity]
        public var children: [Entry]
        /// False when the consumer's selectors do not accept it (shown greyed out).
        public var selectable: Bool
    }

    /// An identity of the token that the tree leaves out, and why: its private
    /// key cannot leave the keychain (issue 17: a TPM key; or a key marked
    /// non-exportable). Shown as a note beside the tree, never as an item.
    public struct LeftOut: Sendable, Equatable {
        public enum Reason: String, Sendable, Equatable {
            case tpm
            case notExportable = "not-exportable"
        }
        public var label: String
        public var reason: Reason

        public init(label: String, reason: Reason) {
            self.label = label
            self.reason = reason
        }

        /// Why, in words (the CLI prints "left out: LABEL: NOTE").
        public var note: String {
            switch reason {
            case .tpm: "its private key lives in the TPM and can never leave it"
            case .notExportable: "its private key is marked non-exportable (CKA_EXTRACTABLE false)"
            }
        }

        /// One agent reply field for the whole list: `reason NUL label NUL`
        /// per identity (the control protocol allows 64 fields per message,
        /// so the list cannot take fields of its own per identity).
        public static func encode(_ list: [LeftOut]) -> [UInt8] {
            list.flatMap { Array($0.reason.rawValue.utf8) + [0] + Array($0.label.utf8) + [0] }
        }

        /// The inverse of `encode`; pairs with an unknown reason are dropped.
        public static func decode(_ bytes: [UInt8]) -> [LeftOut] {
            var parts = bytes.split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
            if parts.last == "" { parts.removeLast() }
            return stride(from: 0, to: parts.count - 1, by: 2).compactMap { i in
                Reason(rawValue: parts[i]).map { LeftOut(label: parts[i + 1], reason: $0) }
            }
        }
    }

    public var root: [Entry]
    public var folders: [Entry]
    public var zips: [Entry]
    /// The token's identities that are not in the tree, with the reason.
    public var leftOut: [LeftOut]

    /// Builds the tree; `accepting` is the consumer's selector list (empty: all);
    /// `leftOut` are the identities that cannot be shared, kept for the notes.
    public init(identities: [ShareIdentity], leftOut: [LeftOut] = [], accepting: [ShareSelector] = [], now: Int64) {
        self.leftOut = leftOut
        func selectable(_ s: ShareSelector, _ categories: [CertificateCategory]) -> Bool {
            guard !accepting.isEmpty else { return true }
            if accepting.contains(s) { return true }
            // A p12 typed for a folder is also acceptable to a consumer asking for plain PKCS #12
            // or for that folder, when every identity inside is of an accepted type.
            return accepting.contains { a in
                switch (a, s) {
                case (.pkcs12, .pkcs12), (.pkcs12, .folderItem): true
                case (.folder(let f), .folderItem(let g)): f == g
                case (.folder(let f), .pkcs12): categories.allSatisfy { f.accepts($0) }
                default: false
                }
            }
        }
        let offered = Generations.offeredByDefault(identities).filter { $0.category != .unknown }
            .sorted { $0.displayName < $1.displayName }
        root = Self.uniqueNames(offered).map { i, name in
            Entry(identifier: i.label, fileName: name, kind: .pkcs12, selector: ShareSelector.pkcs12.identifier,
                  date: i.certificate.notBefore, identities: [i], children: [],
                  selectable: selectable(.pkcs12, [i.category]))
        }
        folders = ShareFilter.allCases.map { f in
            let members = Generations.select(identities, filter: f)
            let children = Self.uniqueNames(members).map { i, name in
                Entry(identifier: "\(f.folderName).\(i.label)", fileName: name, kind: .pkcs12,
                      selector: ShareSelector.folderItem(f).identifier, date: i.certificate.notBefore,
                      identities: [i], children: [], selectable: selectable(.folderItem(f), [i.category]))
            }
            return Entry(identifier: f.folderName, fileName: f.folderName, kind: .folder,
                         selector: ShareSelector.folder(f).identifier, date: now, identities: members,
                         children: children, selectable: selectable(.folder(f), members.map(\.category)))
        }
        zips = ShareFilter.allCases.map { f in
            let members = Generations.select(identities, filter: f)
            // The zip's children are its entries: one PKCS #12 per identity, named as in the folder.
            let entries = Self.uniqueNames(members).map { i, name in
                Entry(identifier: "\(f.folderName).zip/\(name)", fileName: name, kind: .pkcs12,
                      selector: ShareSelector.folderItem(f).identifier, date: i.certificate.notBefore,
                      identities: [i], children: [], selectable: false)
            }
            return Entry(identifier: "\(f.folderName).zip", fileName: "\(f.folderName).zip", kind: .zip,
                         selector: ShareSelector.zip(f).identifier, date: now, identities: members,
                         children: entries, selectable: selectable(.zip(f), members.map(\.category)))
        }
    }

    /// Display names within one folder or zip. Two identities can share a type and
    /// serial (different issuers); the second one's name then gets the start of its
    /// label so that neither overwrites the other in a directory or a zip.
    static func uniqueNames(_ members: [ShareIdentity]) -> [(ShareIdentity, String)] {
        var counts: [String: Int] = [:]
        for i in members { counts[i.displayName, default: 0] += 1 }
        return members.map { i in
            guard counts[i.displayName, default: 0] > 1 else { return (i, i.displayName) }
            return (i, "\(i.category.displayType)_\(i.certificate.serialHex)_\(i.label.prefix(8)).p12")
        }
    }

    /// Every PKCS #12 file of the tree (root, folder and zip members), for sizing.
    public var allEntries: [Entry] { root + folders + folders.flatMap(\.children) + zips }

    /// Finds an item by identifier (root label, `<Folder>.<label>`, `<Folder>.zip`).
    public func entry(_ identifier: String) -> Entry? {
        if let e = root.first(where: { $0.identifier == identifier }) { return e }
        if let e = zips.first(where: { $0.identifier == identifier }) { return e }
        for folder in folders {
            if folder.identifier == identifier { return folder }
            if let e = folder.children.first(where: { $0.identifier == identifier }) { return e }
        }
        return nil
    }
}
