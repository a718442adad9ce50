import ArgumentParser
import FoundationEssentials
import Glibc
import Keychain
import KeyshareCrypto
import Tokens

extension KeyCommand {
    /// `keyshare key import --tpm`: an existing private key (PKCS #12, PEM or
    /// DER PKCS #8, as `keyshare import` reads them) brought INTO a TPM token
    /// by TPM2_Import (docs/tpm.md, "Imported keys"). The TPM re-wraps it
    /// under its storage root key; the store keeps only that TPM blob and the
    /// public parts, never the key itself. The object says where it came
    /// from: CKA_LOCAL, CKA_ALWAYS_SENSITIVE and CKA_NEVER_EXTRACTABLE false
    /// (it existed outside the TPM), CKA_EXTRACTABLE false (it cannot leave
    /// the TPM again). The file's certificate, if any, joins the key.
    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Import a private key (PKCS #12, PEM or DER PKCS #8) into a TPM token (TPM2_Import).")

        @Argument(help: "The file holding the private key (and optionally its certificate).") var file: String
        @Flag(help: "Import into the TPM (required: the token must be a TPM token).") var tpm = false
        @OptionGroup var selection: TokenSelection
        @OptionGroup var pin: PINOptions
        @Option(name: .customLong("password-source"), help: "The PKCS #12 or encrypted-PEM password (env:VAR or file:PATH); prompted if needed.")
        var passwordSource: SecretSource?
        @Option(help: "The label of the key pair (default: the PKCS #12 friendly name, else the SHA-256 hex of the public key).")
        var label: String?
        @Option(help: "The CKA_ID (hex) of the key pair (default: SHA-1 of the public key).") var id: String?
        @Flag(help: "JSON output: the objects created, with their persistent references.") var json = false

        func run() throws {
            guard tpm else {
                throw ValidationError("key import brings a key into a TPM token: give --tpm (for soft tokens: keyshare import)")
            }
            if let label, label.isEmpty { throw ValidationError("--label must not be empty") }
            let cka = try id.map(HexID.parse)
            guard let data = FileManager.default.contents(atPath: file), !data.isEmpty else {
                throw CLIError("\(file): cannot read the file, or it is empty")
            }
            let ctx = try Context.open(syncDrivers: false)
            let token = try ctx.token(selection)
            guard TPMToken.isTPM(token.tokenID) else {
                throw CLIError("token \(token.label) is not a TPM token (keyshare token create --tpm); for soft tokens use keyshare import")
            }
            let (privateKey, certificate, friendlyName) = try read([UInt8](data))
            let key = try ctx.unlock(token, pin)
            let result: ImportResult
            do {
                // One transaction: a certificate that cannot be stored takes the key back out.
                result = try ctx.store.transaction {
                    let pair = try ctx.tokens.importIntoTPM(privateKey, label: label ?? friendlyName, id: cka, into: token.tokenID, key: key)
                    let cert = try certificate.map {
                        try ctx.tokens.importCertificate($0, options: ImportOptions(label: pair.label, id: pair.id), into: token.tokenID, key: key)
                    }
                    return ImportResult(label: pair.label, id: pair.id, items: pair.items + (cert?.items ?? []))
                }
            } catch let e as TokensError {
                throw CLIError("\(file): \(e)")
            } catch let e as ImportError {
                throw CLIError("\(file): \(e)")
            }
            if json {
                var out: [String: String] = ["label": result.label, "duplicate": result.duplicate ? "true" : "false"]
                out["privateKey"] = result.privateKey?.base64url
                out["publicKey"] = result.publicKey?.base64url
                out["certificate"] = result.certificate?.base64url
                try Console.json(out)
            } else if result.duplicate {
                // What `keyshare import` says for a soft token: nothing written, the objects named.
                Console.out("already in the TPM of token \(token.label): " + result.items.map {
                    "\($0.role == .privateKey ? "private key" : $0.role == .publicKey ? "public key" : "certificate") \"\($0.label)\" (\($0.reference.base64url))"
                }.joined(separator: ", "))
            } else {
                Console.out("imported \(privateKey.keyType) key \(result.label) into the TPM of token \(token.label): "
                    + "private \(result.privateKey?.base64url ?? "-"), public \(result.publicKey?.base64url ?? "-")"
                    + (result.certificate.map { ", certificate \($0.base64url)" } ?? ""))
            }
        }

        /// The one private key of the file, its certificate (if the file has one that matches) and a name for it.
        private func read(_ bytes: [UInt8]) throws -> (PrivateKey, Certificate?, String?) {
            func password(_ what: String) throws -> String {
                String(decoding: try Secrets.obtain(passwordSource, prompt: "Password of the \(what): ", what: "\(what) password"), as: UTF8.self)
            }
            if let text = String(bytes: bytes, encoding: .utf8), PEMBundle.looksLikePEM(text) {
                let bundle: PEMBundle
                do {
                    bundle = try PEMBundle.parse(text) { Array(try password("encrypted private key").utf8) }
                } catch let e as CryptoError {
                    throw CLIError("\(file): \(e.description)")
                }
                guard bundle.privateKeys.count == 1, let k = bundle.privateKeys.first else {
                    throw CLIError("\(file): the PEM file holds \(bundle.privateKeys.count) private keys; key import takes exactly one")
                }
                return (k, bundle.certificates.first { k.matches($0.publicKey) }, nil)
            }
            if let k = try? PrivateKey(der: bytes) { return (k, nil, nil) }
            var contents: PKCS12.Contents
            do {
                contents = try PKCS12.parse(bytes, password: "")
            } catch let e as CryptoError where e.kind == .wrongPassword {
                do {
                    contents = try PKCS12.parse(bytes, password: try password("PKCS #12"))
                } catch let e as CryptoError {
                    throw CLIError("\(file): \(e.description)")
                }
            } catch let e as CryptoError {
                throw CLIError("\(file): \(e.kind == .notPKCS12 ? "neither PEM, PKCS #8 nor PKCS #12" : e.description)")
            }
            guard let k = contents.privateKey else { throw CLIError("\(file): the PKCS #12 holds no private key") }
            let cert = contents.certificate.flatMap { k.matches($0.publicKey) ? $0 : nil }
            return (k, cert, contents.friendlyName.flatMap { $0.isEmpty ? nil : $0 })
        }
    }
}
