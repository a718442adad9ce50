import ArgumentParser
import Foundation
import Keychain
import Tokens

struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Create, list, delete, remove, insert and watch tokens and manage their PINs.",
        subcommands: [Create.self, List.self, Delete.self, SetPIN.self, InitPIN.self, Remove.self, Insert.self, Watch.self,
                      Bind.self, Unbind.self, TPMConfig.self])

    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a soft token with a user PIN and an SO PIN.", discussion: PINPolicy.rule)
        @Option(help: "The token's label (at most 32 bytes).") var label: String
        @Option(name: .customLong("so-pin-source"),
                help: "Where the SO PIN comes from (env:VAR or file:PATH; \(PINPolicy.range) bytes); prompted if absent.")
        var soPinSource: SecretSource?
        @OptionGroup var pin: PINOptions
        @Flag(help: "A TPM token: its keys are created in the TPM and never leave it (docs/tpm.md).") var tpm = false
        @Option(help: "Seal the soft token to this machine: --bind tpm (docs/tpm.md).") var bind: String?
        @Option(help: "With --bind tpm: also seal to these SHA-256 PCRs' current values (comma-separated, e.g. 7).")
        var pcrs: String?
        @Flag(help: "Print the new token as JSON.") var json = false

        func run() throws {
            guard !label.isEmpty, label.utf8.count <= 32 else { throw CLIError("a token label must be 1 to 32 bytes") }
            if let bind, bind != "tpm" { throw CLIError("--bind takes tpm (the only device a token can be bound to)") }
            if tpm && bind != nil { throw CLIError("--tpm and --bind are exclusive: a TPM token's keys are in the TPM already") }
            if pcrs != nil && bind == nil { throw CLIError("--pcrs needs --bind tpm") }
            let pcrList = try bind == nil ? nil : TokenCommand.parsePCRs(pcrs)
            let ctx = try Context.open()
            let so = try Secrets.obtain(soPinSource, prompt: "New SO PIN: ", what: "SO PIN", confirm: true)
            let user = try Secrets.obtain(pin.pinSource, prompt: "New user PIN: ", what: "user PIN", confirm: true)
            try PINPolicy.check(so, what: "SO PIN")
            try PINPolicy.check(user, what: "user PIN")
            let record = tpm ? try ctx.tokens.createTPMToken(label: label, soPIN: so, userPIN: user)
                : try ctx.tokens.createSoftToken(label: label, soPIN: so, userPIN: user, bindPCRs: pcrList)
            if json {
                try Console.json(TokenRow(record, itemCount: 0))
            } else {
                Console.out("created token \(record.tokenID) (label \(record.label), slot \(record.slotID))")
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List tokens: ID, label, serial, items and state.")
        @Flag(help: "JSON output.") var json = false

        func run() throws {
            let ctx = try Context.open()
            let rows = try ctx.store.tokens().map {
                var row = TokenRow($0, itemCount: try ctx.store.count(token: $0.tokenID))
                row.kind = try TokenRow.kind($0, ctx.store)
                row.state = TokenRow.state($0, drivers: ctx.drivers)
                return row
            }
            if json { return try Console.json(rows) }
            if rows.isEmpty { return Console.out("no tokens (create one with: keyshare token create --label NAME)") }
            Console.table(
                ["TOKEN ID", "LABEL", "KIND", "SERIAL", "SLOT", "ITEMS", "STATE", "USER PIN"],
                rows.map { [$0.tokenID, $0.label, $0.kind, $0.serial, String($0.slotID), String($0.items), $0.state, $0.userPIN] })
            if rows.contains(where: { $0.state == TokenRow.unreachable }) {
                Console.error("note: a token \(TokenRow.unreachable) is listed present (another process mirrored it) but its driver, "
                    + "loaded with the variables stored with it, does not show it: check them with keyshare driver list "
                    + "and set them with keyshare driver set-env NAME --env VAR=VALUE")
            }
        }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a token and every item in it (needs the SO PIN).")
        @Argument(help: "The token's label or token ID.") var token: String
        @Option(name: .customLong("so-pin-source"), help: "Where the SO PIN comes from (env:VAR or file:PATH).")
        var soPinSource: SecretSource?

        func run() throws {
            let ctx = try Context.open()
            let record = try ctx.tokens.resolveToken(token)
            let so = try Secrets.obtain(soPinSource, prompt: "SO PIN for \(record.label): ", what: "SO PIN")
            _ = try PINErrors.naming("SO PIN", of: record) { try ctx.store.unlockSO(record.tokenID, pin: so) }
            try ctx.store.deleteToken(record.tokenID)
            Console.out("deleted token \(record.tokenID)")
        }
    }

    struct SetPIN: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-pin", abstract: "Change the user PIN (or the SO PIN with --so).", discussion: PINPolicy.rule)
        @OptionGroup var selection: TokenSelection
        @Flag(help: "Change the SO PIN instead of the user PIN.") var so = false
        @Option(name: .customLong("pin-source"), help: "Where the current PIN comes from.") var pinSource: SecretSource?
        @Option(name: .customLong("new-pin-source"), help: "Where the new PIN comes from (\(PINPolicy.range) bytes).")
        var newPinSource: SecretSource?

        func run() throws {
            let ctx = try Context.open()
            let record = try ctx.token(selection)
            let who = so ? "SO PIN" : "user PIN"
            let old = try Secrets.obtain(pinSource, prompt: "Current \(who): ", what: who)
            let new = try Secrets.obtain(newPinSource, prompt: "New \(who): ", what: "new " + who, confirm: true)
            try PINPolicy.check(new, what: "new " + who)
            try PINErrors.naming(who, of: record) {
                if so {
                    try ctx.store.changeSOPIN(record.tokenID, old: old, new: new)
                } else {
                    try ctx.store.changeUserPIN(record.tokenID, old: old, new: new)
                }
            }
            Console.out("\(who) of \(record.label) changed")
        }
    }

    struct InitPIN: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "init-pin", abstract: "Set a new user PIN with the SO PIN (unlocks a locked PIN; keys survive).",
            discussion: PINPolicy.rule)
        @OptionGroup var selection: TokenSelection
        @Option(name: .customLong("so-pin-source"), help: "Where the SO PIN comes from.") var soPinSource: SecretSource?
        @Option(name: .customLong("new-pin-source"), help: "Where the new user PIN comes from (\(PINPolicy.range) bytes).")
        var newPinSource: SecretSource?

        func run() throws {
            let ctx = try Context.open()
            let record = try ctx.token(selection)
            let so = try Secrets.obtain(soPinSource, prompt: "SO PIN for \(record.label): ", what: "SO PIN")
            let soKey = try PINErrors.naming("SO PIN", of: record) { try ctx.store.unlockSO(record.tokenID, pin: so) }
            let new = try Secrets.obtain(newPinSource, prompt: "New user PIN: ", what: "new user PIN", confirm: true)
            try PINPolicy.check(new, what: "new user PIN")
            try ctx.store.initUserPIN(record.tokenID, soKey: soKey, newPIN: new)
            Console.out("user PIN of \(record.label) set")
        }
    }
}

