import ArgumentParser
import FoundationEssentials
import Glibc
import Keychain
import KeyShare

/// `keyshare trust`: SecTrust evaluation and the keychain's trust anchors.
struct TrustCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trust",
        abstract: "Evaluate certificate trust and manage the keychain's trusted anchors.",
        subcommands: [Evaluate.self, Anchor.self])

    /// Exit statuses of `trust evaluate`, so scripts can branch without parsing.
    static func exitCode(_ r: TrustResult) -> Int32 {
        switch r {
        case .proceed, .unspecified: 0
        case .recoverableTrustFailure: 2
        case .fatalTrustFailure: 4
        case .invalid: 5
        }
    }

    static func line(_ r: TrustResult) -> String {
        switch r {
        case .proceed: "proceed"
        case .unspecified: "unspecified (trusted through a system anchor)"
        case .recoverableTrustFailure(let reasons): "recoverable trust failure: " + reasons.map(\.rawValue).joined(separator: ", ")
        case .fatalTrustFailure(let why): "fatal trust failure: \(why)"
        case .invalid(let why): "invalid: \(why)"
        }
    }

    struct Evaluate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Evaluate a certificate's chain (exit 0 trusted, 2 recoverable failure, 4 fatal, 5 invalid).")
        enum Policy: String, ExpressibleByArgument, CaseIterable { case basic, ssl }

        @Argument(help: "The certificate (PEM or DER).") var certificate: String
        @Option(name: .customLong("chain"), help: "Intermediate certificates (repeatable; PEM bundles allowed).") var chain: [String] = []
        @Option var policy: Policy = .basic
        @Option(help: "The host name the ssl policy checks.") var host: String?
        @Option(help: "Evaluate at this time (ISO 8601, e.g. 2030-01-01T00:00:00Z) instead of now.") var date: String?
        @Option(help: "keychain (trusted certificates), system (/etc/ssl/certs) or a PEM file.") var anchors = "keychain"
        @OptionGroup var groups: AccessGroupOptions
        @Flag(help: "JSON output.") var json = false

        func run() throws {
            guard host == nil || policy == .ssl else { throw ValidationError("--host needs --policy ssl") }
            var when: Int64?
            if let date {
                guard let d = try? Date(date, strategy: Date.ISO8601FormatStyle()) else {
                    throw ValidationError("--date must be ISO 8601, like 2030-01-01T00:00:00Z")
                }
                when = Int64(d.timeIntervalSince1970)
            }
            let session = try SessionFactory.open(groups)
            let result: TrustEvaluation
            if let leaf = try? FileIO.certificates(certificate).first {
                let anchorChoice: AnchorChoice
                switch anchors {
                case "keychain": anchorChoice = .keychain
                case "system": anchorChoice = .system()
                default: anchorChoice = .certificates(try FileIO.certificates(anchors))
                }
                let intermediates = try chain.flatMap(FileIO.certificates)
                result = try session.evaluateTrust(TrustRequest(
                    leaf, chain: intermediates, policy: policy == .ssl ? .ssl(host: host) : .basic,
                    anchors: anchorChoice, date: when))
            } else {
                _ = try FileIO.read(certificate)  // a missing file is an error, not a verdict
                result = TrustEvaluation(result: .invalid("\(certificate) is not a certificate"), chain: [], details: [])
            }
            if json {
                try Console.json(TrustRow(result))
            } else {
                Console.out(TrustCommand.line(result.result))
                if !result.chain.isEmpty { Console.out("chain: " + result.chain.map(\.subject).joined(separator: " <- ")) }
            }
            let code = TrustCommand.exitCode(result.result)
            if code != 0 { throw CLIExit(code: code) }
        }
    }

    struct Anchor: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Manage the keychain's trusted certificates (CKA_TRUSTED).", subcommands: [Add.self, Remove.self, List.self])

        struct Add: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Trust a certificate (every one of a PEM bundle); needs the token's SO PIN.",
                discussion: Anchor.authentication)
            @Argument var file: String
            @OptionGroup var selection: TokenSelection
            @OptionGroup var groups: AccessGroupOptions
            @OptionGroup var so: SOPINOptions
            @OptionGroup var output: JSONOption
            func run() throws {
                let certs = try FileIO.certificates(file)
                try Anchor.authenticate(selection, so, certificates: certs, adding: true)
                let session = try SessionFactory.open(groups)
                for c in certs {
                    try session.addAnchor(c, token: selection.token)
                    if !output.json { Console.out("trusted \(c.subject)") }
                }
                if output.json { try Console.json(["trusted": certs.map(Anchor.row)]) }
            }
        }

        struct Remove: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Stop trusting a certificate (it stays in the keychain); needs the token's SO PIN.",
                discussion: Anchor.authentication)
            @Argument var file: String
            @OptionGroup var selection: TokenSelection
            @OptionGroup var groups: AccessGroupOptions
            @OptionGroup var so: SOPINOptions
            @OptionGroup var output: JSONOption
            func run() throws {
                let certs = try FileIO.certificates(file)
                try Anchor.authenticate(selection, so, certificates: certs, adding: false)
                let session = try SessionFactory.open(groups)
                for c in certs {
                    do { try session.removeAnchor(c) } catch KeyShareError.itemNotFound {
                        throw CLIError("\(c.subject) is not a trusted certificate in this keychain")
                    }
                    if !output.json { Console.out("no longer trusted: \(c.subject)") }
                }
                if output.json { try Console.json(["untrusted": certs.map(Anchor.row)]) }
            }
        }

        /// A certificate in the JSON of `anchor add` / `anchor remove`.
        static func row(_ c: Certificate) -> [String: String] { ["subject": c.subject, "sha256": c.sha256Hex] }

        static let authentication = """
            Changing what the keychain trusts takes the security officer's PIN of the token that holds the \
            anchor (--token; for a certificate already in the keychain, the token it is in), as macOS asks for \
            authentication to change trust settings and as PKCS #11 lets only the SO set CKA_TRUSTED (the \
            module refuses it to a user session). A wrong SO PIN is counted.
            """

        /// Checks the SO PIN of every token the change touches: the token of
        /// each certificate already in the keychain, else the selected token.
        static func authenticate(_ selection: TokenSelection, _ so: SOPINOptions, certificates: [Certificate], adding: Bool) throws {
            let ctx = try Context.open(syncDrivers: false)
            var tokens: [TokenID] = []
            var absent = false
            for c in certificates {
                let held = try ctx.store.find(ItemQuery(itemClass: .certificate, attributes: [CKA.value: c.der], limit: .all), key: nil)
                if held.isEmpty { absent = true }
                for t in held.map(\.tokenID) where !tokens.contains(t) { tokens.append(t) }
            }
            // A certificate not in the keychain yet is added to the selected token.
            if adding, absent {
                let t = try ctx.token(selection).tokenID
                if !tokens.contains(t) { tokens.append(t) }
            }
            for id in tokens {
                guard let record = try ctx.store.token(id) else { continue }
                guard record.hasPINs else {
                    throw CLIError("token \(record.label) is an external token: its trust settings are the card's own")
                }
                let pin = try Secrets.pin(so.soPinSource, prompt: "SO PIN for \(record.label): ", what: "SO PIN")
                _ = try PINErrors.naming("SO PIN", of: record) { try ctx.store.unlockSO(id, pin: pin) }
            }
        }

        struct List: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List the trusted certificates.")
            @OptionGroup var groups: AccessGroupOptions
            @Flag(help: "JSON output.") var json = false
            func run() throws {
                let anchors = try SessionFactory.open(groups).trustedAnchors()
                if json {
                    try Console.json(anchors.map { ["subject": $0.subject, "sha256": $0.sha256Hex] })
                } else if anchors.isEmpty {
                    Console.out("no trusted certificates")
                } else {
                    for a in anchors { Console.out("\(a.sha256Hex)  \(a.subject)") }
                }
            }
        }
    }
}

