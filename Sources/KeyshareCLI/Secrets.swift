import ArgumentParser
import FoundationEssentials
import Glibc

/// Where a PIN or password comes from. Never the command line itself: argv is
/// visible to every user through /proc.
struct SecretSource: ExpressibleByArgument, Sendable {
    /// `credential:NAME`: $CREDENTIALS_DIRECTORY/NAME, where systemd puts a
    /// service's credentials (LoadCredentialEncrypted=: kept encrypted on disk,
    /// decrypted by systemd into a non-swappable directory only the service reads).
    enum Kind: Sendable { case env(String), file(String), credential(String) }
    let kind: Kind

    init?(argument: String) {
        if argument.hasPrefix("credential:"), case let name = String(argument.dropFirst(11)),
           !name.isEmpty, !name.contains("/"), name != ".", name != ".." {
            kind = .credential(name)
        } else if argument.hasPrefix("env:"), argument.count > 4 {
            kind = .env(String(argument.dropFirst(4)))
        } else if argument.hasPrefix("file:"), argument.count > 5 {
            kind = .file(Self.expandingTilde(String(argument.dropFirst(5))))
        } else {
            return nil
        }
    }

    static var defaultValueDescription: String { "env:VAR|file:PATH|credential:NAME" }

    /// The forms a source option takes, for the error when a value is none of
    /// them (usually the secret itself, which must never be on argv).
    static let accepted = "takes env:VAR (an environment variable), file:PATH (a file; ~ is your home) or credential:NAME (a systemd credential, $CREDENTIALS_DIRECTORY/NAME), never the secret itself (every user can read a command line)"

    /// `~` and `~user` at the start of a path, as a shell expands them: a
    /// quoted `file:~/p12.pass` (or one the shell left alone, as bash does
    /// after `:`) names the file the user meant.
    static func expandingTilde(_ path: String) -> String {
        guard path.hasPrefix("~") else { return path }
        let rest = path.dropFirst()
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let user = String(rest[rest.startIndex..<slash])
        let home: String?
        if user.isEmpty {
            home = ProcessInfo.processInfo.environment["HOME"].flatMap { $0.isEmpty ? nil : $0 }
                ?? getpwuid(getuid()).flatMap { $0.pointee.pw_dir.map { String(cString: $0) } }
        } else {
            home = getpwnam(user).flatMap { $0.pointee.pw_dir.map { String(cString: $0) } }
        }
        guard let home else { return path }
        return home + rest[slash...]
    }

    /// A secret file is small: anything larger is the wrong file.
    static let maxFileSize = 64 * 1024

    /// The secret's bytes; a trailing newline of a file is not part of it.
    func read(what: String) throws -> [UInt8] {
        switch kind {
        case .env(let name):
            guard let value = ProcessInfo.processInfo.environment[name] else {
                throw CLIError("\(what): environment variable \(name) is not set")
            }
            return Array(value.utf8)
        case .credential(let name):
            guard let dir = ProcessInfo.processInfo.environment["CREDENTIALS_DIRECTORY"], dir.hasPrefix("/") else {
                throw CLIError("\(what): credential:\(name) needs $CREDENTIALS_DIRECTORY, which systemd sets for a unit with "
                               + "LoadCredentialEncrypted=\(name):FILE (or LoadCredential=); it is not set")
            }
            var bytes = try Self.readFile(dir + "/" + name, what: what)
            if bytes.last == 0x0A { bytes.removeLast() }
            return bytes
        case .file(let path):
            var bytes = try Self.readFile(path, what: what)
            if bytes.last == 0x0A { bytes.removeLast() }
            if bytes.last == 0x0D { bytes.removeLast() }
            return bytes
        }
    }