extension TokenCommand {
    static func parsePCRs(_ text: String?) throws -> [Int] {
        guard let text, !text.isEmpty else { return [] }
        return try text.split(separator: ",").map {
            guard let n = Int($0), (0...23).contains(n) else { throw CLIError("--pcrs takes PCR numbers 0 to 23, comma-separated") }
            return n
        }
    }

    /// Seals an existing soft token to this machine's TPM. Both PINs: each wrap of the token key is remade.
    struct Bind: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Seal a soft token to this machine's TPM (needs the SO PIN and the user PIN).")
        @OptionGroup var selection: TokenSelection
        @Flag(help: "Bind to the TPM (the only device a token can be bound to).") var tpm = false
        @Option(help: "Also seal to these SHA-256 PCRs' current values (comma-separated, e.g. 7).") var pcrs: String?
        @Option(name: .customLong("so-pin-source"), help: "Where the SO PIN comes from.") var soPinSource: SecretSource?
        @OptionGroup var pin: PINOptions

        func run() throws {
            guard tpm else { throw CLIError("say what to bind to: keyshare token bind --tpm") }
            let list = try TokenCommand.parsePCRs(pcrs)
            try TokenCommand.setBinding(selection, soPinSource, pin, pcrs: list)
            Console.out("token bound to this machine's TPM" + (list.isEmpty ? "" : " and PCRs " + list.map(String.init).joined(separator: ",")))
        }
    }

    struct Unbind: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Undo token bind: the token opens with its PINs alone again (needs the SO PIN and the user PIN).")
        @OptionGroup var selection: TokenSelection
        @Option(name: .customLong("so-pin-source"), help: "Where the SO PIN comes from.") var soPinSource: SecretSource?
        @OptionGroup var pin: PINOptions

        func run() throws {
            try TokenCommand.setBinding(selection, soPinSource, pin, pcrs: nil)
            Console.out("token no longer bound to a TPM")
        }
    }

    static func setBinding(_ selection: TokenSelection, _ soSource: SecretSource?, _ pin: PINOptions, pcrs: [Int]?) throws {
        let ctx = try Context.open()
        let record = try ctx.token(selection)
        guard SoftToken.isSoft(record.tokenID) else { throw CLIError("token \(record.label) is not a keyshare soft token") }
        let bound = try ctx.store.tokenBindingPCRs(record.tokenID) != nil
        if pcrs == nil && !bound { throw CLIError("token \(record.label) is not bound to a TPM") }
        let so = try Secrets.obtain(soSource, prompt: "SO PIN for \(record.label): ", what: "SO PIN")
        let user = record.userPINInitialized
            ? try Secrets.obtain(pin.pinSource, prompt: "User PIN for \(record.label): ", what: "user PIN") : nil
        try PINErrors.naming("PIN", of: record) {
            try ctx.store.setTokenBinding(record.tokenID, soPIN: so, userPIN: user, pcrs: pcrs)
        }
    }

    /// Where the TPM is, for this store: KEYSHARE_TCTI overrides it.
    struct TPMConfig: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "tpm-config", abstract: "Show or set the TPM this store uses (a tpm2-tss TCTI string).")
        @Option(help: "The TCTI, e.g. device:/dev/tpmrm0 or swtpm:host=127.0.0.1,port=2321; empty to clear.") var tcti: String?

        func run() throws {
            let ctx = try Context.open()
            if let tcti { try ctx.store.setConfiguredTCTI(tcti) }
            Console.out("TPM: \(ctx.store.tpmTCTI())")
        }
    }
}