struct TrustRow: Encodable {
    var result: String
    var reasons: [String]
    var detail: [String]
    var chain: [String]

    init(_ e: TrustEvaluation) {
        result = e.result.verdict
        if case .recoverableTrustFailure(let r) = e.result { reasons = r.map(\.rawValue) } else { reasons = [] }
        switch e.result {
        case .fatalTrustFailure(let why), .invalid(let why): detail = [why]
        default: detail = e.details
        }
        chain = e.chain.map(\.subject)
    }
}

/// The trust line `keyshare import` adds for an imported identity: the
/// chain is evaluated against the keychain's anchors, and an untrusted
/// chain is reported, never a reason to fail the import.
enum ImportTrust {
    static func summary(certificate: PersistentReference?, privateKey: PersistentReference?) -> String? {
        guard let certificate, privateKey != nil,
              let session = try? KeychainSession(home: nil),
              let der = try? session.copyFirst(Query(persistentReference: certificate, returning: .data)).data,
              let cert = try? Certificate(der: der),
              let e = try? session.evaluateTrust(TrustRequest(cert)) else { return nil }
        return TrustCommand.line(e.result)
    }
}

/// `--so-pin-source`, for commands that need the security officer.
struct SOPINOptions: ParsableArguments {
    @Option(name: .customLong("so-pin-source"), help: "Where the token's SO PIN comes from (env:VAR or file:PATH); prompted if absent.")
    var soPinSource: SecretSource?
}
