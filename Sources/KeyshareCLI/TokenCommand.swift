import ArgumentParser
import FoundationEssentials
import Glibc
import Keychain
import Tokens

struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Create, list, delete, remove, insert and watch tokens and manage their PINs.",
        subcommands: [Create.self, List.self, Delete.self, SetPIN.self, InitPIN.self, Remove.self, Insert.self, Watch.self,
                      Bind.self, Unbind.self, TPMConfig.self, Settings.self])

    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a soft token with a user PIN and an SO PIN.", discussion: PINPolicy.rule)
        @Option(help: "The token's label (at most 32 bytes).") var label: String
        @Option(name: .customLong("so-pin-source"),
                help: "Where the SO PIN comes from (env:VAR or file:PATH; \(PINPolicy.range) bytes); prompted if absent.")
        var soPinSource: SecretSource?
        @OptionGroup var pin: PINOptions
        @Flag(help: "A TPM token: its keys are created in the TPM and never leave it, and the TPM limits PIN guesses.")
        var tpm = false
        @Option(help: "Seal the soft token to this machine's TPM: --bind tpm (see keyshare-token-bind(1)).") var bind: String?
        @Option(help: "With --bind tpm: also seal to these SHA-256 PCRs' current values (comma-separated, e.g. 7).")
        var pcrs: String?
        @Flag(name: .customLong("no-bind"),
              help: "Do not seal the soft token to the TPM, which is done by default when one is usable (a copy of the store can then be guessed at offline).")
        var noBind = false
        @OptionGroup var shortPIN: ShortPINOption
        @Option(help: "Whether the agent asks before a program uses the token's keys (ask|off; default: ask when both PINs are typed at the prompt, off when they come from sources; see keyshare-agent(1), Consent).")
        var consent: TokenConsent?
        @Flag(help: "Print the new token as JSON.") var json = false

        func run() throws {
            guard !label.isEmpty, label.utf8.count <= 32 else { throw CLIError("a token label must be 1 to 32 bytes") }
            if let bind, bind != "tpm" { throw CLIError("--bind takes tpm (the only device a token can be bound to)") }
            if tpm && bind != nil { throw CLIError("--tpm and --bind are exclusive: a TPM token's keys are in the TPM already") }
            if pcrs != nil && bind == nil { throw CLIError("--pcrs needs --bind tpm") }
            if noBind && (tpm || bind != nil) { throw CLIError("--no-bind excludes --tpm and --bind") }
            var pcrList = try bind == nil ? nil : TokenCommand.parsePCRs(pcrs)
            let ctx = try Context.open()
            try TokenCommand.checkLabelFree(label, ctx.store)
            // Sealed to the TPM by default when one is usable (TPMPresence).
            var sealedByDefault: String?
            var unsealedByChoice = false
            if !tpm && bind == nil {
                switch TPMPresence.probe(ctx.store) {
                case .usable(let tcti):
                    if noBind { unsealedByChoice = true } else { sealedByDefault = tcti; pcrList = [] }
                case .unusable(let note): Console.error("note: " + note)
                case .absent: break
                }
            }
            let so = try Secrets.obtain(soPinSource, prompt: "New SO PIN: ", what: "SO PIN", confirm: true)
            let user = try Secrets.obtain(pin.pinSource, prompt: "New user PIN: ", what: "user PIN", confirm: true)
            let guarded = tpm || pcrList != nil
            try PINPolicy.checkNew(so, what: "SO PIN", guarded: guarded, shortPIN: shortPIN.shortPIN)
            try PINPolicy.checkNew(user, what: "user PIN", guarded: guarded, shortPIN: shortPIN.shortPIN)
            if unsealedByChoice {
                let n = String(decoding: user, as: UTF8.self).count
                Console.error("warning: token \(label) is not sealed to this machine's TPM (--no-bind): whoever copies the store "
                    + "can guess its PIN offline at about 97 ms a guess on one core (every \(n)-digit PIN in "
                    + "\(PINPolicy.duration(pow(10, Double(n))))), past the attempt counter")
            }
            // A person at the prompt gets a token that asks (consent on); a script
            // (PINs from sources: `make demo`, the tests, provisioning) one that does not.
            let asks = consent ?? (soPinSource == nil && pin.pinSource == nil ? .ask : .off)
            let record: TokenRecord
            do {
                record = tpm ? try ctx.tokens.createTPMToken(label: label, soPIN: so, userPIN: user, consent: asks)
                    : try ctx.tokens.createSoftToken(label: label, soPIN: so, userPIN: user, bindPCRs: pcrList, consent: asks)
            } catch where sealedByDefault != nil {
                throw CLIError("\(ErrorText.describe(error)) (a new soft token is sealed to the TPM at \(sealedByDefault!) by default; "
                    + "--no-bind creates it unsealed)")
            }
            if json {
                try Console.json(TokenRow(record, itemCount: 0))
            } else {
                Console.out("created token \(record.tokenID) (label \(record.label), slot \(record.slotID), consent \(record.consent.rawValue))"
                    + (sealedByDefault.map { ", sealed to the TPM at \($0) (--no-bind to opt out)" } ?? ""))
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
                ["TOKEN ID", "LABEL", "KIND", "SERIAL", "SLOT", "ITEMS", "STATE", "USER PIN", "CONSENT"],
                rows.map { [$0.tokenID, $0.label, $0.kind, $0.serial, String($0.slotID), String($0.items), $0.state, $0.userPIN,
                            $0.consent] })
            if rows.contains(where: { $0.state == TokenRow.unreachable }) {
                Console.error("note: a token \(TokenRow.unreachable) is listed present (another process mirrored it) but its driver, "
                    + "loaded with the variables stored with it, does not show it: check them with keyshare driver list "
                    + "and set them with keyshare driver set-env NAME --env VAR=VALUE")
            }
        }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a token and every item in it (needs the SO PIN).")
        @Argument(help: "The token's label or token ID.", completion: StoreCompletion.tokens) var token: String
        @Option(name: .customLong("so-pin-source"), help: "Where the SO PIN comes from (env:VAR or file:PATH).")
        var soPinSource: SecretSource?
        @OptionGroup var output: JSONOption

        func run() throws {
            let ctx = try Context.open()
            let record = try ctx.tokens.resolveToken(token)
            let so = try Secrets.pin(soPinSource, prompt: "SO PIN for \(record.label): ", what: "SO PIN")
            _ = try PINErrors.naming("SO PIN", of: record) { try ctx.store.unlockSO(record.tokenID, pin: so) }
            try ctx.store.deleteToken(record.tokenID)
            try Console.report(output.json, "deleted token \(record.tokenID)",
                               ["deleted": .string(record.tokenID.description), "label": .string(record.label)])
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
        @OptionGroup var shortPIN: ShortPINOption
        @OptionGroup var output: JSONOption

        func run() throws {
            let ctx = try Context.open()
            let record = try ctx.token(selection)
            let who = so ? "SO PIN" : "user PIN"
            let old = try Secrets.pin(pinSource, prompt: "Current \(who): ", what: who)
            let new = try Secrets.obtain(newPinSource, prompt: "New \(who): ", what: "new " + who, confirm: true)
            try PINPolicy.checkNew(new, what: "new " + who, guarded: try PINPolicy.guarded(record, ctx.store), shortPIN: shortPIN.shortPIN)
            try PINErrors.naming(who, of: record) {
                if so {
                    try ctx.store.changeSOPIN(record.tokenID, old: old, new: new)
                } else {
                    try ctx.store.changeUserPIN(record.tokenID, old: old, new: new)
                }
            }
            try Console.report(output.json, "\(who) of \(record.label) changed",
                               ["changed": .string(so ? "so-pin" : "user-pin"), "token": .string(record.label),
                                "tokenID": .string(record.tokenID.description)])
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
        @OptionGroup var shortPIN: ShortPINOption
        @OptionGroup var output: JSONOption

        func run() throws {
            let ctx = try Context.open()
            let record = try ctx.token(selection)
            let so = try Secrets.pin(soPinSource, prompt: "SO PIN for \(record.label): ", what: "SO PIN")
            let soKey = try PINErrors.naming("SO PIN", of: record) { try ctx.store.unlockSO(record.tokenID, pin: so) }
            let new = try Secrets.obtain(newPinSource, prompt: "New user PIN: ", what: "new user PIN", confirm: true)
            try PINPolicy.checkNew(new, what: "new user PIN", guarded: try PINPolicy.guarded(record, ctx.store), shortPIN: shortPIN.shortPIN)
            try ctx.store.initUserPIN(record.tokenID, soKey: soKey, newPIN: new)
            try Console.report(output.json, "user PIN of \(record.label) set",
                               ["set": "user-pin", "token": .string(record.label), "tokenID": .string(record.tokenID.description)])
        }
    }
}

