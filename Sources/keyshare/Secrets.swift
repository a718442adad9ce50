import ArgumentParser
import Foundation

/// Where a PIN or password comes from. Never the command line itself: argv is
/// visible to every user through /proc.
struct SecretSource: ExpressibleByArgument, Sendable {
    enum Kind: Sendable { case env(String), file(String) }
    let kind: Kind

    init?(argument: String) {
        if argument.hasPrefix("env:"), argument.count > 4 {
            kind = .env(String(argument.dropFirst(4)))
        } else if argument.hasPrefix("file:"), argument.count > 5 {
            kind = .file(String(argument.dropFirst(5)))
        } else {
            return nil
        }
    }

    static var defaultValueDescription: String { "env:VAR|file:PATH" }

    /// The secret's bytes; a trailing newline of a file is not part of it.
    func read(what: String) throws -> [UInt8] {
        switch kind {
        case .env(let name):
            guard let value = ProcessInfo.processInfo.environment[name] else {
                throw CLIError("\(what): environment variable \(name) is not set")
            }
            return Array(value.utf8)
        case .file(let path):
            guard let data = FileManager.default.contents(atPath: path) else {
                throw CLIError("\(what): cannot read \(path)")
            }
            var bytes = [UInt8](data)
            if bytes.last == 0x0A { bytes.removeLast() }
            if bytes.last == 0x0D { bytes.removeLast() }
            return bytes
        }
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

    static func promptNoEcho(_ prompt: String) throws -> [UInt8] {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY)
        guard fd >= 0 else {
            throw CLIError("no terminal to ask for the \(prompt.lowercased().trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: ":"))): give a source option (env:VAR or file:PATH)")
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
        try Secrets.obtain(pinSource, prompt: "User PIN for \(label): ", what: "user PIN")
    }
}

struct TokenSelection: ParsableArguments {
    @Option(name: .customLong("token"), help: "The token to use (label or token ID); needed when there is more than one.")
    var token: String?
}
