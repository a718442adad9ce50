import ArgumentParser
import Foundation
import Keychain
import KeyshareCrypto
import Tokens

/// `keyshare import`: PKCS #12 identities (the SecPKCS12Import analog),
/// certificates and PKCS #8 keys. Each file is one transaction: a failure
/// leaves the store exactly as it was.
struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import PKCS #12 identities, certificates (PEM/DER) and PKCS #8 keys into a token.")

    @Argument(help: "Files to import.") var files: [String]
    @OptionGroup var selection: TokenSelection
    @OptionGroup var pin: PINOptions
    @Option(name: .customLong("password-source"), help: "Where the PKCS #12 password comes from (env:VAR or file:PATH); prompted if needed.")
    var passwordSource: SecretSource?
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
                let result = try importOne(path, ctx: ctx, token: token, key: key, password: &password)
                results.append(ImportRow(file: path, result: result))
                results[results.count - 1].trust = ImportTrust.summary(certificate: result.certificate, privateKey: result.privateKey)
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

    private func importOne(_ path: String, ctx: Context, token: TokenRecord, key: TokenKey, password: inout String?) throws -> ImportResult {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CLIError("cannot read the file")
        }
        let bytes = [UInt8](data)
        guard !bytes.isEmpty else { throw CLIError("the file is empty") }
        if let text = String(bytes: bytes, encoding: .utf8), text.contains("-----BEGIN ") {
            return try importPEM(text, ctx: ctx, token: token, key: key)
        }
        if let cert = try? Certificate(der: bytes) {
            return try ctx.tokens.importCertificate(cert, into: token.tokenID, key: key)
        }
        if let privateKey = try? PrivateKey(der: bytes) {
            return try ctx.tokens.importPrivateKey(privateKey, label: nil, into: token.tokenID, key: key)
        }
        return try importPKCS12(bytes, ctx: ctx, token: token, key: key, password: &password)
    }

    /// Tries the empty password first (a file made without one needs no prompt),
    /// then the given source, then asks.
    private func importPKCS12(_ bytes: [UInt8], ctx: Context, token: TokenRecord, key: TokenKey, password: inout String?) throws -> ImportResult {
        do {
            return try ctx.tokens.importPKCS12(bytes, password: "", into: token.tokenID, key: key)
        } catch let e as CryptoError where e.kind == .wrongPassword {
            // needs a password: use the one given or ask below
        }
        if password == nil {
            let secret = try Secrets.obtain(passwordSource, prompt: "PKCS #12 password: ", what: "PKCS #12 password")
            password = String(decoding: secret, as: UTF8.self)
        }
        return try ctx.tokens.importPKCS12(bytes, password: password ?? "", into: token.tokenID, key: key)
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
