#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import KeySharing
import Keychain

/// `keyshare backup --out FILE`: the store as one encrypted, integrity-protected
/// archive under a passphrase of its own (docs/backup.md). What is bound to
/// this machine (TPM tokens, TPM-bound tokens, TPM keys) cannot move: it is
/// left out, and the report says so and what to do instead.
struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Write an encrypted, integrity-protected archive of the store (keyshare restore reads it).",
        discussion: """
            The archive holds the store (tokens, keys, certificates, passwords, settings, agent policy) and the \
            share policy, as the store has them: keys stay encrypted under their tokens' PINs, and the whole \
            archive is encrypted again under its own passphrase (scrypt, AES-256-GCM), at least \
            \(StoreArchive.minimumPassphraseLength) characters. It is taken consistently while the agent and \
            applications use the store. TPM tokens, tokens bound to this machine's TPM and keys in the TPM cannot \
            move to another machine (binding them to this device is their point): they are left out, and the report \
            says what to do instead. Cards' tokens come back when the card is inserted.
            """)

    @Option(name: .customLong("out"), help: "The archive to write: a new file (mode 0600).") var out: String
    @Option(name: .customLong("passphrase-source"),
            help: "Where the archive's passphrase comes from (env:VAR or file:PATH); asked twice at the terminal if absent.")
    var passphraseSource: SecretSource?
    @OptionGroup var force: ForceOption
    @OptionGroup var output: JSONOption

    func run() throws {
        guard out != "-" else { throw CLIError("--out takes a file: a backup is written to a new file, not to standard output") }
        try FileIO.checkOutput(out, force: force.force)
        let home = KeychainStore.defaultHome()
        guard KeychainStore.exists(home: home) else { throw CLIError("there is no store at \(home): nothing to back up") }
        let store = try KeychainStore(home: home)
        var passphrase = try Secrets.obtain(passphraseSource, prompt: "Passphrase for the backup: ", what: "backup passphrase",
                                            confirm: true)
        defer { ArchiveSecrets.wipe(&passphrase) }
        if passphraseSource == nil && passphrase.isEmpty { throw CLIError("no backup passphrase entered: nothing was written") }
        guard passphrase.count >= StoreArchive.minimumPassphraseLength else {
            throw CLIError("the backup passphrase has \(passphrase.count) characters; it needs at least "
                           + "\(StoreArchive.minimumPassphraseLength): the archive can be attacked offline wherever it is copied")
        }
        let image = try store.image()
        var entries = [StoreArchive.Entry(name: ArchiveNames.store, bytes: image.database)]
        if let policy = try ArchiveSecrets.readSharePolicy(home: store.home) {
            entries.append(StoreArchive.Entry(name: ArchiveNames.sharePolicy, bytes: policy))
        }
        let archive = try StoreArchive.seal(entries, passphrase: passphrase)
        try OutputFile.write(archive, to: out, existing: FileIO.existing(force.force), mode: 0o600)

        let c = image.contents
        if output.json {
            return try Console.json(ArchiveReport(c, archive: out, bytes: archive.count, sharePolicy: entries.count > 1))
        }
        Console.out("backed up \(ArchiveReport.count(c.tokens.count, "token")) (\(ArchiveReport.count(c.itemCount, "item")))"
                    + (entries.count > 1 ? " and the share policy" : "") + " to \(out) (\(ArchiveReport.size(archive.count)))")
        for line in ArchiveReport.notes(c, verb: "not backed up") { Console.out(line) }
    }
}

