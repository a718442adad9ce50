import ArgumentParser
import Foundation
import Keychain
import Tokens

/// `keyshare driver`: other PKCS #11 modules (OpenSC for smart cards,
/// SoftHSM2) whose tokens keyshare mirrors while they are present.
struct DriverCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "driver",
        abstract: "Configure other PKCS #11 modules whose tokens appear in the keychain (smart cards).",
        subcommands: [Add.self, List.self, Remove.self, Snapshot.self, Events.self])

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a PKCS #11 module; its tokens appear as pkcs11.<name>:<serial>.")
        @Option(help: "Path of the PKCS #11 module (.so).") var module: String
        @Option(help: "Driver name (default: from the file name, e.g. softhsm2).") var name: String?
        @Flag(help: "JSON output: the driver and the tokens and items that appeared, with references and URIs.") var json = false

        func run() throws {
            let path = (module as NSString).standardizingPath
            let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
            guard FileManager.default.fileExists(atPath: absolute) else { throw CLIError("no such module: \(module)") }
            let driverName = name ?? ExternalDriver.defaultName(modulePath: absolute)
            guard ExternalDriver.validName(driverName) else {
                throw CLIError("a driver name is 1 to 64 letters, digits, '-', '_' or '.'")
            }
            let ctx = try Context.open()
            if try ctx.store.drivers().contains(where: { $0.name == driverName }) {
                throw CLIError("a driver named \(driverName) already exists (remove it first or give --name)")
            }
            // Load it in a child first: a file that is not a PKCS #11 module, or
            // one that crashes or hangs, is refused here with the reason.
            let poller = Drivers.poller(ctx.store)
            let snapshot: DriverSnapshot
            do {
                snapshot = try poller.snapshot(modulePath: absolute)
            } catch {
                throw CLIError("\(module) cannot be used as a PKCS #11 module: \(error)")
            }
            try ctx.store.addDriver(name: driverName, modulePath: absolute)
            try ctx.store.setDriverHelper(Drivers.executable)
            // Recorded by the presence rule (a running watcher records them itself).
            try poller.apply(snapshot, driver: driverName)
            let present = ExternalDriver.presentTokens(snapshot, driver: driverName).keys.sorted()
            if json {
                struct Added: Encodable { var driver, module, driverClass: String; var tokens: [TokenEventRow] }
                let rows = try present.compactMap { try ctx.store.token($0) }.map { try TokenEventRow(event: "inserted", $0, store: ctx.store) }
                return try Console.json(["added": Added(driver: driverName, module: absolute,
                                                        driverClass: ExternalDriver.driverClass(driverName), tokens: rows)])
            }
            Console.out("added driver \(driverName) (\(absolute)): \(snapshot.tokens.count) token(s) present"
                + (present.isEmpty ? "" : ": " + present.map(\.description).joined(separator: ", ")))
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List configured PKCS #11 modules and their state.")
        @Flag(help: "JSON output.") var json = false

        struct Row: Encodable { var name: String; var module: String; var driverClass: String; var status: String; var tokens: [String] }

        func run() throws {
            let ctx = try Context.open()
            let tokens = try ctx.store.tokens().filter(\.present)
            let rows = try ctx.store.drivers().map { d in
                Row(name: d.name, module: d.modulePath, driverClass: ExternalDriver.driverClass(d.name),
                    status: d.status.isEmpty ? "ok" : d.status,
                    tokens: tokens.filter { $0.tokenID.driverClass == ExternalDriver.driverClass(d.name) }.map(\.tokenID.description))
            }
            if json { return try Console.json(rows) }
            if rows.isEmpty { return Console.out("no drivers (add one with: keyshare driver add --module PATH)") }
            Console.table(["NAME", "MODULE", "STATUS", "TOKENS"],
                          rows.map { [$0.name, $0.module, $0.status, $0.tokens.isEmpty ? "-" : $0.tokens.joined(separator: " ")] })
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a PKCS #11 module; its tokens' items leave the keychain.")
        @Argument(help: "The driver's name.") var name: String

        func run() throws {
            let ctx = try Context.open(syncDrivers: false)
            guard try ctx.store.drivers().contains(where: { $0.name == name }) else { throw CLIError("no driver named \(name)") }
            try ctx.store.removeDriver(name: name)
            try ExternalDriver.withdrawAll(driver: name, store: ctx.store)
            Console.out("removed driver \(name)")
        }
    }

    /// Internal: run by keyshare itself in a child process to read a module,
    /// so a module that crashes or hangs never takes the caller with it.
    struct Snapshot: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print what a module shows (internal).", shouldDisplay: false)
        @Option var module: String

        func run() throws {
            do {
                let snap = try DriverSnapshot.probe(modulePath: module)
                FileHandle.standardOutput.write(Data(snap.serialized().utf8))
            } catch {
                Console.out("\(error)")
                throw CLIExit(code: 1)
            }
        }
    }

    /// Internal: run by `keyshare token watch` in a child process, one per
    /// module, for as long as the watcher runs: writes a snapshot whenever the
    /// module's cards change, found through its blocking C_WaitForSlotEvent
    /// where it has one, else by polling (DriverEventSource).
    struct Events: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Watch a module's cards (internal).", shouldDisplay: false)
        @Option var module: String
        @Option var interval: Double = 0.5
        @Option var mode: String = DriverEventMode.auto.rawValue

        func run() throws {
            guard interval > 0, let mode = DriverEventMode(rawValue: mode) else { throw CLIError("bad --interval or --mode") }
            // The watcher reading our output is gone: stop (a write then fails).
            signal(SIGPIPE, SIG_DFL)
            do {
                try DriverEventSource.run(modulePath: module, interval: interval, mode: mode) { line in
                    let data = Data((line.hasSuffix("\n") ? line : line + "\n").utf8)
                    do { try FileHandle.standardOutput.write(contentsOf: data) } catch { return false }
                    return true
                }
            } catch {
                print("FAIL \(error)")
                throw CLIExit(code: 1)
            }
        }
    }
}

/// How the CLI polls external modules: in a child process running this
/// same executable (`driver snapshot`).
enum Drivers {
    static var executable: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    /// `owner`: the designated watcher's poller (`token watch`), which
    /// records presence alone while it runs (docs/architecture.md).
    static func poller(_ store: KeychainStore, owner: PresenceOwner? = nil) -> DriverPoller {
        let exe = executable
        let timeout = ProcessInfo.processInfo.environment["KEYSHARE_DRIVER_TIMEOUT"].flatMap(Double.init) ?? 5
        return DriverPoller(store: store, isolation: .childProcess(executable: exe), timeout: timeout, owner: owner)
    }

    /// Brings the keychain up to date with the cards present now, so a
    /// command sees a card inserted while no watcher ran. Costs nothing
    /// when no driver is configured.
    static func sync(_ store: KeychainStore) {
        guard let drivers = try? store.drivers(), !drivers.isEmpty else { return }
        for f in poller(store).pollAll() {
            Console.error("driver \(f.driver) failed: \(f.reason)")
        }
    }
}
