import ArgumentParser
import FoundationEssentials
import Glibc
import Keychain
import KeyshareAgent
import KeySharing
import KeyshareCrypto
import Tokens

/// `keyshare share`: the provider's side of key sharing 2025: the tree a file
/// provider would show (root PKCS #12 files, seven folders, seven zips), its
/// files, and who may fetch the shared password.
struct ShareCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "share",
        abstract: "Share identities with apps that cannot use PKCS #11 (the key sharing 2025 tree).",
        subcommands: [ShareList.self, ShareGet.self, ShareExportTree.self, ShareAllow.self, ShareDeny.self, SharePolicy.self])
}

extension ShareSelector: ExpressibleByArgument {
    public init?(argument: String) { self.init(argument) }
}

/// Options every tree command shares: the consumer's selectors and the profile.
struct TreeOptions: ParsableArguments {
    @Option(name: .customLong("selector"),
            help: "A selector the consumer accepts (repeatable); items it does not accept are greyed out.")
    var selectors: [ShareSelector] = []
    @Option(help: "modern (PBES2/AES-256, SHA-256 MAC, chain) or legacy (3DES, SHA-1 MAC, 2048 iterations).")
    var profile: PKCS12.Profile = .modern
}

/// The opened token, its shareable identities as a tree, and the file builder.
struct ShareSession {
    let tree: ShareTree
    let files: ShareFiles
    /// PKCS #12 files the agent built (one per shareable identity).
    let built: Int

    /// The PKCS #12 files are built in the agent (docs/agent.md, "The share
    /// tree through the agent"): this process gets the shareable identities'
    /// labels, certificates and finished files, never a private key; the
    /// shared password is made there on first use, before any file is built.
    static func open(_ selection: TokenSelection, _ pin: PINOptions, _ options: TreeOptions) throws -> ShareSession {
        let ctx = try Context.open()
        let token = try ctx.token(selection)
        var m = ControlProtocol.Message()
        m.set("token", token.tokenID.description)
        m.set("profile", options.profile.rawValue)
        m["pin"] = try pin.userPIN(token: token.label)
        let reply = try AgentControl.call(.share, m)
        m["pin"] = nil
        var identities: [ShareIdentity] = []
        var files: [String: [UInt8]] = [:]
        let count = reply.string("count").flatMap(Int.init) ?? 0
        let incomplete = CLIError("the keyshare agent's share tree reply is incomplete")
        if let labels = reply["labels"] {
            guard let labels = ShareWire.unpack(labels), let ders = reply["certificates"].flatMap(ShareWire.unpack),
                  let p12s = reply["pkcs12"].flatMap(ShareWire.unpack),
                  labels.count == count, ders.count == count, p12s.count == count else { throw incomplete }
            for i in 0..<count {
                let label = String(decoding: labels[i], as: UTF8.self)
                identities.append(ShareIdentity(label: label, certificate: try Certificate(der: ders[i])))
                files[label] = p12s[i]
            }
        } else {
            // An agent of the previous release (still running after an upgrade): one field per item.
            for i in 0..<count {
                guard let label = reply.string("label.\(i)"), let der = reply["certificate.\(i)"], let p12 = reply["pkcs12.\(i)"] else {
                    throw incomplete
                }
                identities.append(ShareIdentity(label: label, certificate: try Certificate(der: der)))
                files[label] = p12
            }
        }
        let leftOut = reply["leftOut"].map(ShareTree.LeftOut.decode) ?? []
        let tree = ShareTree(identities: identities, leftOut: leftOut, accepting: options.selectors,
                             now: Int64(Date().timeIntervalSince1970))
        return ShareSession(tree: tree, files: ShareFiles(prebuilt: files, profile: options.profile), built: files.count)
    }