/// `keyshare restore FILE`: a backup into a home that has no store yet, as on a
/// new machine. The archive is opened and checked wholly in memory first; a
/// wrong passphrase or any changed byte refuses it whole and writes nothing.
struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Restore a keyshare backup into a home without a store (KEYSHARE_HOME, or the default).",
        discussion: """
            Nothing is written until the whole archive has been opened with its passphrase, its integrity \
            checked and its store verified; then the store is created at once (a complete keychain.db, mode 0600, \
            in a 0700 directory). A home that already holds a store is refused, and so is one an agent serves \
            (stop it first: keyshare agent stop). The tokens open with their PINs as before. Tokens bound to \
            another machine's TPM are never in a backup; if an archive holds one, it is left out with a note.
            """)

    @Argument(help: "The archive (from keyshare backup).") var file: String
    @Option(name: .customLong("passphrase-source"),
            help: "Where the archive's passphrase comes from (env:VAR or file:PATH); asked at the terminal if absent.")
    var passphraseSource: SecretSource?
    @OptionGroup var output: JSONOption

    func run() throws {
        let home = KeychainStore.defaultHome()
        if let there = StoreRestore.occupant(home: home, others: [AccessPolicyFile.fileName]) {
            throw CLIError("\(home) already holds a store (\(there)): restore writes only into a home without one; "
                           + "set KEYSHARE_HOME to a new directory, or move the store away")
        }
        if let agent = try AgentCommand.status() {
            throw CLIError("a keyshare agent (pid \(agent["pid"] ?? "?")) serves \(home): stop it first (keyshare agent stop), then restore")
        }
        let archive = try ArchiveSecrets.readArchive(file)
        try StoreArchive.checkHeader(archive)
        var passphrase = try Secrets.obtain(passphraseSource, prompt: "Passphrase of the backup: ", what: "backup passphrase")
        defer { ArchiveSecrets.wipe(&passphrase) }
        if passphraseSource == nil && passphrase.isEmpty { throw CLIError("no backup passphrase entered: nothing was restored") }
        let entries = try StoreArchive.open(archive, passphrase: passphrase)
        for e in entries where e.name != ArchiveNames.store && e.name != ArchiveNames.sharePolicy {
            throw StoreArchive.Failure.unsupported("it holds \(e.name), unknown to this keyshare: restore with a newer keyshare")
        }
        guard let database = entries.first(where: { $0.name == ArchiveNames.store }) else {
            throw StoreArchive.Failure.malformed("it holds no store")
        }
        let prepared = try StoreRestore.check(database.bytes)
        let policy = entries.first(where: { $0.name == ArchiveNames.sharePolicy })

        // Everything is checked: write. The share policy first, the store last
        // (its keychain.db is what makes the home a store); a failure removes both.
        if let policy {
            try StoreRestore.prepareHome(home)
            try OutputFile.write(policy.bytes, to: AccessPolicyFile.path(home: home), existing: .refuse, mode: 0o600)
        }
        do {
            try StoreRestore.install(prepared, home: home)
        } catch {
            if policy != nil { unlink(AccessPolicyFile.path(home: home)) }
            throw error
        }

        let c = prepared.contents
        if output.json {
            return try Console.json(ArchiveReport(c, archive: file, bytes: archive.count, sharePolicy: policy != nil, home: home))
        }
        Console.out("restored \(ArchiveReport.count(c.tokens.count, "token")) (\(ArchiveReport.count(c.itemCount, "item")))"
                    + (policy != nil ? " and the share policy" : "") + " into \(home); the tokens open with their PINs as before")
        for line in ArchiveReport.notes(c, verb: "not restored") { Console.out(line) }
    }
}

/// The names of an archive's entries.
enum ArchiveNames {
    static let store = "keychain.db"
    static let sharePolicy = AccessPolicyFile.fileName
}

/// Reading the files a backup or restore needs, bounded and without following
/// a planted link; wiping a passphrase after use.
enum ArchiveSecrets {
    static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { b in
            if let base = b.baseAddress { explicit_bzero(base, b.count) }
        }
    }

    /// The archive's bytes (a regular file of at most StoreArchive.maximumSize).
    static func readArchive(_ path: String) throws -> [UInt8] {
        try readFile(path, limit: StoreArchive.maximumSize, what: "the backup", followLinks: true)
    }

    /// The share policy's bytes, nil without one; checked as the share service
    /// checks it (a regular file of this user, 0600).
    static func readSharePolicy(home: String) throws -> [UInt8]? {
        let path = AccessPolicyFile.path(home: home)
        var st = stat()
        guard lstat(path, &st) == 0 else {
            if errno == ENOENT { return nil }
            throw CLIError("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        _ = try AccessPolicyFile.load(home: home)
        return try readFile(path, limit: 1 << 20, what: "the share policy", followLinks: false)
    }

    private static func readFile(_ path: String, limit: Int, what: String, followLinks: Bool) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | (followLinks ? 0 : O_NOFOLLOW))
        guard fd >= 0 else { throw CLIError("cannot read \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw CLIError("cannot read \(path): \(String(cString: strerror(errno)))") }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw CLIError("cannot read \(path): \(what) must be a regular file") }
        guard st.st_size <= limit else { throw CLIError("\(path) is larger than \(what) can be (\(limit >> 20) MiB)") }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(st.st_size))
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw CLIError("cannot read \(path): \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            bytes += chunk[0..<n]
            guard bytes.count <= limit else { throw CLIError("\(path) is larger than \(what) can be (\(limit >> 20) MiB)") }
        }
        return bytes
    }
}