extension TokenCommand {
    /// Labels are how people name tokens (`--token work`, pkcs11: URIs), so
    /// the CLI refuses a second token with a label already used, removed
    /// tokens included (they come back with `token insert`). C_InitToken
    /// does not refuse: PKCS #11 lets two tokens share a label (slots tell
    /// them apart) and an application that re-initialises must not fail on it.
    static func checkLabelFree(_ label: String, _ store: KeychainStore) throws {
        if let other = try store.tokens().first(where: { $0.label == label }) {
            throw CLIError("a token labelled \(label) exists already (\(other.tokenID)\(other.present ? "" : ", removed")); "
                           + "labels select tokens (--token), so each must be unique: choose another")
        }
    }

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
            abstract: "Seal a soft token to this machine's TPM (needs the SO PIN and the user PIN).",
            discussion: """
                A random secret is sealed in the TPM (optionally to the current values of some SHA-256 PCRs) and \
                each PIN wrap of the token key depends on it, so a copy of the store cannot be opened, nor its PINs \
                guessed, without this TPM. On another machine, after the TPM is cleared, or with a PCR changed, \
                the token refuses with one clear error before any PIN is counted. The PIN stays the store's to check \
                and count; a PIN change keeps the binding. keyshare token unbind undoes it. A TPM token \
                (keyshare token create --tpm) goes further: its keys are made in the TPM and the TPM checks the PIN.
                """)
        @OptionGroup var selection: TokenSelection
        @Flag(help: "Bind to the TPM (the only device a token can be bound to).") var tpm = false
        @Option(help: "Also seal to these SHA-256 PCRs' current values (comma-separated, e.g. 7).") var pcrs: String?
        @Option(name: .customLong("so-pin-source"), help: "Where the SO PIN comes from.") var soPinSource: SecretSource?
        @OptionGroup var pin: PINOptions
        @OptionGroup var output: JSONOption

        func run() throws {
            guard tpm else { throw CLIError("say what to bind to: keyshare token bind --tpm") }
            let list = try TokenCommand.parsePCRs(pcrs)
            let record = try TokenCommand.setBinding(selection, soPinSource, pin, pcrs: list)
            try Console.report(output.json,
                               "token bound to this machine's TPM" + (list.isEmpty ? "" : " and PCRs " + list.map(String.init).joined(separator: ",")),
                               ["token": .string(record.label), "bound": true, "pcrs": .ints(list)])
        }
    }

    struct Unbind: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Undo token bind: the token opens with its PINs alone again (needs the SO PIN and the user PIN).")
        @OptionGroup var selection: TokenSelection
        @Option(name: .customLong("so-pin-source"), help: "Where the SO PIN comes from.") var soPinSource: SecretSource?
        @OptionGroup var pin: PINOptions
        @OptionGroup var output: JSONOption

        func run() throws {
            let record = try TokenCommand.setBinding(selection, soPinSource, pin, pcrs: nil)
            try Console.report(output.json, "token no longer bound to a TPM", ["token": .string(record.label), "bound": false])
        }
    }

    @discardableResult
    static func setBinding(_ selection: TokenSelection, _ soSource: SecretSource?, _ pin: PINOptions, pcrs: [Int]?) throws -> TokenRecord {
        let ctx = try Context.open()
        let record = try ctx.token(selection)
        guard SoftToken.isSoft(record.tokenID) else { throw CLIError("token \(record.label) is not a keyshare soft token") }
        let bound = try ctx.store.tokenBindingPCRs(record.tokenID) != nil
        if pcrs == nil && !bound { throw CLIError("token \(record.label) is not bound to a TPM") }
        let so = try Secrets.pin(soSource, prompt: "SO PIN for \(record.label): ", what: "SO PIN")
        let user = record.userPINInitialized
            ? try Secrets.pin(pin.pinSource, prompt: "User PIN for \(record.label): ", what: "user PIN") : nil
        try PINErrors.naming("PIN", of: record) {
            try ctx.store.setTokenBinding(record.tokenID, soPIN: so, userPIN: user, pcrs: pcrs)
        }
        return record
    }

    /// A token's settings: whether the agent asks before its keys are used.
    struct Settings: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Change a token's settings: --consent ask|off (the agent asks before a program's first use of each key).",
            discussion: "With ask, a program with no allow rule for the token (keyshare policy allow) is asked about through the agent's prompt (pinentry) at its first use of each private key: Deny, Allow once (for that process), Always allow (an allow rule). Applies at once, to programs already running too.")
        @Argument(help: "The token's label or token ID (needed when there is more than one token).", completion: StoreCompletion.tokens)
        var token: String?
        @Option(help: "ask or off.") var consent: TokenConsent
        @OptionGroup var output: JSONOption

        func run() throws {
            let ctx = try Context.open()
            let record = try ctx.tokens.resolveToken(token)
            try ctx.store.setConsent(record.tokenID, consent)
            try Console.report(output.json, "token \(record.label): consent \(consent.rawValue)",
                               ["token": .string(record.label), "tokenID": .string(record.tokenID.description),
                                "consent": .string(consent.rawValue)])
        }
    }

    /// Where the TPM is, for this store: KEYSHARE_TCTI overrides it.
    struct TPMConfig: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "tpm-config", abstract: "Show or set the TPM this store uses (a tpm2-tss TCTI string).")
        @Option(help: "The TCTI, e.g. device:/dev/tpmrm0 or swtpm:host=127.0.0.1,port=2321; empty to clear.") var tcti: String?
        @OptionGroup var output: JSONOption

        func run() throws {
            let ctx = try Context.open()
            if let tcti { try ctx.store.setConfiguredTCTI(tcti) }
            let current = ctx.store.tpmTCTI()
            try Console.report(output.json, "TPM: \(current)", ["tcti": .string("\(current)")])
        }
    }
}

