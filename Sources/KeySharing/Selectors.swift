/// The file-provider type identifiers of key sharing 2025 (spec §2). A consumer
/// names what it can accept with these; the provider offers only matching items.
public enum ShareFilter: String, CaseIterable, Sendable, Codable {
    case allUser = "all-user"
    case all
    case authentication
    case signature
    case encryption
    case device
    case noFilter = "no-filter"

    /// The folder that presents this filter in the tree, in the tree's order.
    public var folderName: String {
        switch self {
        case .allUser: "All User"
        case .all: "All"
        case .authentication: "PIV"
        case .signature: "Signature"
        case .encryption: "Encryption"
        case .device: "Device"
        case .noFilter: "Unfiltered"
        }
    }

    public init?(folderName: String) {
        guard let f = Self.allCases.first(where: { $0.folderName == folderName }) else { return nil }
        self = f
    }

    /// Unknown identities are accepted only where every identity is shown.
    public func accepts(_ category: CertificateCategory) -> Bool {
        switch self {
        case .noFilter: true
        case .all: category != .unknown
        case .allUser: category != .unknown && category != .device
        case .authentication: category == .authentication
        case .signature: category == .signature
        case .encryption: category == .encryption
        case .device: category == .device
        }
    }

    /// Only no-filter shows every generation; the others apply the default rule.
    public var showsAllGenerations: Bool { self == .noFilter }
}

/// A parsed selector: what a consumer asks for or what an item is typed as.
public enum ShareSelector: Hashable, Sendable {
    /// `purebred2025.rsa.pkcs-12`: a PKCS #12 at the root; accepts every type.
    case pkcs12
    /// `purebred2025.select.<filter>`: a folder.
    case folder(ShareFilter)
    /// `purebred2025.zip.<filter>`: a zip of the folder's identities.
    case zip(ShareFilter)
    /// `purebred2025.select.<filter>-p12`: a PKCS #12 inside a folder.
    case folderItem(ShareFilter)

    public static let prefix2025 = "purebred2025."
    public static let prefixLegacy = "purebred."

    /// The canonical (2025, hyphen) spelling.
    public var identifier: String {
        switch self {
        case .pkcs12: "purebred2025.rsa.pkcs-12"
        case .folder(let f): "purebred2025.select.\(f.rawValue)"
        case .zip(let f): "purebred2025.zip.\(f.rawValue)"
        case .folderItem(let f): "purebred2025.select.\(f.rawValue)-p12"
        }
    }

    /// Accepts the 2025 names, their deprecated underscore spellings and the
    /// legacy 2016 names (`com.rsa.pkcs-12`, `purebred.select.*`, `purebred.zip.*`).
    public init?(_ text: String) {
        let s = text.trimmingWhitespace().lowercased().replacingUnderscores()
        if s == "purebred2025.rsa.pkcs-12" || s == "com.rsa.pkcs-12" {
            self = .pkcs12
            return
        }
        let rest: Substring
        if s.hasPrefix(Self.prefix2025) {
            rest = s.dropFirst(Self.prefix2025.count)
        } else if s.hasPrefix(Self.prefixLegacy) {
            rest = s.dropFirst(Self.prefixLegacy.count)
        } else {
            return nil
        }
        if rest.hasPrefix("select.") {
            var name = String(rest.dropFirst("select.".count))
            let isItem = name.hasSuffix("-p12")
            if isItem { name = String(name.dropLast(4)) }
            guard let f = ShareFilter(rawValue: name) else { return nil }
            self = isItem ? .folderItem(f) : .folder(f)
        } else if rest.hasPrefix("zip.") {
            guard let f = ShareFilter(rawValue: String(rest.dropFirst("zip.".count))) else { return nil }
            self = .zip(f)
        } else {
            return nil
        }
    }

    /// Whether an identity of `category` may be delivered under this selector.
    public func accepts(_ category: CertificateCategory) -> Bool {
        switch self {
        case .pkcs12: true
        case .folder(let f), .zip(let f), .folderItem(let f): f.accepts(category)
        }
    }
}

extension String {
    fileprivate func trimmingWhitespace() -> String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\t" || c == "\n" { s.removeFirst() }
        while let c = s.last, c == " " || c == "\t" || c == "\n" { s.removeLast() }
        return String(s)
    }

    /// The underscore spellings (`all_user`, `no_filter`, `pkcs_12`) are deprecated aliases.
    fileprivate func replacingUnderscores() -> String {
        String(map { $0 == "_" ? "-" : $0 })
    }
}
