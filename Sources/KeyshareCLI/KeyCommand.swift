import ArgumentParser
import FoundationEssentials
import Glibc
import Keychain
import KeyShare
import KeyshareAgent
import Tokens

/// `keyshare key`: SecKeyGeneratePair, encryption and signatures from the
/// command line, through the KeyShare API. Keys are found by application tag.
struct KeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Generate keys and encrypt, decrypt, sign, verify, encapsulate and decapsulate with them.",
        subcommands: [Generate.self, Import.self, Attest.self, Encrypt.self, Decrypt.self, Sign.self, Verify.self, Encapsulate.self,
                      Decapsulate.self, Public.self, List.self])

    /// Options every key subcommand shares.
    struct Common: ParsableArguments {
        @Option(help: "The key's application tag.") var tag: String
        @OptionGroup var selection: TokenSelection
        @OptionGroup var groups: AccessGroupOptions
    }

    enum Padding: String, ExpressibleByArgument, CaseIterable {
        case pkcs1, oaepSHA256 = "oaep-sha256"
        var rsa: RSAPadding {
            switch self {
            case .pkcs1: .pkcs1
            case .oaepSHA256: .oaep(.sha256, mgf1: .sha256, label: [])
            }
        }
    }

    enum Algorithm: String, ExpressibleByArgument, CaseIterable {
        case pkcs1SHA256 = "pkcs1-sha256", pssSHA256 = "pss-sha256", ecdsaSHA256 = "ecdsa-sha256"
        case ecdsaSHA384 = "ecdsa-sha384", ed25519
        /// Pure ML-DSA / SLH-DSA (FIPS 204 / 205), with the --context string when one is given.
        case mlDSA = "ml-dsa", slhDSA = "slh-dsa"

        var signature: SignatureAlgorithm {
            switch self {
            case .pkcs1SHA256: .rsaPKCS1(.sha256)
            case .pssSHA256: .rsaPSS(.sha256, mgf1: .sha256, saltLength: 32)
            case .ecdsaSHA256: .ecdsa(.sha256)
            case .ecdsaSHA384: .ecdsa(.sha384)
            case .ed25519: .ed25519
            case .mlDSA: .mlDSA
            case .slhDSA: .slhDSA
            }
        }

        static func `default`(for type: KeyType) -> Algorithm {
            switch type {
            case .rsa: .pkcs1SHA256
            case .ec: .ecdsaSHA256
            case .ed25519, .ed448, .x25519, .x448: .ed25519
            case .mlDSA, .mlKEM: .mlDSA
            case .slhDSA: .slhDSA
            }
        }
    }

    static func key(_ session: KeychainSession, _ c: Common, _ cls: ItemClass) throws -> KeyRef {
        do {
            return try session.key(tag: Array(c.tag.utf8), itemClass: cls)
        } catch KeyShareError.itemNotFound {
            let what = cls == .privateKey ? "private key" : "public key"
            throw CLIError("no \(what) with tag \(c.tag)" + (cls == .privateKey ? " (or the token is locked: give --pin-source)" : ""))
        }
    }

    /// A private-key request for the agent: the store, the token (resolved by
    /// the agent), the access groups, the tag and the user PIN.
    static func agentRequest(_ c: Common, _ pin: PINOptions) throws -> ControlProtocol.Message {
        let token = try AgentControl.resolve(c.selection)
        var m = ControlProtocol.Message()
        m.set("token", token.id)
        m.set("tag", c.tag)
        m.set("groups", c.groups.groups?.joined(separator: ","))
        m["pin"] = try pin.userPIN(token: token.label)
        return m
    }

    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Generate a key pair (private and public key items, both permanent).")
        @Option(name: .customLong("type"), help: "rsa, ec, ed25519, or a post-quantum type: ml-dsa-44|65|87, ml-kem-512|768|1024, slh-dsa-… (OpenSSL 3.5).")
        var type: KeyKind
        @Option(help: "RSA modulus size (2048, 3072, 4096).") var bits: Int?
        @Option(help: "EC curve: P-256, P-384 or P-521.") var curve: String?
        @Option(help: "The label of both keys.") var label: String
        @Option(help: "What the pair may do: comma-separated sign, encrypt, derive (default: all its type can).") var usage: String?
        @Flag(help: "The private key may leave the token in a PKCS #12 (keyshare export, the share tree); by default it never can (CKA_EXTRACTABLE false).")
        var extractable = false
        @OptionGroup var common: Common
        @OptionGroup var pin: PINOptions
        @Flag(help: "JSON output: the two keys created, with their persistent references and PKCS #11 URIs.") var json = false

        func run() throws {
            let spec: KeySpec
            switch type {
            case .postQuantum(let t):
                guard bits == nil, curve == nil else { throw ValidationError("\(t) takes neither --bits nor --curve") }
                spec = .postQuantum(t)
            case .rsa:
                guard curve == nil else { throw ValidationError("--curve is for EC keys") }
                let b = bits ?? 2048
                guard [2048, 3072, 4096].contains(b) else { throw ValidationError("--bits must be 2048, 3072 or 4096") }
                spec = .rsa(bits: b)
            case .ec:
                guard bits == nil else { throw ValidationError("--bits is for RSA keys; EC keys take --curve") }
                // The CLI's curves; the PKCS #11 module offers more (docs/pkcs11-conformance.md).
                guard let c = ECCurve(rawValue: curve ?? "P-256"), [.p256, .p384, .p521].contains(c) else {
                    throw ValidationError("--curve must be P-256, P-384 or P-521")
                }
                spec = .ec(c)
            case .ed25519:
                guard bits == nil, curve == nil else { throw ValidationError("Ed25519 takes neither --bits nor --curve") }
                spec = .ed25519
            }
            var flags: UsageFlags?
            if let usage {
                var f: UsageFlags = []
                for word in usage.split(separator: ",") {
                    switch word {
                    case "sign", "verify": f.formUnion([.sign, .verify])
                    case "encrypt", "decrypt", "encapsulate", "decapsulate": f.formUnion([.encrypt, .decrypt])
                    case "derive": f.insert(.derive)
                    default: throw ValidationError("unknown usage \(word): use sign, encrypt or derive")
                    }
                }
                // A post-quantum key does one thing (PKCS #11 3.2): ML-DSA/SLH-DSA sign, ML-KEM
                // encapsulates (its "encrypt"); any other usage would only set flags no mechanism honours.
                if case .postQuantum(let t) = type {
                    if case .mlKEM = t {
                        guard f.isSubset(of: [.encrypt, .decrypt]) else {
                            throw ValidationError("\(t) keys only encapsulate and decapsulate: --usage encrypt, or leave --usage out")
                        }
                    } else if !f.isSubset(of: [.sign, .verify]) {
                        throw ValidationError("\(t) keys only sign: --usage sign, or leave --usage out")
                    }
                }
                flags = f
            }
            // Generated in the agent (docs/agent.md, "The CLI through the agent"): the private key never exists here.
            let token = try Context.open(syncDrivers: false).token(common.selection)
            var m = ControlProtocol.Message()
            switch spec {
            case .rsa(let bits): m.set("spec", "rsa:\(bits)")
            case .ec(let c): m.set("spec", "ec:\(c.rawValue)")
            case .postQuantum(let t): m.set("spec", "pq:\(t)")
            default: m.set("spec", "ed25519")
            }
            m.set("token", token.tokenID.description)
            m.set("groups", common.groups.groups?.joined(separator: ","))
            m.set("tag", common.tag)
            m.set("label", label)
            m.set("usage", flags.map { String($0.rawValue) })
            m.set("extractable", extractable ? "1" : "0")
            m["pin"] = try pin.userPIN(token: token.label)
            let reply = try AgentControl.call(.generate, m)
            m["pin"] = nil
            let priv = KeyRow(agent: reply, prefix: "private.", token: token)
            let pub = KeyRow(agent: reply, prefix: "public.", token: token)
            if json {
                try Console.json(["created": [priv, pub]])
            } else {
                let size = (priv.bits ?? 0) > 0 && !type.isPostQuantum ? " \(priv.bits ?? 0)-bit" : ""
                Console.out("generated \(priv.keyType)\(size) key pair \(label) (tag \(common.tag)): "
                    + "private \(priv.reference), public \(pub.reference)")
            }
        }
    }

    struct Encrypt: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Encrypt a file with the public key (RSA).")
        @OptionGroup var common: Common
        @Option var padding: Padding = .oaepSHA256
        @Argument var input: String
        @Argument(help: "The output file (0600), or - for standard output.") var output: String
        @OptionGroup var force: ForceOption

        func run() throws {
            try FileIO.checkOutput(output, force: force.force)
            let session = try SessionFactory.open(common.groups)
            let k = try KeyCommand.key(session, common, .publicKey)
            try FileIO.write(try k.encrypt(FileIO.read(input), padding: padding.rsa), output, force: force.force)
        }
    }

    struct Decrypt: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Decrypt a file with the private key (RSA).")
        @OptionGroup var common: Common
        @Option var padding: Padding = .oaepSHA256
        @OptionGroup var pin: PINOptions
        @Argument var input: String
        @Argument(help: "The output file (0600), or - for standard output.") var output: String
        @OptionGroup var force: ForceOption

        /// In the agent (docs/agent.md, "The CLI through the agent"): this process never holds the key.
        func run() throws {
            try FileIO.checkOutput(output, force: force.force)
            var m = try KeyCommand.agentRequest(common, pin)
            m.set("padding", padding.rawValue)
            m["data"] = try FileIO.read(input)
            try FileIO.write(try AgentControl.call(.decrypt, m)["result"] ?? [], output, force: force.force)
        }
    }

    struct Sign: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Sign a file with the private key; ECDSA signatures are written in DER, as OpenSSL reads them.")
        @OptionGroup var common: Common
        @Option(help: "pkcs1-sha256, pss-sha256, ecdsa-sha256, ecdsa-sha384, ed25519, ml-dsa or slh-dsa (default: by key type).")
        var algorithm: Algorithm?
        @Option(help: "ML-DSA / SLH-DSA only: the context string (FIPS 204 ctx, at most 255 bytes of UTF-8).")
        var context: String?
        @OptionGroup var pin: PINOptions
        @Argument var input: String
        @Argument(help: "The signature file (0600), or - for standard output.") var output: String
        @OptionGroup var force: ForceOption

        /// In the agent (docs/agent.md, "The CLI through the agent"): this process
        /// opens no store and never holds the key; ECDSA comes back DER-encoded.
        func run() throws {
            try FileIO.checkOutput(output, force: force.force)
            let ctx = try context.map(KeyCommand.contextBytes)
            var m = try KeyCommand.agentRequest(common, pin)
            m.set("algorithm", algorithm?.rawValue ?? "")
            m["context"] = ctx
            m["data"] = try FileIO.read(input)
            try FileIO.write(try AgentControl.call(.sign, m)["result"] ?? [], output, force: force.force)
        }
    }

    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify a signature with the public key (exit 1 when invalid).",
            discussion: "The key is the token's (--tag) or a public key file (--public-key: PEM or DER SubjectPublicKeyInfo, as `keyshare key public` writes).")
        @OptionGroup var key: PublicKeyChoice
        @Option var algorithm: Algorithm?
        @Option(help: "ML-DSA / SLH-DSA only: the context string the signature was made with.") var context: String?
        @Argument var input: String
        @Argument var signature: String
        @OptionGroup var output: JSONOption

        func run() throws {
            let ctx = try context.map(KeyCommand.contextBytes)
            let (ref, pub) = try key.resolve()
            let message = try FileIO.read(input)
            var sig = try FileIO.read(signature)
            let valid: Bool
            if pub.keyType.isPostQuantum {
                if let algorithm, algorithm != .default(for: pub.keyType) {
                    throw CLIError("algorithm \(algorithm.rawValue) does not fit an \(pub.keyType) key")
                }
                if case .mlKEM = pub.keyType { throw CLIError("an \(pub.keyType) key cannot verify (it is a KEM key)") }
                valid = try ref.map { try $0.verifySignature(sig, message: message, context: ctx ?? []) }
                    ?? KeyRef.verify(pub, sig, message: message, context: ctx ?? [])
            } else {
                guard ctx == nil else { throw CLIError("--context is for ML-DSA and SLH-DSA keys; this is an \(pub.keyType) key") }
                let alg = algorithm ?? .default(for: pub.keyType)
                if pub.keyType == .ec, let curve = pub.curve {
                    guard let raw = try? ECDSASignatureEncoding.raw(fromDER: sig, size: curve.byteSize) else {
                        throw CLIError("signature invalid (not a DER ECDSA signature)")
                    }
                    sig = raw
                }
                valid = try ref.map { try $0.verifySignature(sig, message: message, algorithm: alg.signature) }
                    ?? pub.verify(signature: sig, message: message, algorithm: alg.signature)
            }
            guard valid else { throw CLIError("signature invalid") }
            try Console.report(output.json, "signature valid", ["valid": true])
        }
    }

    struct Public: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the public key as PEM.")
        @OptionGroup var common: Common

        func run() throws {
            let session = try SessionFactory.open(common.groups)
            let pem = try KeyCommand.key(session, common, .publicKey).publicKey.pem()
            StandardStream.write(pem)
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the keys this run can see (its access groups only).")
        @OptionGroup var selection: TokenSelection
        @OptionGroup var groups: AccessGroupOptions
        @OptionGroup var pin: PINOptions
        @Flag(help: "Also private keys (asks for the PIN).") var `private` = false
        @Flag(help: "JSON output.") var json = false

        /// `--token` narrows the listing to that token (it used to list every
        /// token's keys); the TOKEN column says where each key lives.
        func run() throws {
            let session = try SessionFactory.open(groups)
            let ctx = try Context.open(syncDrivers: false)
            let tokens = Dictionary(try ctx.store.tokens().map { ($0.tokenID, $0) }, uniquingKeysWith: { a, _ in a })
            let only = try selection.token.map { try ctx.tokens.resolveToken($0).tokenID }
            if `private` { try SessionFactory.unlock(session, selection, pin) }
            var rows: [KeyRow] = []
            for cls in [ItemClass.privateKey, .publicKey] {
                let found = (try? session.copyMatching(Query(itemClass: cls, tokenID: only, returning: .attributes))) ?? []
                rows += found.compactMap(\.attributes).map { KeyRow($0, token: tokens[$0.tokenID]) }
            }
            if json { try Console.json(rows); return }
            Console.table(["CLASS", "LABEL", "TAG", "TYPE", "BITS", "TOKEN", "GROUP", "REFERENCE"],
                          rows.map { [$0.itemClass, $0.label, $0.tag, $0.keyType, $0.sizeCell, $0.tokenLabel, $0.accessGroup, $0.reference] })
        }
    }
}

