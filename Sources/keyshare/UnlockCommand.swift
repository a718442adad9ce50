import ArgumentParser
import Foundation
import KeyshareAgent

/// `keyshare unlock --for 30m`: the agent keeps the token's key for that long
/// and every application the policy lets see the token uses its private
/// objects without C_Login, as a macOS keychain unlocked at login does
/// (docs/agent.md, "Unlock across processes"). `keyshare lock` ends it.
struct UnlockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock",
        abstract: "Unlock a token for every application the policy allows, for a while (the agent holds the key).",
        discussion: "The PIN is checked by the agent and a wrong one counts toward the lockout, as C_Login does.")

    @Option(name: .customLong("for"), help: "How long: N followed by s, m, h or d (a bare N is minutes), at most 7 days.")
    var duration: String?
    @OptionGroup var selection: TokenSelection
    @OptionGroup var pin: PINOptions
    @Flag(help: "Show which tokens of this store are unlocked and for how long; unlock nothing.") var status = false

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
            let lines = (r.string("unlocked") ?? "").split(separator: "\n")
            if lines.isEmpty { Console.out("no token of this store is unlocked"); return }
            Console.table(["TOKEN", "SECONDS LEFT"], lines.map { $0.split(separator: "\t").map(String.init) })
            return
        }
        guard let duration else { throw ValidationError("give --for DURATION (e.g. 30m), or --status") }
        guard let seconds = Self.seconds(duration) else {
            throw ValidationError("--for must be N followed by s, m, h or d (e.g. 30m), between 1 second and 7 days")
        }
        let token = try AgentControl.resolve(selection)
        var m = ControlProtocol.Message()
        m.set("token", token.id)
        m.set("seconds", String(seconds))
        m["pin"] = try pin.userPIN(token: token.label)
        defer { m["pin"] = nil }
        let r = try AgentControl.call(.unlock, m)
        Console.out("unlocked token \(r.string("label") ?? token.label) for \(duration) (keyshare lock ends it)")
    }
}

struct LockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock",
        abstract: "End `keyshare unlock` now: every application loses the token's key (its own C_Login stays).")
    @OptionGroup var selection: TokenSelection

    func run() throws {
        var m = ControlProtocol.Message()
        m.set("token", selection.token)
        let r = try AgentControl.call(.lock, m)
        let n = Int(r.string("count") ?? "0") ?? 0
        Console.out(n == 0 ? "nothing was unlocked" : "locked \(n) token\(n == 1 ? "" : "s")")
    }
}
