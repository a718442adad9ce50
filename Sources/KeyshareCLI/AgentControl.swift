#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
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

    static func call(_ op: ControlProtocol.Op, _ fields: ControlProtocol.Message) throws -> ControlProtocol.Message {
        // No store path is sent: the agent serves the store it was started
        // for, and this command reaches that agent through the socket its
        // environment names (docs/agent.md, "Which agent, which store").
        do {
            return try ControlProtocol.call(op, fields, program: program)
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