/// PKCS #11 puts PIN length bounds in the token info (ulMinPinLen 4,
/// ulMaxPinLen 255 in Sources/PKCS11/SlotToken.swift, which C_InitToken,
/// C_InitPIN and C_SetPIN enforce); the CLI enforces the same bounds, so a PIN
/// set through either works through the other. Lengths are bytes (UTF-8), as
/// PKCS #11 counts them. 10-cli.sh checks these against pkcs11-tool -L.
///
/// On top, for a new PIN the CLI sets (issue 28): a soft token's PIN is only
/// as strong as the guesses it takes, and whoever copies the store guesses
/// offline, past the attempt counter, at the cost of one scrypt each (about
/// 97 ms on one core). So without a TPM between the PIN and the key (a TPM
/// token, or a soft token bound with --bind tpm), a new PIN of fewer than 6
/// characters (PIV's minimum) is refused unless --short-pin accepts the risk,
/// and one of fewer than 8 gets a warning. 88-cli-adoption.sh checks both.
enum PINPolicy {
    static let minLength = 4
    static let maxLength = 255
    static let range = "\(minLength) to \(maxLength)"
    /// The fewest characters of a new PIN without a TPM, unless --short-pin.
    static let shortest = 6
    /// Below this a new PIN without a TPM gets a warning.
    static let advised = 8
    /// One offline guess: one scrypt of the store's PIN KDF on one core (issue 28's measurement).
    static let secondsPerGuess = 0.097
    static let rule = """
        New PINs are \(minLength) to \(maxLength) bytes (UTF-8), the bounds the PKCS #11 module reports. \
        A new soft token is sealed to the TPM when one is usable (--no-bind opts out, with a warning). \
        Without a TPM (a soft token not sealed to one), a new PIN of fewer than \(shortest) characters \
        is refused unless --short-pin is given, and one of fewer than \(advised) draws a warning: whoever copies \
        the store can guess offline, past the attempt counter, at about 97 ms a guess on one core, so every \
        4-digit PIN falls in \(duration(1e4)), every 6-digit one in \(duration(1e6)), every 8-digit one in \(duration(1e8)). \
        With a TPM token (--tpm) or a bound one, the TPM must take part in every guess.
        """