struct KeyRow: Encodable {
    var itemClass, label, tag, keyType, accessGroup, reference, tokenID, tokenLabel, id, uri: String
    /// The modulus or curve size; absent for post-quantum keys, whose parameter set (TYPE,
    /// "ML-KEM-768") and NIST security category say their strength: their public key's length in
    /// bits (9472 for ML-KEM-768) is no key size a user compares, and OpenSSL 3.5's
    /// `openssl pkey -text` names only the set for them.
    var bits: Int?
    var securityCategory: Int?
    var usage: [String]

    /// The BITS column: the size, or "category N" for a post-quantum key.
    var sizeCell: String { securityCategory.map { "category \($0)" } ?? String(bits ?? 0) }

    init(_ a: ItemAttributes, token: TokenRecord?) {
        tokenLabel = token?.label ?? a.tokenID.description
        id = Hex.upper(a.pkcs11[CKA.id] ?? [])
        uri = token.map {
            PKCS11URI.object(token: $0, label: a.label, id: a.pkcs11[CKA.id], type: a.itemClass == .privateKey ? "private" : "public")
        } ?? ""
        itemClass = a.itemClass == .privateKey ? "private-key" : "public-key"
        label = a.label ?? ""
        tag = a.applicationTag.map { String(decoding: $0, as: UTF8.self) } ?? ""
        keyType = a.keyType.map { "\($0)" } ?? ""
        accessGroup = a.accessGroup
        reference = a.persistentReference.base64url
        tokenID = a.tokenID.description
        securityCategory = a.keyType?.securityCategory
        bits = securityCategory == nil ? a.keySizeInBits ?? 0 : nil
        let names: [(UsageFlags, String)] = [(.sign, "sign"), (.verify, "verify"), (.encrypt, "encrypt"), (.decrypt, "decrypt"),
                                              (.derive, "derive"), (.wrap, "wrap"), (.unwrap, "unwrap")]
        usage = names.filter { a.usage.contains($0.0) }.map(\.1)
            + [(CKA.encapsulate, "encapsulate"), (CKA.decapsulate, "decapsulate")].filter { a.pkcs11[$0.0] == [1] }.map(\.1)
    }
}