    /// An item by identifier, or by its path in the exported tree
    /// (`piv_8E2F55A1.p12`, `PIV/piv_8E2F55A1.p12`, `PIV.zip`).
    func entry(_ name: String) throws -> ShareTree.Entry {
        if let e = tree.entry(name) { return e }
        if let e = tree.root.first(where: { $0.fileName == name }) { return e }
        if let e = tree.zips.first(where: { $0.fileName == name }) { return e }
        for folder in tree.folders {
            if let e = folder.children.first(where: { "\(folder.fileName)/\($0.fileName)" == name }) { return e }
        }
        // An identity the tree leaves out, by its label or as a folder item: say why.
        if let left = tree.leftOut.first(where: { l in
            l.label == name || tree.folders.contains { "\($0.identifier).\(l.label)" == name }
        }) {
            throw CLIError("\(left.label) is left out of the share tree: \(left.note)")
        }
        throw CLIError("no item \(name) in the share tree (see `keyshare share list`)")
    }

    /// One line per identity the tree leaves out (`left out: LABEL: why`).
    func printLeftOut() {
        for l in tree.leftOut { Console.out("left out: \(l.label): \(l.note)") }
    }
}

struct ShareList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "Show the share tree: root PKCS #12 files, folders and zips, with sizes.")
    @OptionGroup var options: TreeOptions
    @OptionGroup var selection: TokenSelection
    @OptionGroup var pin: PINOptions
    @Flag(help: "JSON output.") var json = false

    func run() throws {
        let session = try ShareSession.open(selection, pin, options)
        let listing = try ShareListing(session: session, profile: options.profile)
        if json {
            try Console.json(listing)
            return
        }
        var rows: [[String]] = []
        func add(_ item: ShareListing.Item, indent: String = "") {
            rows.append([item.selectable ? "" : "-", indent + item.identifier, item.fileName, item.type,
                         item.date, item.kind == "folder" ? "\(item.items?.count ?? 0) items" : "\(item.size)"])
        }
        listing.root.forEach { add($0) }
        for folder in listing.folders {
            add(folder)
            folder.items?.forEach { add($0, indent: "  ") }
        }
        listing.zips.forEach { add($0) }
        Console.table(["", "ITEM", "FILE", "TYPE", "DATE", "SIZE"], rows)
        session.printLeftOut()
        if !options.selectors.isEmpty { Console.out("(-: greyed out, not accepted by the given selectors)") }
    }
}

/// The JSON (and table) form of the tree; dates are UTC ISO 8601.
struct ShareListing: Encodable {
    struct Item: Encodable {
        var identifier: String
        var fileName: String
        var kind: String
        var type: String
        var category: String?
        var serial: String?
        var date: String
        var size: Int
        var selectable: Bool
        var items: [Item]?
        var entries: [String]?
    }

    /// An identity the tree leaves out: reason "tpm" or "not-exportable".
    struct LeftOut: Encodable {
        var label: String
        var reason: String
        var note: String
    }

    var profile: String
    var root: [Item]
    var folders: [Item]
    var zips: [Item]
    var leftOut: [LeftOut]

    init(session: ShareSession, profile: PKCS12.Profile) throws {
        func item(_ e: ShareTree.Entry) throws -> Item {
            let single = e.kind == .pkcs12 ? e.identities.first : nil
            return Item(
                identifier: e.identifier, fileName: e.fileName, kind: e.kind.rawValue, type: e.selector,
                category: single?.category.rawValue, serial: single?.certificate.serialHex,
                date: Self.iso8601(e.date), size: try session.files.size(of: e), selectable: e.selectable,
                items: e.kind == .folder ? try e.children.map(item) : nil,
                entries: e.kind == .zip ? e.children.map(\.fileName) : nil)
        }
        self.profile = profile.rawValue
        root = try session.tree.root.map(item)
        folders = try session.tree.folders.map(item)
        zips = try session.tree.zips.map(item)
        leftOut = session.tree.leftOut.map { LeftOut(label: $0.label, reason: $0.reason.rawValue, note: $0.note) }
    }

