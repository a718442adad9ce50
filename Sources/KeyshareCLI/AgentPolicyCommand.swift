import ArgumentParser
import FoundationEssentials
import Glibc
import Keychain
import KeySharing
import KeyshareAgent
import Tokens

/// `keyshare policy`: which programs may use which tokens and access groups
/// through the agent (docs/agent.md, "Policy"; the rule is AgentPolicy's).
/// Kept in the store itself (one transaction per change); applies to
/// applications that connect after the change.
struct AgentPolicyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy",
        abstract: "Allow or deny programs the use of tokens through the agent.",
        discussion: """
            With no rule every program of yours sees every token. An allow rule for a token makes that
            token an allow-list; a deny rule hides the token (or, without --token, refuses the program).
            An unlock rule names a program `keyshare unlock` without --program unlocks the token for.
            """,
        subcommands: [Allow.self, Deny.self, Unlock.self, Remove.self, List.self])

    struct RuleOptions: ParsableArguments {
        @Option(help: "The program (resolved to its real path; the rule also records its SHA-256: copies with the same content are the same program).") var exe: String
        @Option(name: .customLong("token"), help: "Only this token (label or token ID); default: every token.",
                completion: StoreCompletion.tokens) var token: String?

        func executable() throws -> String { try AgentPolicyCommand.executable(exe) }

        /// The program's identity now: its file and SHA-256 (nil: not readable or
        /// too large; the rule then names the file at the path only).
        func program(_ path: String) -> (file: FileIdentity?, digest: [UInt8]?) {
            let found = ProgramDigests.file(at: path)
            return (found?.file, found?.digest)
        }

        func tokenRecord(_ ctx: Context) throws -> TokenRecord? {
            try token.map { try ctx.tokens.resolveToken($0, includeAbsent: true) }
        }

        /// Records (or replaces) this program's rule of `effect` for the token
        /// named (or every token), with the program's identity now.
        func setRule(_ effect: AgentPolicy.Effect, exe: String, groups: [String]? = nil, json: Bool) throws {
            try AgentPolicyCommand.edit(json: json) { policy, ctx in
                let t = try tokenRecord(ctx)
                let p = program(exe)
                let r = AgentPolicy.Rule(effect: effect, exe: exe, tokenID: t?.tokenID, tokenLabel: t?.label,
                                         groups: groups, digest: p.digest, file: p.file)
                policy.set(r)
                return "policy: \(r)\(AgentPolicyCommand.programNote(r))"
            }
        }
    }

    /// A program path as rules and `keyshare unlock --program` name it: resolved (realpath), an executable file.
    static func executable(_ exe: String) throws -> String {
        guard exe.count <= 4096, !exe.contains("\t"), !exe.contains("\n") else { throw CLIError("unusable program path") }
        guard let resolved = realpath(exe, nil) else {
            throw CLIError("cannot resolve \(exe): \(String(cString: strerror(errno)))")
        }
        defer { free(resolved) }
        let path = String(cString: resolved)
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, access(path, X_OK) == 0 else {
            throw CLIError("\(path) is not an executable file")
        }
        return path
    }

    static func edit(json: Bool, _ body: (inout AgentPolicy, Context) throws -> String) throws {
        let ctx = try Context.open(syncDrivers: false)
        let message = try ctx.store.transaction { () throws -> String in
            var policy: AgentPolicy
            do { policy = try AgentPolicy.load(from: ctx.store) } catch { throw CLIError("\(error)") }
            let message = try body(&policy, ctx)
            try policy.save(to: ctx.store)
            return message
        }
        try Console.report(json, message, ["policy": .string(message)])
    }

    /// What the rule recorded of the program, for the confirmation line.
    static func programNote(_ r: AgentPolicy.Rule) -> String {
        guard let d = r.digest else { return " (not hashed: matched by the file at that path only)" }
        return " (sha256 \(ProgramDigests.hex(d).prefix(16))…)"
    }

    struct Allow: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Allow a program a token (or every token), optionally only some access groups.")
        @OptionGroup var rule: RuleOptions
        @Option(name: .customLong("access-group"), help: "Only this access group (repeatable); default: every group.")
        var accessGroups: [String] = []
        @OptionGroup var output: JSONOption

        func run() throws {
            let exe = try rule.executable()
            guard accessGroups.allSatisfy({ !$0.isEmpty && !$0.contains(",") && !$0.contains("\t") && !$0.contains("\n") }) else {
                throw ValidationError("an access group must be non-empty and hold no comma, tab or newline")
            }
            try rule.setRule(.allow, exe: exe, groups: accessGroups.isEmpty ? nil : accessGroups, json: output.json)
        }
    }

    struct Deny: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Deny a program a token (hidden), or everything (refused).")
        @OptionGroup var rule: RuleOptions
        @OptionGroup var output: JSONOption

        func run() throws {
            let exe = try rule.executable()
            try rule.setRule(.deny, exe: exe, json: output.json)
        }
    }

    /// `keyshare policy unlock`: a program that `keyshare unlock` without
    /// --program unlocks the token for (issue 27); not a program that
    /// authenticates a person, which no unlock reaches (said at once).
    struct Unlock: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Name a program that `keyshare unlock` (without --program) unlocks a token (or every token) for.")
        @OptionGroup var rule: RuleOptions
        @OptionGroup var output: JSONOption

        func run() throws {
            let exe = try rule.executable()
            if let p = NamedProgram(path: exe), let why = Authenticators.reason(for: p) {
                throw CLIError("no unlock ever reaches \(exe): \(why); it asks for the PIN itself")
            }
            try rule.setRule(.unlock, exe: exe, json: output.json)
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a program's rules (for one token, or all of them).")
        @OptionGroup var rule: RuleOptions
        @Flag(name: .customLong("unlock-only"), help: "Only its unlock rules (its allow or deny rules stay).") var unlockOnly = false
        @OptionGroup var output: JSONOption

        func run() throws {
            let exe = try rule.executable()
            try AgentPolicyCommand.edit(json: output.json) { policy, ctx in
                let t = try rule.tokenRecord(ctx)
                let n = policy.remove(exe: exe, tokenID: t?.tokenID, effect: unlockOnly ? .unlock : nil)
                guard n > 0 else { throw CLIError("no rule for \(exe)\(t.map { " and token \($0.label)" } ?? "")") }
                return "removed \(n) rule\(n == 1 ? "" : "s") for \(exe)"
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show the rules.")
        @Flag(help: "JSON output.") var json = false

        func run() throws {
            let ctx = try Context.open(syncDrivers: false)
            let policy: AgentPolicy
            do { policy = try AgentPolicy.load(from: ctx.store) } catch { throw CLIError("\(error)") }
            let rows = policy.rules.map {
                ["effect": $0.effect.rawValue, "exe": $0.exe, "token": $0.tokenID?.description ?? "*",
                 "label": $0.tokenLabel ?? "", "groups": $0.groups?.joined(separator: ",") ?? "*",
                 "sha256": $0.digest.map(ProgramDigests.hex) ?? "",
                 "file": $0.file.map { "\($0.device):\($0.inode)" } ?? "",
                 "from": $0.fromPrompt ? "prompt" : "command"]
            }
            if json { return try Console.json(["rules": rows]) }
            if rows.isEmpty { Console.out("no policy: every program of yours may use every token"); return }
            // FROM: `command` (keyshare policy), `prompt` ("Always allow" at the agent's prompt).
            Console.table(["EFFECT", "EXE", "TOKEN", "LABEL", "GROUPS", "SHA256", "FROM"],
                          rows.map { [$0["effect"]!, $0["exe"]!, $0["token"]!, $0["label"]!, $0["groups"]!,
                                      $0["sha256"]!.isEmpty ? "-" : $0["sha256"]!.prefix(16) + "…", $0["from"]!] })
        }
    }
}
