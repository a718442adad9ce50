import ArgumentParser
import FoundationEssentials
import Glibc
import KeyshareAgent

/// `keyshare unlock --for 30m --program PATH`: the agent keeps the token's
/// key for that long and the named programs (or, without --program, those
/// the policy's `unlock` rules name; never every program) use its private
/// objects without C_Login, as a macOS keychain unlocked at login does
/// (docs/agent.md, "Unlock across processes"). No unlock reaches a program
/// that authenticates a person (PAM stacks, disk unlockers, screen lockers:
/// issue 27). `keyshare lock` ends it.
struct UnlockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock",
        abstract: "Unlock a token for named programs, for a while (the agent holds the key).",
        discussion: """
            The PIN is checked by the agent and a wrong one counts toward the lockout, as C_Login does.
            The unlock reaches the programs given with --program (the same file or the same content), or without
            --program those the policy names (keyshare policy unlock --exe PATH); none by default. It never reaches a
            program that authenticates a person (login, sshd, sudo, any PAM stack, cryptsetup, screen lockers).
            A new unlock of a token replaces its earlier one.
            """)

    @Option(name: .customLong("for"), help: "How long: N followed by s, m, h or d (a bare N is minutes), at most 7 days.")
    var duration: String?
    @Option(name: .customLong("program"), help: "A program the unlock reaches (repeatable; resolved to its real path).")
    var programs: [String] = []
    @OptionGroup var selection: TokenSelection
    @OptionGroup var pin: PINOptions
    @Flag(help: "Show which tokens of this store are unlocked, for how long and for which programs; unlock nothing.") var status = false
    @OptionGroup var output: JSONOption

    static func seconds(_ text: String) -> Double? {
        guard let last = text.last else { return nil }
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        let (number, unit) = units[last].map { (String(text.dropLast()), $0) } ?? (text, 60)
        guard let n = Double(number), n.isFinite, n > 0 else { return nil }
        let s = n * unit
        return s >= 1 && s <= 7 * 86400 ? s : nil
    }

    func run() throws {
        if status {
            let r = try AgentControl.call(.status, ControlProtocol.Message())
            let rows = (r.string("unlocked") ?? "").split(separator: "\n")
                .map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
            if output.json {
                return try Console.json(["unlocked": rows.map { row -> [String: JSONField] in
                    ["token": .string(row.first ?? ""),
                     "secondsLeft": row.count > 1 ? Int(row[1]).map(JSONField.int) ?? .string(row[1]) : .null,
                     "programs": .strings(row.count > 2 ? row[2].split(separator: ",").map { $0.trimmingBlanks() }.filter { !$0.isEmpty } : [])]
                }])
            }
            if rows.isEmpty { Console.out("no token of this store is unlocked"); return }
            Console.table(["TOKEN", "SECONDS LEFT", "PROGRAMS"], rows)
            return
        }
        guard let duration else { throw ValidationError("give --for DURATION (e.g. 30m), or --status") }
        guard let seconds = Self.seconds(duration) else {
            throw ValidationError("--for must be N followed by s, m, h or d (e.g. 30m), between 1 second and 7 days")
        }
        let paths = try programs.map { try AgentPolicyCommand.executable($0) }
        let token = try AgentControl.resolve(selection)
        var m = ControlProtocol.Message()
        m.set("token", token.id)
        m.set("seconds", String(seconds))
        if !paths.isEmpty { m.set("programs", paths.joined(separator: "\n")) }
        m["pin"] = try pin.userPIN(token: token.label)
        defer { m["pin"] = nil }
        let r = try AgentControl.call(.unlock, m)
        let label = r.string("label") ?? token.label
        // An agent from before scoped unlocks (no "source" in its answer) has
        // unlocked the token for every program: ended at once, and said.
        guard r.string("source") != nil else {
            var end = ControlProtocol.Message()
            end.set("token", token.id)
            _ = try? AgentControl.call(.lock, end)
            throw CLIError("the running keyshare agent is older and cannot limit an unlock to programs: the unlock was ended; "
                + "run keyshare agent restart, then unlock again")
        }
        var leftOut: [String] = []
        for line in (r.string("leftOut") ?? "").split(separator: "\n") {
            let f = line.split(separator: "\t", maxSplits: 1).map(String.init)
            leftOut.append(f[0])
            Console.error("not unlocked for \(f[0]): \(f.count > 1 ? f[1] : "")")
        }
        let reached = (r.string("programs") ?? "").split(separator: "\n").map(String.init)
        let fromPolicy = r.string("source") == "policy"
        let fields: [String: JSONField] = [
            "unlocked": .string(label), "tokenID": .string(token.id), "seconds": .int(reached.isEmpty ? 0 : Int(seconds)),
            "programs": .strings(reached), "leftOut": .strings(leftOut), "source": .optional(r.string("source")),
        ]
        if reached.isEmpty {
            return try Console.report(output.json, "token \(label) unlocked for no program: " + (fromPolicy
                ? "no --program given and the policy names none for it (keyshare policy unlock --exe PATH); nothing changed"
                : "none of the programs given may be unlocked; nothing changed"), fields)
        }
        let n = reached.count
        try Console.report(output.json,
            "unlocked token \(label) for \(duration) for \(n) program\(n == 1 ? "" : "s")\(fromPolicy ? " (policy unlock rules)" : ""): "
                + reached.joined(separator: ", ") + " (keyshare lock ends it)", fields)
    }
}

struct LockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock",
        abstract: "End `keyshare unlock` now: every application loses the token's key (its own C_Login stays).")
    @OptionGroup var selection: TokenSelection
    @OptionGroup var output: JSONOption

    func run() throws {
        var m = ControlProtocol.Message()
        m.set("token", selection.token)
        let r = try AgentControl.call(.lock, m)
        let n = Int(r.string("count") ?? "0") ?? 0
        try Console.report(output.json, n == 0 ? "nothing was unlocked" : "locked \(n) token\(n == 1 ? "" : "s")", ["locked": .int(n)])
    }
}
