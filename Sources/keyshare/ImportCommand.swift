import ArgumentParser
import Foundation
import Keychain
import KeySharing
import KeyshareCrypto
import Tokens

/// `keyshare import`: PKCS #12 identities (the SecPKCS12Import analog),
/// certificates and PKCS #8 keys, and the consumer side of key sharing: a
/// shared PKCS #12 or zip whose password may come from the password service.
/// Each file is one transaction (a zip's entries too): a failure leaves the
/// store exactly as it was.
struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import PKCS #12 identities, certificates (PEM/DER) and PKCS #8 keys into a token.")

    @Argument(help: "Files to import.") var files: [String]
    @OptionGroup var selection: TokenSelection
    @OptionGroup var pin: PINOptions
    @Option(name: .customLong("password-source"), help: "Where the PKCS #12 password comes from (env:VAR or file:PATH); prompted if needed.")
    var passwordSource: SecretSource?
    @Flag(name: .customLong("password-from-service"),
          help: "Fetch the shared password from a running `keyshare serve` (socket: --socket).")
    var passwordFromService = false
    @Option(help: "The password service's socket (default $XDG_RUNTIME_DIR/keyshare/password.sock).")
    var socket: String?
    @Flag(help: "JSON output.") var json = false

    func run() throws {
        guard !files.isEmpty else { throw ValidationError("give at least one file to import") }
        let ctx = try Context.open()
        let token = try ctx.token(selection)
        let key = try ctx.unlock(token, pin)
        var password: String?
        var results: [ImportRow] = []
        var failures = 0
        for (index, path) in files.enumerated() {
            Console.progress("importing \(index + 1)/\(files.count): \(path)")
            do {
                // A zip gives one row per entry; trust is evaluated after its transaction committed.
                for var row in try importOne(path, ctx: ctx, token: token, key: key, password: &password) {
                    row.trust = ImportTrust.summary(certificate: row.certificate.flatMap { PersistentReference(base64url: $0) },
                                                    privateKey: row.privateKey.flatMap { PersistentReference(base64url: $0) })
                    results.append(row)
                }
            } catch {
                Console.endProgress()
                Console.error("\(path): \(ErrorText.describe(error))")
                failures += 1
            }
        }
        Console.endProgress()
        if json {
            try Console.json(results)
        } else {
            for r in results {
                Console.out("\(r.file): \(r.summary)")
            }
        }
        if failures > 0 { throw CLIExit(code: 1) }
    }

    private func importOne(_ path: String, ctx: Context, token: TokenRecord, key: TokenKey, password: inout String?) throws -> [ImportRow] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CLIError("cannot read the file")
        }
        let bytes = [UInt8](data)
        guard !bytes.isEmpty else { throw CLIError("the file is empty") }
        if ShareZip.looksLikeZip(bytes) {
            return try importZip(try ShareZip.entries(of: bytes), path: path, ctx: ctx, token: token, key: key, password: &password)
        }
        if let text = String(bytes: bytes, encoding: .utf8), text.contains("-----BEGIN ") {
            return [ImportRow(file: path, result: try importPEM(text, ctx: ctx, token: token, key: key))]
        }
        if let cert = try? Certificate(der: bytes) {
            return [ImportRow(file: path, result: try ctx.tokens.importCertificate(cert, into: token.tokenID, key: key))]
        }
        if let privateKey = try? PrivateKey(der: bytes) {
            return [ImportRow(file: path, result: try ctx.tokens.importPrivateKey(privateKey, label: nil, into: token.tokenID, key: key))]
        }
        do {
            let pw = try workingPassword(bytes, password: &password)
            return [ImportRow(file: path, result: try ctx.tokens.importPKCS12(bytes, password: pw, into: token.tokenID, key: key))]
        } catch let e as CryptoError where e.kind == .notPKCS12 || e.kind == .corruptPKCS12 {
            // Not a PKCS #12: it may be a zip after all (spec §7), else the PKCS #12 error stands.
            guard let entries = try? ShareZip.entries(of: bytes), !entries.isEmpty else { throw e }
            return try importZip(entries, path: path, ctx: ctx, token: token, key: key, password: &password)
        }
    }

    /// Every entry of a zip in one store transaction: one failing entry (wrong
    /// password, not a PKCS #12) rolls back the others. Duplicates are not errors.
    private func importZip(_ entries: [(name: String, bytes: [UInt8])], path: String, ctx: Context, token: TokenRecord,
                           key: TokenKey, password: inout String?) throws -> [ImportRow] {
        guard let first = entries.first else { throw CLIError("the zip archive holds no files") }
        let pw: String
        do {
            pw = try workingPassword(first.bytes, password: &password)
        } catch {
            throw CLIError("\(first.name): \(ErrorText.describe(error)); nothing was imported")
        }
        return try ctx.store.transaction {
            try entries.map { entry in
                do {
                    let result = try ctx.tokens.importPKCS12(entry.bytes, password: pw, into: token.tokenID, key: key)
                    return ImportRow(file: "\(path): \(entry.name)", result: result)
                } catch {
                    throw CLIError("\(entry.name): \(ErrorText.describe(error)); nothing was imported")
                }
            }
        }
    }

    /// The password that opens this PKCS #12: the empty one if it does (no
    /// prompt needed), else the shared one from the service, the source or a prompt.
    private func workingPassword(_ bytes: [UInt8], password: inout String?) throws -> String {
        do {
            _ = try PKCS12.parse(bytes, password: "")
            return ""
        } catch let e as CryptoError where e.kind == .wrongPassword {
            // needs a password: use the one given or fetch/ask below
        }
        if password == nil {
            if passwordFromService {
                password = try PasswordClient.fetchPassword(socketPath: socket ?? PasswordSocket.defaultPath())
            } else {
                let secret = try Secrets.obtain(passwordSource, prompt: "PKCS #12 password: ", what: "PKCS #12 password")
                password = String(decoding: secret, as: UTF8.self)
            }
        }
        let pw = password ?? ""
        _ = try PKCS12.parse(bytes, password: pw)
        return pw
    }

    private func importPEM(_ text: String, ctx: Context, token: TokenRecord, key: TokenKey) throws -> ImportResult {
        if text.contains("PRIVATE KEY-----") {
            let pkey = try PrivateKey(pem: text)
            return try ctx.tokens.importPrivateKey(pkey, label: nil, into: token.tokenID, key: key)
        }
        let certs = try Certificate.parseAll(pem: text)
        guard !certs.isEmpty else { throw CLIError("no certificate or key found in the PEM file") }
        // A bundle: the first certificate is the one reported; all are imported.
        var first: ImportResult?
        for cert in certs {
            let r = try ctx.tokens.importCertificate(cert, into: token.tokenID, key: key)
            if first == nil { first = r }
        }
        return first!
    }
}

struct ImportRow: Encodable {
    var file: String
    var label: String
    var duplicate: Bool
    var certificate: String?
    var privateKey: String?
    var publicKey: String?
    var chain: [String]
    /// The imported identity's trust result (reported; an untrusted chain does not fail the import).
    var trust: String?

    init(file: String, result: ImportResult) {
        self.file = file
        label = result.label
        duplicate = result.duplicate
        certificate = result.certificate?.base64url
        privateKey = result.privateKey?.base64url
        publicKey = result.publicKey?.base64url
        chain = result.chain.map(\.base64url)
    }

    var summary: String {
        if duplicate { return "already in the keychain: \(label)" }
        var what: [String] = []
        if certificate != nil && privateKey != nil { what.append("identity") } else if certificate != nil { what.append("certificate") } else if privateKey != nil { what.append("key pair") }
        if !chain.isEmpty { what.append("\(chain.count) chain certificate\(chain.count == 1 ? "" : "s")") }
        return "imported \(what.joined(separator: " + ")) \(label)" + (trust.map { "; trust: \($0)" } ?? "")
    }
}
