import ArgumentParser
import FoundationEssentials
import Glibc
import Keychain
import KeyshareCrypto
import Tokens

/// `keyshare token remove/insert/watch`: tokens that come and go.
extension TokenCommand {
    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Take a soft token out without destroying it (its items stay, invisible, until `token insert`).")
        @Argument(help: "The token's label, serial or token ID.", completion: StoreCompletion.tokens) var token: String
        @OptionGroup var output: JSONOption

        func run() throws {
            let ctx = try Context.open(syncDrivers: false)
            let record = try ctx.tokens.resolveToken(token)
            guard SoftToken.isSoft(record.tokenID) else {
                throw CLIError("\(record.tokenID) is an external token: remove the card (or `keyshare driver remove`)")
            }
            try ctx.tokens.removeToken(record.tokenID)
            try Console.report(output.json,
                               "removed token \(record.tokenID) (slot \(record.slotID)); `keyshare token insert \(record.tokenID)` puts it back",
                               ["removed": .string(record.tokenID.description), "label": .string(record.label), "slotID": .int(Int(record.slotID))])
        }
    }

    struct Insert: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Put a removed soft token back (same token ID, slot ID and references).")
        @Argument(help: "The token's label, serial or token ID.", completion: StoreCompletion.tokens) var token: String
        @OptionGroup var output: JSONOption

        func run() throws {
            let ctx = try Context.open(syncDrivers: false)
            let record = try ctx.tokens.resolveToken(token, includeAbsent: true)
            guard SoftToken.isSoft(record.tokenID) else {
                throw CLIError("\(record.tokenID) is an external token: insert the card")
            }
            let fields: [String: JSONField] = ["inserted": .string(record.tokenID.description), "label": .string(record.label),
                                               "slotID": .int(Int(record.slotID)), "alreadyPresent": .bool(record.present)]
            if record.present { return try Console.report(output.json, "token \(record.tokenID) is already present", fields) }
            try ctx.tokens.insertToken(record.tokenID)
            try Console.report(output.json, "inserted token \(record.tokenID) (slot \(record.slotID))", fields)
        }
    }

    struct Watch: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print `inserted <token ID>` / `removed <token ID>` as tokens come and go, starting with those present.")
        @Flag(help: "One JSON object per line: event, token ID, label, slot ID, kind (soft / external) and the token's public items added or removed, each with reference and URI.")
        var json = false
        @Option(help: "Seconds between polls of the store.") var interval: Double = 0.1
        @Option(name: .customLong("driver-interval"), help: "Seconds between polls of external PKCS #11 modules.")
        var driverInterval: Double = 0.5
        @Option(name: .customLong("driver-events"),
                help: "auto: a module's blocking C_WaitForSlotEvent where it has one (OpenSC), else polling; poll: always poll.")
        var driverEvents: String = DriverEventMode.auto.rawValue

        func run() throws {
            guard interval > 0, driverInterval > 0 else { throw CLIError("intervals must be positive") }
            guard let events = DriverEventMode(rawValue: driverEvents) else { throw CLIError("--driver-events is auto or poll") }
            let ctx = try Context.open(syncDrivers: false)
            // This watcher is the one that decides card presence, unless
            // another already does (docs/architecture.md).
            let owner = PresenceOwner(store: ctx.store)
            let poller = Drivers.poller(ctx.store, owner: owner)
            if try !ctx.store.drivers().isEmpty {
                // Mirror cards present now, so the first listing includes them.
                for f in poller.pollAll() { Console.error("driver \(f.driver) failed: \(f.reason)") }
            }
            let watcher = TokenWatcher(store: ctx.store, interval: interval, drivers: poller,
                                       driverInterval: driverInterval, driverEvents: events)
            let json = self.json
            let store = ctx.store
            let seen = SeenTokens()
            watcher.driverFailureHandler = { name, reason in Console.error("driver \(name) failed: \(reason)") }
            watcher.driverModeHandler = { name, mode in
                Console.error(mode == "wait" ? "driver \(name): card events from the module (C_WaitForSlotEvent)"
                                             : "driver \(name): polling the module for cards")
            }
            @Sendable func emit(_ event: String, _ id: TokenID) {
                guard json else { return Console.out("\(event) \(id)") }
                // A removed token's record and items may be gone (a card's are
                // withdrawn): the removal repeats what its insertion listed.
                let row: TokenEventRow
                if event == "inserted", let record = try? store.token(id), let r = try? TokenEventRow(event: event, record, store: store) {
                    row = r
                    seen.remember(r)
                } else if let earlier = seen.take(id) {
                    row = earlier.as(event)
                } else {
                    row = TokenEventRow(event: event, tokenID: id)
                }
                if let line = try? Console.jsonLine(row) { Console.out(line) }
            }
            watcher.setInsertionHandler { [weak watcher] id in
                emit("inserted", id)
                watcher?.addRemovalHandler({ emit("removed", $0) }, forTokenID: id)
            }
            watcher.start()
            signal(SIGPIPE, SIG_DFL)
            while true { pause() }
        }
    }
}

/// One `token watch --json` line (also `driver add --json`'s tokens).
struct TokenEventRow: Encodable {
    var event: String
    var tokenID: String
    var label: String
    var slotID: UInt?
    var serial: String
    /// soft (a keyshare token) or external (a card or module behind a driver).
    var kind: String
    var uri: String
    /// The token's public items (certificates, public keys; private ones need the PIN).
    var items: [ItemRow]

    init(event: String, _ r: TokenRecord, store: KeychainStore) throws {
        self.event = event
        tokenID = r.tokenID.description
        label = r.label
        slotID = r.slotID
        serial = r.serial
        kind = TokenEventRow.kind(r.tokenID)
        uri = PKCS11URI.token(r)
        items = try store.find(ItemQuery(tokenID: r.tokenID, limit: .all), key: nil).map { ItemRow($0, token: r) }
    }

    /// A token removed before it was ever listed: only its ID is known.
    init(event: String, tokenID id: TokenID) {
        self.event = event
        tokenID = id.description
        label = ""
        slotID = nil
        serial = ""
        kind = TokenEventRow.kind(id)
        uri = ""
        items = []
    }

    static func kind(_ id: TokenID) -> String { SoftToken.isSoft(id) ? "soft" : "external" }

    func `as`(_ event: String) -> TokenEventRow {
        var r = self
        r.event = event
        return r
    }
}

/// What each present token held when it was listed, so its removal can say
/// which items went with it.
final class SeenTokens: @unchecked Sendable {
    private let lock = Lock()
    private var rows: [String: TokenEventRow] = [:]

    func remember(_ r: TokenEventRow) { lock.withLock { rows[r.tokenID] = r } }
    func take(_ id: TokenID) -> TokenEventRow? { lock.withLock { rows.removeValue(forKey: id.description) } }
}
