import ArgumentParser
import FoundationEssentials
import Glibc
import KeyshareAgent
import Keychain
import KeySharing
import KeyshareCrypto
import Tokens

/// `keyshare export`: the key-sharing fallback. The identity leaves only as a
/// PKCS #12 under the shared export password, which stays in the keychain.
struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export an identity as a PKCS #12 file under the shared export password.")

    @Argument(help: "The identity: a persistent reference, a label, or the SHA-256 of its certificate (its key-sharing label).",
              completion: StoreCompletion.items) var item: String
    @Option(name: .customLong("out"), help: "The PKCS #12 file to write (mode 0600; - for standard output).") var out: String
    @Option(help: "modern (PBES2/AES-256, SHA-256 MAC, chain) or legacy (3DES, SHA-1 MAC, for old consumers).")
    var profile: PKCS12.Profile = .modern
    @OptionGroup var selection: TokenSelection
    @OptionGroup var pin: PINOptions
    @Flag(help: "JSON output.") var json = false
    @OptionGroup var force: ForceOption

    /// The PKCS #12 is built inside the agent (docs/agent.md, "The CLI through
    /// the agent"): this process never holds the private key, only the
    /// finished file under the shared export password.
    func run() throws {
        try FileIO.checkOutput(out, force: force.force)
        let ctx = try Context.open()
        let token = try ctx.token(selection)
        var m = ControlProtocol.Message()
        m.set("token", token.tokenID.description)
        m.set("item", item)
        m.set("profile", profile.rawValue)
        m["pin"] = try pin.userPIN(token: token.label)
        let reply = try AgentControl.call(.export, m)
        m["pin"] = nil
        try FileIO.write(reply["result"] ?? [], out, force: force.force)
        let label = reply.string("label") ?? item
        if json {
            return try Console.json(["exported": [
                "file": out, "label": label, "profile": profile.rawValue, "certificate": reply.string("certificate") ?? "",
                "uri": PKCS11URI.object(token: token, label: label, id: reply["id"], type: "cert"),
            ]])
        }
        // With --out - the PKCS #12 is standard output: the report goes to stderr.
        (out == "-" ? Console.error : Console.out)("exported \(label) to \(out) (\(profile.rawValue) profile; `keyshare password` shows the password)")
    }
}

extension PKCS12.Profile: ExpressibleByArgument {}
