import ArgumentParser
import FoundationEssentials
import Glibc
import KeyShare
import KeyshareAgent
import KeyshareCrypto
import Keychain

/// `keyshare key generate --type`: the classical kinds and every post-quantum type by its FIPS
/// name in lower case (ml-dsa-65, ml-kem-768, slh-dsa-sha2-128s), so completions list them all.
enum KeyKind: ExpressibleByArgument, Equatable {
    case rsa, ec, ed25519
    case postQuantum(KeyType)

    init?(argument: String) {
        switch argument {
        case "rsa": self = .rsa
        case "ec": self = .ec
        case "ed25519": self = .ed25519
        default:
            guard let t = KeyType(postQuantumName: argument) else { return nil }
            self = .postQuantum(t)
        }
    }

    static var allValueStrings: [String] {
        ["rsa", "ec", "ed25519"] + KeyType.allPostQuantum.map { "\($0)".lowercased() }
    }

    /// Not CaseIterable (a post-quantum case carries its type), so the completion list is given here.
    static var defaultCompletionKind: CompletionKind { .list(allValueStrings) }

    var isPostQuantum: Bool { if case .postQuantum = self { true } else { false } }
}

/// The public key of `verify` and `encapsulate`: the token's (--tag) or a file (--public-key).
struct PublicKeyChoice: ParsableArguments {
    @Option(help: "The key's application tag (a key in the token).") var tag: String?
    @Option(name: .customLong("public-key"),
            help: "A public key file instead: PEM or DER SubjectPublicKeyInfo (as `keyshare key public` writes).")
    var publicKeyFile: String?
    @OptionGroup var selection: TokenSelection
    @OptionGroup var groups: AccessGroupOptions

    func validate() throws {
        guard (tag == nil) != (publicKeyFile == nil) else { throw ValidationError("name the key with exactly one of --tag or --public-key") }
    }

    /// (the keychain key when --tag, its public key or the file's)
    func resolve() throws -> (KeyRef?, PublicKey) {
        if let path = publicKeyFile {
            let bytes = try FileIO.read(path)
            let key: PublicKey?
            if let text = String(bytes: bytes, encoding: .utf8), text.contains("-----BEGIN PUBLIC KEY-----") {
                key = try? PublicKey(pem: text)
            } else {
                key = try? PublicKey(spkiDER: bytes)
            }
            guard let key else { throw CLIError("\(path): not a public key this engine reads (PEM or DER SubjectPublicKeyInfo)") }
            return (nil, key)
        }
        let session = try SessionFactory.open(groups)
        let token = try selection.token.map { try Context.open(syncDrivers: false).tokens.resolveToken($0).tokenID }
        do {
            let k = try session.key(tag: Array((tag ?? "").utf8), itemClass: .publicKey, token: token)
            return (k, k.publicKey)
        } catch KeyShareError.itemNotFound {
            throw CLIError("no public key with tag \(tag ?? "")")
        }
    }
}

extension KeyCommand {
    /// `--context TEXT`: FIPS 204 / 205 allow at most 255 bytes.
    static func contextBytes(_ text: String) throws -> [UInt8] {
        let b = Array(text.utf8)
        guard b.count <= 255 else { throw CLIError("--context is \(b.count) bytes; ML-DSA and SLH-DSA take at most 255") }
        return b
    }

    /// Writes the ciphertext, then the secret; when the secret cannot be written, the ciphertext
    /// just made is removed again (nothing half-written: a ciphertext without its secret is useless).
    static func writePair(ciphertext: [UInt8], _ ctPath: String, secret: [UInt8], _ ssPath: String, force: Bool) throws {
        try FileIO.write(ciphertext, ctPath, force: force)
        do {
            try FileIO.write(secret, ssPath, force: force)
        } catch {
            if ctPath != "-" { unlink(ctPath) }
            throw error
        }
    }

    struct Encapsulate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "ML-KEM: make a shared secret for a public key; write the ciphertext and the secret (0600).",
            discussion: """
                The key is the token's (--tag) or a public key file (--public-key). The ciphertext goes to its \
                holder, who decapsulates it (keyshare key decapsulate) to the same 32-byte secret. Neither file \
                is replaced unless --force is given.
                """)
        @OptionGroup var key: PublicKeyChoice
        @Argument(help: "The ciphertext file to write.") var ciphertext: String
        @Argument(help: "The shared-secret file to write (0600).") var secret: String
        @OptionGroup var force: ForceOption
        @OptionGroup var output: JSONOption

        func validate() throws {
            guard ciphertext != "-", secret != "-" else { throw ValidationError("name both output files (standard output is not offered)") }
        }

        func run() throws {
            try KeyCommand.checkDistinct(ciphertext, secret)
            try FileIO.checkOutput(ciphertext, force: force.force)
            try FileIO.checkOutput(secret, force: force.force)
            let (ref, pub) = try key.resolve()
            guard case .mlKEM = pub.keyType else {
                throw CLIError("an \(pub.keyType) key cannot encapsulate (ML-KEM keys only)")
            }
            var r = try ref.map { try $0.encapsulate() } ?? KeyRef.encapsulate(to: pub)
            defer { r.sharedSecret.withUnsafeMutableBytes { if let b = $0.baseAddress { explicit_bzero(b, $0.count) } } }
            try KeyCommand.writePair(ciphertext: r.ciphertext, ciphertext, secret: r.sharedSecret, secret, force: force.force)
            try Console.report(output.json,
                               "encapsulated to a \(pub.keyType) key: ciphertext \(ciphertext) (\(r.ciphertext.count) bytes), shared secret \(secret) (\(r.sharedSecret.count) bytes)",
                               ["keyType": .string("\(pub.keyType)"), "ciphertext": .string(ciphertext), "ciphertextBytes": .int(r.ciphertext.count),
                                "secret": .string(secret), "secretBytes": .int(r.sharedSecret.count)])
        }
    }

    struct Decapsulate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "ML-KEM: recover the shared secret of a ciphertext with the private key (in the agent); write it (0600).")
        @OptionGroup var common: Common
        @OptionGroup var pin: PINOptions
        @Argument(help: "The ciphertext file.") var ciphertext: String
        @Argument(help: "The shared-secret file to write (0600), or - for standard output.") var secret: String
        @OptionGroup var force: ForceOption

        /// In the agent (docs/agent.md, "The CLI through the agent"): this process never holds the key.
        func run() throws {
            try FileIO.checkOutput(secret, force: force.force)
            let input = try FileIO.read(ciphertext)
            var m = try KeyCommand.agentRequest(common, pin)
            m["data"] = input
            var result = try AgentControl.call(.decapsulate, m)["result"] ?? []
            defer { result.withUnsafeMutableBytes { if let b = $0.baseAddress { explicit_bzero(b, $0.count) } } }
            try FileIO.write(result, secret, force: force.force)
        }
    }

    /// The ciphertext and the secret must be two files (one would overwrite the other).
    static func checkDistinct(_ a: String, _ b: String) throws {
        let same = a == b || {
            var sa = stat(), sb = stat()
            return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino
        }()
        if same { throw CLIError("the ciphertext and the secret must go to two files, not the same file") }
    }
}
