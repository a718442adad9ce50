import ArgumentParser
import FoundationEssentials
import Glibc
import KeySharing
import KeyShare

/// `--access-group` binds this run the way an application's entitlements
/// bind it: only items of those groups exist for it. Without the option,
/// `KEYSHARE_ACCESS_GROUPS` (comma-separated) applies, as in the module;
/// without either, the keychain owner sees every group.
struct AccessGroupOptions: ParsableArguments {
    @Option(name: .customLong("access-group"), help: "An access group this run belongs to (repeatable); new items go to the first.")
    var accessGroups: [String] = []

    var groups: [String]? {
        if !accessGroups.isEmpty { return accessGroups }
        if let env = ProcessInfo.processInfo.environment["KEYSHARE_ACCESS_GROUPS"] {
            let list = env.split(separator: ",").map { $0.trimmingBlanks() }.filter { !$0.isEmpty }
            return list.isEmpty ? nil : list
        }
        return nil
    }
}

/// The KeyShare session a key, trust or wrap command works through: the same
/// API an application uses, so the CLI exercises exactly the library.
enum SessionFactory {
    static func open(_ groups: AccessGroupOptions) throws -> KeychainSession {
        try KeychainSession(home: nil, accessGroups: groups.groups)
    }

    /// Unlocks the selected token, prompting or reading the PIN source.
    static func unlock(_ session: KeychainSession, _ selection: TokenSelection, _ pin: PINOptions) throws {
        let ctx = try Context.open()
        let token = try ctx.token(selection)
        let secret = try pin.userPIN(token: token.label)
        try PINErrors.naming("user PIN", of: token) { _ = try session.unlock(token: token.tokenID.description, pin: secret) }
    }
}

enum FileIO {
    static func read(_ path: String) throws -> [UInt8] {
        if path == "-" {
            guard let bytes = StandardStream.readInput() else { throw CLIError("cannot read standard input: \(String(cString: strerror(errno)))") }
            return bytes
        }
        guard let data = FileManager.default.contents(atPath: path) else { throw CLIError("cannot read \(path)") }
        return [UInt8](data)
    }

    /// `-` is standard output; a path gets a new 0600 file (OutputFile's rule:
    /// an existing regular file only with --force, never a link or device).
    static func write(_ bytes: [UInt8], _ path: String, force: Bool) throws {
        if path == "-" { StandardStream.write(bytes); return }
        try OutputFile.write(bytes, to: path, existing: existing(force), mode: 0o600)
    }

    /// Refuses a bad output path before any work (before the PIN is asked for).
    static func checkOutput(_ path: String, force: Bool) throws {
        if path == "-" { return }
        try OutputFile.check(path, existing: existing(force))
    }

    static func existing(_ force: Bool) -> OutputFile.Existing { force ? .replaceRegularFile : .refuse }

    /// Every certificate in a PEM bundle or one DER certificate.
    static func certificates(_ path: String) throws -> [Certificate] {
        let bytes = try read(path)
        if let text = String(bytes: bytes, encoding: .utf8), text.contains("-----BEGIN CERTIFICATE-----") {
            return try Certificate.parseAll(pem: text)
        }
        return [try Certificate(der: bytes)]
    }
}

/// `--force` for every command that writes a file the user names.
struct ForceOption: ParsableArguments {
    @Flag(help: "Replace an existing regular file at the output path (a link, device or directory is never replaced).")
    var force = false
}

extension KeyShareError {
    /// The exit status of a command that failed with this error.
    var exitCode: Int32 {
        if case .notWrapped = self { return 3 }
        return 1
    }
}
