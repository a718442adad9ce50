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
    @Option(name: .customLong("out"), help: "The PKCS #12 file to write (mode 0600).") var out: String
    @Option(help: "modern (PBES2/AES-256, SHA-256 MAC, chain) or legacy (3DES, SHA-1 MAC, for old consumers).")
    var profile: PKCS12.Profile = .modern
    @OptionGroup var selection: TokenSelection
    @OptionGroup var pin: PINOptions

    func run() throws {
        let ctx = try Context.open()
        let token = try ctx.token(selection)
        let key = try ctx.unlock(token, pin)
        let identity = try findIdentity(ctx: ctx, token: token, key: key)
        let password = try SharedPassword.obtain(store: ctx.store, token: token.tokenID, key: key)
        let bytes = try IdentityExport.pkcs12(of: identity, store: ctx.store, key: key, password: password, profile: profile)
        try AtomicFile.write(bytes, to: out, mode: 0o600)
        Console.out("exported \(identity.label) to \(out) (\(profile.rawValue) profile; `keyshare password` shows the password)")
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

/// Writes a file so that readers see the old file or the whole new one, never
/// a half-written one, and never with looser permissions than `mode`.
enum AtomicFile {
    static func write(_ bytes: [UInt8], to path: String, mode: mode_t) throws {
        let dir = (path as NSString).deletingLastPathComponent
        let tmp = (dir.isEmpty ? "." : dir) + "/.keyshare-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).tmp"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw CLIError("cannot write \(path): \(String(cString: strerror(errno)))") }
        var ok = fchmod(fd, mode) == 0
        var offset = 0
        while ok && offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n <= 0 { ok = false } else { offset += n }
        }
        ok = ok && fsync(fd) == 0
        close(fd)
        guard ok, rename(tmp, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(tmp)
            throw CLIError("cannot write \(path): \(reason)")
        }
    }
}
