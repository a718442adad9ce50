import ArgumentParser
import FoundationEssentials
import Glibc
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
    @Option(help: "The label of the imported identity, key pair or certificate (default: that of the key pair already in the token, else the PKCS #12 friendlyName, the certificate's common name or email, made unique in the token; the SHA-256 hex for a bare key).")
    var label: String?
    @Option(help: "The CKA_ID (hex) of the imported identity, key pair or certificate (default: that of the key pair already in the token, else SHA-1 of the public key).")
    var id: String?
    @Flag(name: .customLong("with-chain"),
          help: "Make an identity's chain (CA) certificates token objects too; by default they stay in the keychain for trust and export, out of the token, so the token shows one certificate per identity.")
    var withChain = false
    @Flag(help: "JSON output: every item created or found, with its persistent reference and PKCS #11 URI.") var json = false

    func run() throws {
        guard !files.isEmpty else { throw ValidationError("give at least one file to import") }
        let options = ImportOptions(label: label, id: try id.map(HexID.parse), withChain: withChain)
        if let label, label.isEmpty { throw ValidationError("--label must not be empty") }
        if !options.isEmpty, files.count > 1 { throw ValidationError("--label and --id name one item: import one file with them") }
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
                for var row in try importOne(path, options: options, ctx: ctx, token: token, key: key, password: &password) {
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
                for note in r.skipped { Console.out("\(r.file): skipped \(note)") }
                Console.out("\(r.file): \(r.summary)")
            }
        }
        if failures > 0 { throw CLIExit(code: 1) }
    }

    private func importOne(_ path: String, options: ImportOptions, ctx: Context, token: TokenRecord, key: TokenKey,
                           password: inout String?) throws -> [ImportRow] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CLIError("cannot read the file")
        }
        let bytes = [UInt8](data)
        guard !bytes.isEmpty else { throw CLIError("the file is empty") }
        func row(_ r: ImportResult) -> ImportRow { ImportRow(file: path, result: r, token: token) }
        if ShareZip.looksLikeZip(bytes) {
            return try importZip(try ShareZip.entries(of: bytes), path: path, options: options, ctx: ctx, token: token, key: key,
                                 password: &password)
        }
        if let text = String(bytes: bytes, encoding: .utf8), PEMBundle.looksLikePEM(text) {
            return try importPEM(text, path: path, options: options, ctx: ctx, token: token, key: key, password: &password)
        }
        if let cert = try? Certificate(der: bytes) {
            return [row(try ctx.tokens.importCertificate(cert, options: options, into: token.tokenID, key: key))]
        }
        if let privateKey = try? PrivateKey(der: bytes) {
            try refuseTPM(token)
            return [row(try ctx.tokens.importPrivateKey(privateKey, options: options, into: token.tokenID, key: key))]
        }
        do {
            try refuseTPM(token)
            let pw = try workingPassword(bytes, password: &password)
            return [row(try ctx.tokens.importPKCS12(bytes, password: pw, options: options, into: token.tokenID, key: key))]
        } catch let e as CryptoError where e.kind == .notPKCS12 || e.kind == .corruptPKCS12 {
            // Not a PKCS #12: it may be a zip after all (spec §7), else the PKCS #12 error stands.
            guard let entries = try? ShareZip.entries(of: bytes), !entries.isEmpty else { throw e }
            return try importZip(entries, path: path, options: options, ctx: ctx, token: token, key: key, password: &password)
        }
    }

    /// Every entry of a zip in one store transaction: one failing entry (wrong
    /// password, not a PKCS #12) rolls back the others. Duplicates are not errors.
    private func importZip(_ entries: [(name: String, bytes: [UInt8])], path: String, options: ImportOptions, ctx: Context,
                           token: TokenRecord, key: TokenKey, password: inout String?) throws -> [ImportRow] {
        guard let first = entries.first else { throw CLIError("the zip archive holds no files") }
        try refuseTPM(token)
        guard options.isEmpty || entries.count == 1 else {
            throw CLIError("--label and --id name one identity, but the zip holds \(entries.count) files")
        }
        let pw: String
        do {
            pw = try workingPassword(first.bytes, password: &password)
        } catch {
            throw CLIError("\(first.name): \(ErrorText.describe(error)); nothing was imported")
        }
        return try ctx.store.transaction {
            try entries.map { entry in
                do {
                    let result = try ctx.tokens.importPKCS12(entry.bytes, password: pw, options: options, into: token.tokenID, key: key)
                    return ImportRow(file: "\(path): \(entry.name)", result: result, token: token)
                } catch {
                    throw CLIError("\(entry.name): \(ErrorText.describe(error)); nothing was imported")
                }
            }
        }
    }

    /// A TPM token's private keys live in its TPM (docs/tpm.md): this command
    /// would keep the key in the store, so it sends the caller to `key import --tpm`.
    private func refuseTPM(_ token: TokenRecord) throws {
        guard TPMToken.isTPM(token.tokenID) else { return }
        throw CLIError("token \(token.label) is a TPM token: bring private keys into its TPM with keyshare key import --tpm "
            + "(keyshare import would keep the key in the store); certificates import as usual")
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

    /// Every block of a PEM file in one transaction: keys with their
    /// certificates as identities, the other certificates on their own; an
    /// encrypted key takes the password source (or a prompt). A block that
    /// cannot be imported refuses the whole file, naming the block and why.
    private func importPEM(_ text: String, path: String, options: ImportOptions, ctx: Context, token: TokenRecord, key: TokenKey,
                           password: inout String?) throws -> [ImportRow] {
        let bundle: PEMBundle
        do {
            bundle = try PEMBundle.parse(text) {
                if password == nil {
                    let secret = try Secrets.obtain(passwordSource, prompt: "Password of the encrypted private key: ",
                                                    what: "private key password")
                    password = String(decoding: secret, as: UTF8.self)
                }
                return Array((password ?? "").utf8)
            }
        } catch let e as CryptoError {
            throw CLIError(e.description + "; nothing was imported")
        }
        guard !bundle.privateKeys.isEmpty || !bundle.certificates.isEmpty else {
            throw CLIError("no certificate or private key in the PEM file" + (bundle.skipped.isEmpty ? "" : " (only \(bundle.skipped.joined(separator: "; ")))"))
        }
        if !bundle.privateKeys.isEmpty { try refuseTPM(token) }
        let results = try ctx.tokens.importBundle(privateKeys: bundle.privateKeys, certificates: bundle.certificates,
                                                  options: options, into: token.tokenID, key: key)
        var rows = results.map { ImportRow(file: path, result: $0, token: token) }
        if !rows.isEmpty { rows[0].skipped = bundle.skipped }
        return rows
    }
}