    static func iso8601(_ unix: Int64) -> String {
        var t = time_t(unix)
        var parts = tm()
        gmtime_r(&t, &parts)
        return "\(zeroPadded(parts.tm_year + 1900, 4))-\(zeroPadded(parts.tm_mon + 1, 2))-\(zeroPadded(parts.tm_mday, 2))T"
            + "\(zeroPadded(parts.tm_hour, 2)):\(zeroPadded(parts.tm_min, 2)):\(zeroPadded(parts.tm_sec, 2))Z"
    }
}

struct ShareGet: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get", abstract: "Write one item of the share tree (a PKCS #12 or a zip) to a file (0600).")
    @Argument(help: "The item identifier: LABEL, <Folder>.<LABEL> or <Folder>.zip (or its path: PIV/piv_8E2F55A1.p12).",
              completion: StoreCompletion.items)
    var item: String
    @Option(name: .customLong("out"), help: "The file to write (0600; - for standard output).") var out: String
    @OptionGroup var options: TreeOptions
    @OptionGroup var selection: TokenSelection
    @OptionGroup var pin: PINOptions
    @Flag(help: "JSON output.") var json = false
    @OptionGroup var force: ForceOption

    func run() throws {
        try FileIO.checkOutput(out, force: force.force)
        let session = try ShareSession.open(selection, pin, options)
        let entry = try session.entry(item)
        guard entry.kind != .folder else { throw CLIError("\(item) is a folder; get its zip (\(entry.fileName).zip) or one of its files") }
        guard entry.selectable else { throw CLIError("\(item) is not accepted by the given selectors") }
        let bytes = try session.files.bytes(of: entry)
        try FileIO.write(bytes, out, force: force.force)
        let what = entry.kind == .zip ? "\(entry.children.count) PKCS #12 files" : entry.selector
        if json {
            struct Wrote: Encodable { var file, name, item, profile: String; var bytes: Int }
            return try Console.json(["wrote": Wrote(file: out, name: entry.fileName, item: entry.selector,
                                                    profile: options.profile.rawValue, bytes: bytes.count)])
        }
        (out == "-" ? Console.error : Console.out)("wrote \(entry.fileName) (\(what), \(bytes.count) bytes, \(options.profile.rawValue) profile) to \(out)")
    }
}

struct ShareExportTree: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export-tree", abstract: "Write the whole share tree into a directory (folders as directories).")
    @Argument(help: "The directory to create (0700); it must not exist, or be empty.") var directory: String
    @OptionGroup var options: TreeOptions
    @OptionGroup var selection: TokenSelection
    @OptionGroup var pin: PINOptions
    @OptionGroup var output: JSONOption

    /// The tree is written into a temporary directory beside DIRECTORY and
    /// renamed into place once complete: a failure leaves no partial tree.
    func run() throws {
        try OutputFile.checkNewDirectory(directory)
        let session = try ShareSession.open(selection, pin, options)
        var files = 0
        var total = 0
        try OutputFile.produceDirectory(at: directory) { root in
            func put(_ entry: ShareTree.Entry, in dir: String) throws {
                let bytes = try session.files.bytes(of: entry)
                try OutputFile.write(bytes, to: dir + "/" + entry.fileName, existing: .refuse, mode: 0o600)
                files += 1
                total += bytes.count
            }
            for entry in session.tree.root { try put(entry, in: root) }
            for folder in session.tree.folders {
                let dir = root + "/" + folder.fileName
                try OutputFile.makeDirectory(dir)
                for entry in folder.children { try put(entry, in: dir) }
            }
            for zip in session.tree.zips { try put(zip, in: root) }
        }
        if output.json {
            return try Console.json([
                "directory": .string(directory), "files": .int(files), "bytes": .int(total), "profile": .string(options.profile.rawValue),
                "leftOut": JSONField.strings(session.tree.leftOut.map { "\($0.label): \($0.note)" }),
            ] as [String: JSONField])
        }
        Console.out("wrote \(files) files (\(total) bytes, \(session.built) PKCS #12 builds, \(options.profile.rawValue) profile) to \(directory)")
        session.printLeftOut()
    }
}