    static func check(_ pin: [UInt8], what: String) throws {
        guard (minLength...maxLength).contains(pin.count) else {
            throw CLIError("\(what) must be \(minLength) to \(maxLength) bytes (it has \(pin.count))")
        }
    }

    /// The bounds, then the offline-guessing rule unless `guarded` (a TPM
    /// takes part in every guess, or the token is a card with its own counter).
    static func checkNew(_ pin: [UInt8], what: String, guarded: Bool, shortPIN: Bool) throws {
        try check(pin, what: what)
        guard !guarded else { return }
        let n = String(decoding: pin, as: UTF8.self).count
        guard n < advised else { return }
        let odds = "with a copy of the store every \(n)-digit PIN is tried in \(duration(pow(10, Double(n)))) on one core"
        if n < shortest && !shortPIN {
            throw CLIError("the \(what) has \(n) characters: without a TPM a PIN needs at least \(shortest) (\(odds)); "
                           + "give --short-pin to accept that, or use --bind tpm")
        }
        Console.error("warning: the \(what) has \(n) characters: \(odds); \(advised) or more characters, or a TPM (--bind tpm), make that impractical")
    }

    /// Whether a TPM or a card stands between a PIN and the token's key.
    static func guarded(_ record: TokenRecord, _ store: KeychainStore) throws -> Bool {
        if !record.hasPINs || store.isTPMToken(record) { return true }
        return try store.tokenBindingPCRs(record.tokenID) != nil
    }