/// `--id` values: hex digits, optionally with colons or a 0x prefix ("01", "0xA1B2", "a1:b2").
enum HexID {
    static func parse(_ s: String) throws -> [UInt8] {
        var digits = s.lowercased().replacing(":", with: "")
        if digits.hasPrefix("0x") { digits.removeFirst(2) }
        guard !digits.isEmpty, digits.count % 2 == 0, digits.count <= 510,
              digits.allSatisfy({ $0.isHexDigit }) else {
            throw ValidationError("--id must be an even number of hex digits (for example 01 or A1B2), at most 255 bytes")
        }
        var out: [UInt8] = []
        var i = digits.startIndex
        while i < digits.endIndex {
            let j = digits.index(i, offsetBy: 2)
            out.append(UInt8(digits[i..<j], radix: 16)!)
            i = j
        }
        return out
    }
}

struct ImportRow: Encodable {
    var file: String
    var tokenID: String
    var label: String
    var id: String
    var duplicate: Bool
    var certificate: String?
    var privateKey: String?
    var publicKey: String?
    var chain: [String]
    /// Every object of this identity / key pair / certificate: created or already there.
    var items: [ImportedItemRow]
    /// The imported identity's trust result (reported; an untrusted chain does not fail the import).
    var trust: String?
    /// PEM blocks read but deliberately not imported (text output only).
    var skipped: [String] = []

    enum CodingKeys: String, CodingKey { case file, tokenID, label, id, duplicate, certificate, privateKey, publicKey, chain, items, trust }

    init(file: String, result: ImportResult, token: TokenRecord) {
        self.file = file
        tokenID = token.tokenID.description
        label = result.label
        id = Hex.upper(result.id)
        duplicate = result.duplicate
        certificate = result.certificate?.base64url
        privateKey = result.privateKey?.base64url
        publicKey = result.publicKey?.base64url
        chain = result.chain.map(\.base64url)
        items = result.items.map { ImportedItemRow($0, token: token) }
    }

    /// One line naming every object: what was created by its reference, what
    /// was already there by its stored label and reference (as `list` shows them).
    var summary: String {
        let created = items.filter(\.created), existing = items.filter { !$0.created }
        let already = existing.map { "\($0.what) \"\($0.label)\" (\($0.reference))" }.joined(separator: ", ")
        if created.isEmpty { return "already in the keychain: " + already }
        let kind: String
        if items.contains(where: { $0.role == ImportedItem.Role.certificate.rawValue }),
           items.contains(where: { $0.role == ImportedItem.Role.privateKey.rawValue }) {
            kind = "identity"
        } else if items.contains(where: { $0.role == ImportedItem.Role.privateKey.rawValue }) {
            kind = "key pair"
        } else {
            kind = "certificate"
        }
        return "imported \(kind) \"\(label)\" (CKA_ID \(id)): " + created.map { "\($0.what) \($0.reference)" + ($0.keptApart ? " (kept out of the token)" : "") }.joined(separator: ", ")
            + (existing.isEmpty ? "" : "; already there: " + already)
            + (trust.map { "; trust: \($0)" } ?? "")
    }
}

struct ImportedItemRow: Encodable {
    var role: String
    var label: String
    var id: String
    var reference: String
    /// "-" for a chain certificate kept out of the token: no PKCS #11 object to name.
    var uri: String
    var created: Bool
    var keptApart: Bool

    init(_ i: ImportedItem, token: TokenRecord) {
        role = i.role.rawValue
        label = i.label
        id = Hex.upper(i.id)
        reference = i.reference.base64url
        created = i.created
        keptApart = i.keptApart
        let cls: ItemClass = switch i.role {
        case .certificate, .chainCertificate: .certificate
        case .privateKey: .privateKey
        case .publicKey: .publicKey
        }
        uri = i.keptApart ? "-" : PKCS11URI.object(token: token, label: i.label.isEmpty ? nil : i.label, id: i.id, type: PKCS11URI.typeName(cls))
    }

    var what: String {
        switch role {
        case ImportedItem.Role.chainCertificate.rawValue: "chain certificate"
        case ImportedItem.Role.privateKey.rawValue: "private key"
        case ImportedItem.Role.publicKey.rawValue: "public key"
        default: "certificate"
        }
    }
}
