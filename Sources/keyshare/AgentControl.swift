#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Keychain
import KeyshareAgent

/// The CLI's client of the agent's control requests (docs/agent.md, "The CLI
/// through the agent"): private-key operations and unlock/lock run in the
/// agent, so this process never holds a decrypted private key. The agent is
/// started if needed (this very binary, `keyshare agent --daemonize`).
enum AgentControl {
    /// This executable, as the agent program (KEYSHARE_AGENT_PROGRAM, as the module reads it, wins).
    static var program: String {
        if let p = ProcessInfo.processInfo.environment["KEYSHARE_AGENT_PROGRAM"], !p.isEmpty { return p }
        return (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    /// The store this run names (KEYSHARE_HOME, XDG_DATA_HOME, HOME), sent so
    /// the agent opens the same one: absolute, since the agent's working
    /// directory is not this command's.
    static var home: String {
        let h = KeychainStore.defaultHome()
        return h.hasPrefix("/") ? h : FileManager.default.currentDirectoryPath + "/" + h
    }

    /// The variables this command reads secrets from (`env:VAR` arguments):
    /// an agent it starts does not inherit them.
    static var secretVariables: Set<String> {
        Set(CommandLine.arguments.compactMap { arg -> String? in
            guard let r = arg.range(of: "env:") else { return nil }
            let before = arg[..<r.lowerBound]
            guard before.isEmpty || before.hasSuffix("=") else { return nil }
            return String(arg[r.upperBound...])
        })
    }

    static func call(_ op: ControlProtocol.Op, _ fields: ControlProtocol.Message) throws -> ControlProtocol.Message {
        var m = fields
        if m["home"] == nil { m.set("home", home) }
        do {
            return try ControlProtocol.call(op, m, program: program, hiddenFromAgent: secretVariables)
        } catch let e as ControlProtocol.Failure {
            throw CLIError(e.description)
        }
    }

    /// The token a selection names (label, ID or the only one): its ID and label.
    static func resolve(_ selection: TokenSelection) throws -> (id: String, label: String) {
        var m = ControlProtocol.Message()
        m.set("token", selection.token)
        let r = try call(.resolveToken, m)
        return (r.string("token") ?? "", r.string("label") ?? "")
    }
}