    /// open(2) and read(2), so a failure says why (errno): no such file,
    /// permission denied, a directory.
    private static func readFile(_ path: String, what: String) throws -> [UInt8] {
        func failure(_ err: Int32) -> CLIError {
            CLIError("\(what): cannot read \(path): \(String(cString: strerror(err)))")
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { throw failure(errno) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw failure(errno) }
        if (st.st_mode & S_IFMT) == S_IFDIR { throw failure(EISDIR) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw failure(errno)
            }
            if n == 0 { break }
            bytes += chunk[0..<n]
            guard bytes.count <= maxFileSize else {
                throw CLIError("\(what): \(path) is larger than \(maxFileSize / 1024) KiB: not a PIN or password file")
            }
        }
        return bytes
    }
}

enum Secrets {
    /// Reads from the source if one was given, else prompts on the terminal
    /// without echo; a non-interactive run with no source is an error, not a hang.
    static func obtain(_ source: SecretSource?, prompt: String, what: String, confirm: Bool = false) throws -> [UInt8] {
        if let source { return try source.read(what: what) }
        let first = try promptNoEcho(prompt)
        if confirm {
            let second = try promptNoEcho("Repeat " + prompt.prefix(1).lowercased() + prompt.dropFirst())
            guard first == second else { throw CLIError("\(what): the two entries differ") }
        }
        return first
    }

    /// A PIN to be checked against a token. An empty entry at the prompt
    /// (Enter alone, or Ctrl-D) is a cancelled prompt, and a PIN outside the
    /// token's length bounds (PINPolicy: 4 to 255 bytes) cannot be right:
    /// both end here, before the store or the agent is asked, so neither
    /// costs one of the token's attempts (issue 28).
    static func pin(_ source: SecretSource?, prompt: String, what: String) throws -> [UInt8] {
        let pin = try obtain(source, prompt: prompt, what: what)
        if source == nil && pin.isEmpty { throw CLIError("no \(what) entered: nothing was tried") }
        guard (PINPolicy.minLength...PINPolicy.maxLength).contains(pin.count) else {
            throw CLIError("the \(what) given has \(pin.count) byte\(pin.count == 1 ? "" : "s"); PINs are \(PINPolicy.range) bytes, "
                           + "so it was not tried and no attempt was counted")
        }
        return pin
    }

    static func promptNoEcho(_ prompt: String) throws -> [UInt8] {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY)
        guard fd >= 0 else {
            // No terminal: on a desktop, the pinentry on this process's display (DesktopPrompt).
            if let pin = try DesktopPrompt.ask(prompt) { return pin }
            throw CLIError("no terminal to ask for the \(prompt.lowercased().trimmingBlanks().trimming(charactersIn: ":")): give a source option (env:VAR or file:PATH)")
        }
        defer { close(fd) }
        _ = prompt.withCString { write(fd, $0, strlen($0)) }
        var saved = termios()
        let haveTerm = tcgetattr(fd, &saved) == 0
        if haveTerm {
            var noEcho = saved
            noEcho.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(fd, TCSAFLUSH, &noEcho)
        }
        defer {
            if haveTerm { tcsetattr(fd, TCSAFLUSH, &saved) }
            _ = write(fd, "\n", 1)
        }
        var bytes: [UInt8] = []
        var c: UInt8 = 0
        while read(fd, &c, 1) == 1, c != 0x0A {
            if c != 0x0D { bytes.append(c) }
        }
        return bytes
    }
}

/// The secret-source options every command that unlocks a token shares.
struct PINOptions: ParsableArguments {
    @Option(name: .customLong("pin-source"), help: "Where the token's user PIN comes from (env:VAR or file:PATH); prompted if absent.")
    var pinSource: SecretSource?

    func userPIN(token label: String) throws -> [UInt8] {
        try Secrets.pin(pinSource, prompt: "User PIN for \(label): ", what: "user PIN")
    }
}

struct TokenSelection: ParsableArguments {
    @Option(name: .customLong("token"), help: "The token to use (label or token ID); needed when there is more than one.",
            completion: StoreCompletion.tokens)
    var token: String?
}
