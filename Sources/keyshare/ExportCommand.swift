import ArgumentParser
import Foundation
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

    @Argument(help: "The identity: a persistent reference or a label.") var item: String
    @Option(name: .customLong("out"), help: "The PKCS #12 file to write (mode 0600; - for standard output).") var out: String
    @Option(help: "modern (PBES2/AES-256, SHA-256 MAC, chain) or legacy (3DES, SHA-1 MAC, for old consumers).")
    var profile: PKCS12.Profile = .modern
    @OptionGroup var selection: TokenSelection
    @OptionGroup var pin: PINOptions
    @Flag(help: "JSON output.") var json = false
    @OptionGroup var force: ForceOption

    func run() throws {
        try FileIO.checkOutput(out, force: force.force)
        let ctx = try Context.open()
        let token = try ctx.token(selection)
        let key = try ctx.unlock(token, pin)
        let identity = try findIdentity(ctx: ctx, token: token, key: key)
        // One transaction: a failed export (non-exportable key, unwritable
        // --out) leaves no shared password behind that it would have created.
        // The file is written last inside it; if the commit itself then fails,
        // the new file goes too (its password would not exist).
        var wrote = false
        do {
            try ctx.store.transaction {
                let password = try SharedPassword.obtain(store: ctx.store, token: token.tokenID, key: key)
                let bytes = try IdentityExport.pkcs12(of: identity, store: ctx.store, key: key, password: password, profile: profile)
                try FileIO.write(bytes, out, force: force.force)
                wrote = true
            }
        } catch {
            if wrote && out != "-" { unlink(out) }
            throw error
        }
        if json {
            return try Console.json(["exported": [
                "file": out, "label": identity.label, "profile": profile.rawValue, "certificate": identity.certificateReference.base64url,
                "uri": PKCS11URI.object(token: token, label: identity.label, id: identity.id, type: "cert"),
            ]])
        }
        // With --out - the PKCS #12 is standard output: the report goes to stderr.
        (out == "-" ? Console.error : Console.out)("exported \(identity.label) to \(out) (\(profile.rawValue) profile; `keyshare password` shows the password)")
    }

    private func findIdentity(ctx: Context, token: TokenRecord, key: TokenKey) throws -> Identity {
        let identities = try ctx.tokens.identities(in: token.tokenID, key: key)
        if let ref = PersistentReference(base64url: item),
           let found = identities.first(where: { $0.certificateReference == ref || $0.privateKeyReference == ref }) {
            return found
        }
        if let found = identities.first(where: { $0.label == item }) { return found }
        throw CLIError("no identity (certificate with its private key) named \(item) in token \(token.label)")
    }
}

extension PKCS12.Profile: ExpressibleByArgument {}