/// PKCS #11 puts PIN length bounds in the token info (ulMinPinLen 4,
/// ulMaxPinLen 255 in Sources/PKCS11/SlotToken.swift, which C_InitToken,
/// C_InitPIN and C_SetPIN enforce); the CLI enforces the same bounds, so a PIN
/// set through either works through the other. Lengths are bytes (UTF-8), as
/// PKCS #11 counts them. 10-cli.sh checks these against pkcs11-tool -L.
enum PINPolicy {
    static let minLength = 4
    static let maxLength = 255
    static let range = "\(minLength) to \(maxLength)"
    static let rule = "New PINs are \(minLength) to \(maxLength) bytes (UTF-8), the bounds the PKCS #11 module reports."

    static func check(_ pin: [UInt8], what: String) throws {
        guard (minLength...maxLength).contains(pin.count) else {
            throw CLIError("\(what) must be \(minLength) to \(maxLength) bytes (it has \(pin.count))")
        }
    }
}

/// A wrong PIN named for what it is: the store only knows "a PIN failed";
/// the command knows whether it asked for the user PIN or the SO PIN, and
/// says so with the attempts left (an SO PIN mistaken for the user PIN, or
/// the reverse, is the usual cause).
enum PINErrors {
    static func naming<T>(_ which: String, of token: TokenRecord, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch KeychainError.pinIncorrect(let remaining) {
            throw CLIError("incorrect \(which) for token \(token.label) (\(remaining) attempt\(remaining == 1 ? "" : "s") left before it locks)")
        } catch KeychainError.pinLocked {
            let fix = which == "SO PIN" ? "it cannot be unlocked; the token's items stay usable with the user PIN"
                                        : "the security officer must set a new one (keyshare token init-pin)"
            throw CLIError("the \(which) of token \(token.label) is locked after too many failed attempts; \(fix)")
        }
    }
}

struct TokenRow: Encodable {
    var tokenID: String
    var label: String
    var serial: String
    var slotID: UInt
    var items: Int
    var present: Bool
    var userPIN: String
    var uri: String
    /// soft, soft (bound to TPM[, PCRs]), tpm or external.
    var kind = ""
    /// present, removed, or `unreachable` (below).
    var state: String

    /// An external token the store lists as present whose driver, loaded by
    /// this process with its stored variables, does not show it: a login
    /// through the module would fail too (CKR_TOKEN_NOT_PRESENT, logged).
    static let unreachable = "unreachable by driver"

    /// Only when this process polled the token's driver successfully (no
    /// designated watcher ran, whose view is then the one recorded).
    static func state(_ r: TokenRecord, drivers: DriverPoller?) -> String {
        guard r.present else { return "removed" }
        guard let name = ExternalDriver.driverName(r.tokenID), let seen = drivers?.seen(driver: name) else { return "present" }
        return seen.contains(r.tokenID) ? "present" : unreachable
    }

    static func kind(_ r: TokenRecord, _ store: KeychainStore) throws -> String {
        if store.isTPMToken(r) { return "tpm" }
        if !r.hasPINs { return "external" }
        guard let pcrs = try store.tokenBindingPCRs(r.tokenID) else { return "soft" }
        return pcrs.isEmpty ? "soft, bound to TPM" : "soft, bound to TPM PCRs " + pcrs.map(String.init).joined(separator: ",")
    }

    init(_ r: TokenRecord, itemCount: Int) {
        tokenID = r.tokenID.description
        label = r.label
        serial = r.serial
        slotID = r.slotID
        items = itemCount
        present = r.present
        state = r.present ? "present" : "removed"
        userPIN = !r.hasPINs ? "-" : r.userPINLocked ? "locked" : (r.userPINInitialized ? (r.userPINFailures > 0 ? "\(r.userPINFailures) failed" : "ok") : "not set")
        uri = PKCS11URI.token(r)
    }
}