    /// Roughly how long `guesses` offline guesses take on one core.
    static func duration(_ guesses: Double) -> String {
        let s = guesses * secondsPerGuess
        guard s.isFinite, s < 1e6 * 365 * 86400 else { return "more than a million years" }
        func fmt(_ v: Double, _ unit: String) -> String {
            let r = v < 10 ? (v * 10).rounded() / 10 : v.rounded()
            let text = r == r.rounded() ? String(Int(r)) : String(r)
            return "about \(text) \(unit)\(r == 1 ? "" : "s")"
        }
        if s < 120 { return fmt(s, "second") }
        if s < 2 * 3600 { return fmt(s / 60, "minute") }
        if s < 2 * 86400 { return fmt(s / 3600, "hour") }
        if s < 2 * 365 * 86400 { return fmt(s / 86400, "day") }
        return fmt(s / (365 * 86400), "year")
    }
}

/// `--short-pin`: the user accepts a new PIN of 4 or 5 characters without a TPM.
struct ShortPINOption: ParsableArguments {
    @Flag(name: .customLong("short-pin"),
          help: "Accept a new PIN of fewer than \(PINPolicy.shortest) characters on a token without a TPM (offline guessing takes minutes).")
    var shortPIN = false
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
    /// ask or off (docs/agent.md, "Consent").
    var consent: String

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
        consent = r.consent.rawValue
    }
}

extension TokenConsent: ExpressibleByArgument {}
