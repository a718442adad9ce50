import ArgumentParser
import Foundation
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
                guard let d = ISO8601DateFormatter().date(from: date) else {
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
            static let configuration = CommandConfiguration(abstract: "Trust a certificate (every one of a PEM bundle).")
            @Argument var file: String
            @OptionGroup var selection: TokenSelection
            @OptionGroup var groups: AccessGroupOptions
            func run() throws {
                let session = try SessionFactory.open(groups)
                for c in try FileIO.certificates(file) {
                    try session.addAnchor(c, token: selection.token)
                    Console.out("trusted \(c.subject)")
                }
            }
        }

        struct Remove: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Stop trusting a certificate (it stays in the keychain).")
            @Argument var file: String
            @OptionGroup var groups: AccessGroupOptions
            func run() throws {
                let session = try SessionFactory.open(groups)
                for c in try FileIO.certificates(file) {
                    do { try session.removeAnchor(c) } catch KeyShareError.itemNotFound {
                        throw CLIError("\(c.subject) is not a trusted certificate in this keychain")
                    }
                    Console.out("no longer trusted: \(c.subject)")
                }
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
