import ArgumentParser
import Foundation
import Keychain
import KeyShare
import KeySharing
import Tokens

/// `keyshare csr`: a PKCS #10 request for a key pair already in a token, the
/// middle step of enrolment (key generate -> csr -> CA -> import). OpenSSL
/// assembles the request (KeyshareCrypto.CertificateRequest); the token's key
/// signs it through the KeyShare signing API (KeyRef.createSignature), the
/// same path as `keyshare key sign`: the key is never exported or written.
struct CSRCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "csr",
        abstract: "Make a PKCS #10 certificate request signed by a key in the token.",
        discussion: """
            Name the key with --tag (as `keyshare key generate` made it), --key (a persistent reference or label, \
            as `keyshare list --private` shows) or --id (its CKA_ID in hex, as given to pkcs11-tool --id). \
            The signature is SHA-256 with RSA, ECDSA with SHA-256/384/512 (P-256/384/521) or Ed25519. \
            --san takes email:, dns:, uri:, ip: and upn: (the Microsoft UPN otherName 1.3.6.1.4.1.311.20.2.3, a UTF8String).
            """)

    @Option(help: "The key's application tag.") var tag: String?
    @Option(help: "The private key's persistent reference or label.") var key: String?
    @Option(help: "The private key's CKA_ID in hex.") var id: String?
    @Option(help: "The subject, as openssl req -subj writes it: /CN=Alice/O=Example (\\ escapes a /).") var subject: String
    @Option(name: .customLong("san"), help: "A subject alternative name, TYPE:VALUE (repeatable): email, dns, uri, ip, upn.")
    var altNames: [String] = []
    @Option(name: .customLong("out"), help: "Where to write the request (PEM, 0644); default: standard output.") var out: String?
    @Flag(help: "Write DER instead of PEM.") var der = false
    @OptionGroup var selection: TokenSelection
    @OptionGroup var groups: AccessGroupOptions
    @OptionGroup var pin: PINOptions
    @Flag(help: "JSON output: the request (PEM when no --out), its subject, and the signing key's reference and URI.") var json = false

    func validate() throws {
        guard [tag, key, id].compactMap({ $0 }).count == 1 else {
            throw ValidationError("name the key with exactly one of --tag, --key or --id")
        }
        if der, out == nil || out == "-", json { throw ValidationError("--der with --json needs --out") }
    }

    func run() throws {
        let names: [(String, String)]
        let sans: [CertificateRequest.AltName]
        do {
            names = try CertificateRequest.parseSubject(subject)
            sans = try altNames.map(CertificateRequest.AltName.init(argument:))
        } catch let e as CryptoError {
            throw ValidationError(e.description)
        }
        let session = try SessionFactory.open(groups)
        let ctx = try Context.open()
        let token = try ctx.token(selection)
        try SessionFactory.unlock(session, selection, pin)
        let signer = try signingKey(session, token: token)
        guard signer.attributes.usage.contains(.sign) else {
            throw CLIError("the key \(signer.attributes.label ?? "") may not sign (CKA_SIGN is false)")
        }
        // KeyRef signs in the PKCS #11 form (ECDSA as r||s), which CertificateRequest converts.
        let request = try CertificateRequest.build(subject: names, altNames: sans, publicKey: signer.publicKey) { tbs, algorithm in
            try signer.createSignature(tbs, algorithm: algorithm)
        }
        let pem = try CertificateRequest.pem(request)
        let bytes = der ? request : Array(pem.utf8)
        if let out, out != "-" {
            try SecureFile.write(bytes, to: out, mode: 0o644)
        } else if !json {
            FileHandle.standardOutput.write(Data(bytes))
        }
        let a = signer.attributes
        let uri = PKCS11URI.object(token: token, label: a.label, id: a.pkcs11[CKA.id], type: "private")
        if json {
            struct Row: Encodable {
                var file: String?, pem: String?, subject: String, subjectAltNames: [String], sha256: String
                var key: KeyRow
                var uri: String
            }
            try Console.json(["request": Row(
                file: out, pem: out == nil ? pem : nil, subject: subject, subjectAltNames: altNames,
                sha256: Hex.upper(DigestAlgorithm.sha256.hash(request)), key: KeyRow(a, token: token), uri: uri)])
        } else if let out, out != "-" {
            Console.out("wrote a certificate request for \(subject) to \(out), signed by \(a.label.map { "\"\($0)\" " } ?? "")(\(a.persistentReference.base64url))")
        }
    }

    /// The private key the options name, in the selected token.
    private func signingKey(_ session: KeychainSession, token: TokenRecord) throws -> KeyRef {
        let t = token.tokenID
        do {
            if let tag {
                return try session.key(tag: Array(tag.utf8), itemClass: .privateKey, token: t)
            }
            if let key, let ref = PersistentReference(base64url: key), let k = try? session.keyRef(ref), k.isPrivate {
                return k
            }
            let all = try session.copyMatching(Query(itemClass: .privateKey, tokenID: t, returning: [.reference, .attributes]))
            let wanted = try id.map(HexID.parse)
            let hit = all.first { r in
                guard let a = r.attributes else { return false }
                if let wanted { return a.pkcs11[CKA.id] == wanted }
                return a.label == key
            }
            guard case .key(let k)? = hit?.reference else { throw KeyShareError.itemNotFound }
            return k
        } catch KeyShareError.itemNotFound {
            let name = tag.map { "tag \($0)" } ?? key.map { "reference or label \($0)" } ?? "CKA_ID \(id ?? "")"
            throw CLIError("no private key with \(name) in token \(token.label)")
        }
    }
}
