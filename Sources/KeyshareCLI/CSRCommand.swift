import ArgumentParser
import FoundationEssentials
import Glibc
import Keychain
import KeyShare
import KeySharing
import KeyshareAgent
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
            The signature is SHA-256 with RSA, ECDSA with SHA-256/384/512 (P-256/384/521), Ed25519, or pure ML-DSA / SLH-DSA \
            (id-ml-dsa-65 and so on: OpenSSL 3.5); an ML-KEM key cannot sign a request. \
            --san takes email:, dns:, uri:, ip: and upn: (the Microsoft UPN otherName 1.3.6.1.4.1.311.20.2.3, a UTF8String).
            """)

    @Option(help: "The key's application tag.") var tag: String?
    @Option(help: "The private key's persistent reference or label.", completion: StoreCompletion.items) var key: String?
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
        let idBytes = try id.map(HexID.parse)
        let ctx = try Context.open()
        let token = try ctx.token(selection)
        // Signed in the agent (docs/agent.md, "The CLI through the agent"): this process never holds the key.
        var m = ControlProtocol.Message()
        m.set("token", token.tokenID.description)
        m.set("groups", groups.groups?.joined(separator: ","))
        m.set("tag", tag)
        m.set("key", key)
        m["id"] = idBytes
        m.set("idText", id)
        m.set("subject", subject)
        m.set("sans", altNames.isEmpty ? nil : altNames.joined(separator: "\n"))
        m["pin"] = try pin.userPIN(token: token.label)
        let reply = try AgentControl.call(.csr, m)
        m["pin"] = nil
        let request = reply["result"] ?? []
        _ = (names, sans)  // validated above, before the PIN; the agent parses them again
        let pem = try CertificateRequest.pem(request)
        let bytes = der ? request : Array(pem.utf8)
        if let out, out != "-" {
            try SecureFile.write(bytes, to: out, mode: 0o644)
        } else if !json {
            StandardStream.write(bytes)
        }
        let row = KeyRow(agent: reply, token: token)
        let uri = row.uri
        if json {
            struct Row: Encodable {
                var file: String?, pem: String?, subject: String, subjectAltNames: [String], sha256: String
                var key: KeyRow
                var uri: String
            }
            try Console.json(["request": Row(
                file: out, pem: out == nil ? pem : nil, subject: subject, subjectAltNames: altNames,
                sha256: Hex.upper(DigestAlgorithm.sha256.hash(request)), key: row, uri: uri)])
        } else if let out, out != "-" {
            Console.out("wrote a certificate request for \(subject) to \(out), signed by \(row.label.isEmpty ? "" : "\"\(row.label)\" ")(\(row.reference))")
        }
    }
}

extension KeyRow {
    /// A key as the agent describes it (ControlServer.describe: public
    /// attributes; the CLI cannot read a private item), fields under `prefix`.
    init(agent m: ControlProtocol.Message, prefix: String = "", token: TokenRecord) {
        func text(_ k: String) -> String? { m.string(prefix + k) }
        itemClass = text("class") ?? "private-key"
        label = text("label") ?? ""
        tag = m[prefix + "tag"].map { String(decoding: $0, as: UTF8.self) } ?? ""
        keyType = text("keyType") ?? ""
        accessGroup = text("accessGroup") ?? ""
        reference = text("reference") ?? ""
        tokenID = token.tokenID.description
        tokenLabel = token.label
        id = Hex.upper(m[prefix + "id"] ?? [])
        uri = PKCS11URI.object(token: token, label: text("label"), id: m[prefix + "id"],
                               type: itemClass == "private-key" ? "private" : "public")
        securityCategory = Self.postQuantumCategory(named: keyType)
        bits = securityCategory == nil ? Int(text("bits") ?? "") ?? 0 : nil
        usage = (text("usage") ?? "").split(separator: ",").map(String.init)
    }

    /// The security category of a post-quantum type by its name ("ML-KEM-768"), as the agent sends it.
    static func postQuantumCategory(named name: String) -> Int? {
        let all: [KeyType] = MLDSAParameterSet.allCases.map { .mlDSA($0) } + MLKEMParameterSet.allCases.map { .mlKEM($0) }
            + SLHDSAParameterSet.allCases.map { .slhDSA($0) }
        return all.first { $0.description == name }?.securityCategory
    }
}