/// The report of a backup or a restore: the sentence and notes for people,
/// the same facts with --json.
struct ArchiveReport: Encodable {
    struct Token: Encodable {
        var label: String
        var tokenID: String
        var kind: String
        var items: Int
        /// Left-out tokens: why, and what to do instead.
        var reason: String?
        var instead: String?
        /// Soft tokens: TPM keys of the token that were left out.
        var tpmKeysLeftOut: Int?
    }

    var archive: String
    var bytes: Int
    var home: String?
    var tokens: [Token]
    var items: Int
    var sharePolicy: Bool
    var leftOut: [Token]
    var settingsLeftOut: [String]

    init(_ c: StoreContents, archive: String, bytes: Int, sharePolicy: Bool, home: String? = nil) {
        self.archive = archive
        self.bytes = bytes
        self.home = home
        self.sharePolicy = sharePolicy
        items = c.itemCount
        tokens = c.tokens.map {
            Token(label: $0.label, tokenID: $0.tokenID, kind: $0.kind.rawValue, items: $0.items,
                  tpmKeysLeftOut: $0.tpmKeysLeftOut > 0 ? $0.tpmKeysLeftOut : nil)
        }
        leftOut = c.leftOut.map {
            let (reason, instead) = Self.advice($0)
            return Token(label: $0.label, tokenID: $0.tokenID, kind: $0.kind.rawValue, items: $0.items, reason: reason, instead: instead)
        }
        settingsLeftOut = c.settingsLeftOut
    }

    /// Why a token cannot move, and what to do instead.
    static func advice(_ t: StoreContents.Token) -> (reason: String, instead: String) {
        switch t.kind {
        case .tpm:
            ("a TPM token: its keys exist only inside this machine's TPM and can never leave it",
             "on the new machine create a TPM token and new keys (keyshare token create --tpm, keyshare key generate) "
                + "and have their certificates issued again")
        case .tpmBound:
            ("sealed to this machine's TPM (keyshare token bind --tpm): it opens nowhere else",
             "to move it, unbind it (keyshare token unbind --token \(t.label)), back up again, and bind it on the new "
                + "machine (keyshare token bind --tpm); or create a new token there")
        case .external:
            ("a smart card's token: the store only mirrors the card",
             "its keys stay on the card: the token comes back when the card is inserted on the new machine "
                + "(the driver registration is in the backup)")
        case .soft:
            ("", "")
        }
    }

    /// One line per token or key left out, and for the TPM setting.
    static func notes(_ c: StoreContents, verb: String) -> [String] {
        var lines = c.leftOut.map { t -> String in
            let (reason, instead) = advice(t)
            return "\(verb): token \(t.label) (\(count(t.items, "item"))): \(reason); \(instead)"
        }
        for t in c.tokens where t.tpmKeysLeftOut > 0 {
            lines.append("\(verb): \(count(t.tpmKeysLeftOut, "TPM key")) of token \(t.label): they exist only inside this "
                         + "machine's TPM; make new keys on the new machine")
        }
        if c.settingsLeftOut.contains("tpm-tcti") {
            lines.append("\(verb): this machine's TPM setting (keyshare token tpm-config); set it again on the new machine if needed")
        }
        return lines
    }

    static func count(_ n: Int, _ noun: String) -> String { "\(n) \(noun)\(n == 1 ? "" : "s")" }

    static func size(_ bytes: Int) -> String {
        bytes < 10 * 1024 ? "\(bytes) bytes" : bytes < 10 << 20 ? "\(bytes >> 10) KiB" : "\(bytes >> 20) MiB"
    }
}
