import ArgumentParser
import FoundationEssentials
import Glibc
import Keychain
import Tokens

/// `keyshare driver`: other PKCS #11 modules (OpenSC for smart cards,
/// SoftHSM2) whose tokens keyshare mirrors while they are present.
struct DriverCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "driver",
        abstract: "Configure other PKCS #11 modules whose tokens appear in the keychain (smart cards).",
        discussion: Drivers.environmentRule,
        subcommands: [Add.self, List.self, SetEnv.self, Remove.self, Snapshot.self, Events.self])

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a PKCS #11 module; its tokens appear as pkcs11.<name>:<serial>.", discussion: Drivers.environmentRule)
        @Option(help: "Path of the PKCS #11 module (.so).") var module: String
        @Option(help: "Driver name (default: from the file name, e.g. softhsm2).") var name: String?
        @Option(name: .customLong("env"), help: ArgumentHelp(
            "A variable the module reads its configuration from, e.g. SOFTHSM2_CONF=/path (repeatable; shown by driver list).",
            valueName: "NAME=VALUE"))
        var env: [String] = []
        @Flag(help: "JSON output: the driver and the tokens and items that appeared, with references and URIs.") var json = false

        func run() throws {
            let path = PathString.standardized(module)
            let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
            guard FileManager.default.fileExists(atPath: absolute) else { throw CLIError("no such module: \(module)") }
            let driverName = name ?? ExternalDriver.defaultName(modulePath: absolute)
            guard ExternalDriver.validName(driverName) else {
                throw CLIError("a driver name is 1 to 64 letters, digits, '-', '_' or '.'")
            }
            let environment = try Drivers.parseEnvironment(env)
            let ctx = try Context.open()
            let existing = try ctx.store.drivers()
            if existing.contains(where: { $0.name == driverName }) {
                throw CLIError("a driver named \(driverName) already exists (remove it first or give --name)")
            }
            try Drivers.checkShared(module: absolute, environment: environment, except: driverName, existing)
            // Load it in a child first, as every process will (with these
            // variables only): a file that is not a PKCS #11 module, or one
            // that crashes or hangs, is refused here with the reason.
            let poller = Drivers.poller(ctx.store)
            let snapshot: DriverSnapshot
            do {
                snapshot = try poller.snapshot(modulePath: absolute, environment: environment)
            } catch {
                throw CLIError("\(module) cannot be used as a PKCS #11 module: \(error)")
            }
            Drivers.noteUnstored(environment, module: absolute)
            try ctx.store.addDriver(name: driverName, modulePath: absolute, environment: environment)
            try ctx.store.setDriverHelper(Drivers.executable)
            // Recorded by the presence rule (a running watcher records them itself).
            try poller.apply(snapshot, driver: driverName)
            let present = ExternalDriver.presentTokens(snapshot, driver: driverName).keys.sorted()
            if json {
                struct Added: Encodable {
                    var driver, module, driverClass: String; var environment: [String: String]; var tokens: [TokenEventRow]
                }
                let rows = try present.compactMap { try ctx.store.token($0) }.map { try TokenEventRow(event: "inserted", $0, store: ctx.store) }
                return try Console.json(["added": Added(driver: driverName, module: absolute, driverClass: ExternalDriver.driverClass(driverName),
                                                        environment: environment, tokens: rows)])
            }
            Console.out("added driver \(driverName) (\(absolute)): \(snapshot.tokens.count) token(s) present"
                + (present.isEmpty ? "" : ": " + present.map(\.description).joined(separator: ", ")))
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List configured PKCS #11 modules and their state.")
        @Flag(help: "JSON output.") var json = false

        struct Row: Encodable {
            var name: String; var module: String; var driverClass: String; var status: String; var tokens: [String]
            /// The variables stored with the driver (configuration, not secrets).
            var environment: [String: String]
        }

        func run() throws {
            let ctx = try Context.open()
            let tokens = try ctx.store.tokens().filter(\.present)
            let rows = try ctx.store.drivers().map { d in
                Row(name: d.name, module: d.modulePath, driverClass: ExternalDriver.driverClass(d.name),
                    status: d.status.isEmpty ? "ok" : d.status,
                    tokens: tokens.filter { $0.tokenID.driverClass == ExternalDriver.driverClass(d.name) }.map(\.tokenID.description),
                    environment: d.environment)
            }
            if json { return try Console.json(rows) }
            if rows.isEmpty { return Console.out("no drivers (add one with: keyshare driver add --module PATH)") }
            Console.table(["NAME", "MODULE", "STATUS", "ENV", "TOKENS"],
                          rows.map { [$0.name, $0.module, $0.status, Drivers.describe($0.environment),
                                      $0.tokens.isEmpty ? "-" : $0.tokens.joined(separator: " ")] })
        }
    }

    /// Replaces a driver's variables; the processes that load it use the new
    /// ones at their next initialisation of the module.
    struct SetEnv: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-env",
            abstract: "Replace the variables a driver is given (no --env: none).", discussion: Drivers.environmentRule)
        @Argument(help: "The driver's name.") var name: String
        @Option(name: .customLong("env"), help: ArgumentHelp("A variable for the module (repeatable).", valueName: "NAME=VALUE"))
        var env: [String] = []
        @OptionGroup var output: JSONOption

        func run() throws {
            let environment = try Drivers.parseEnvironment(env)
            let ctx = try Context.open(syncDrivers: false)
            let drivers = try ctx.store.drivers()
            guard let d = drivers.first(where: { $0.name == name }) else { throw CLIError("no driver named \(name)") }
            try Drivers.checkShared(module: d.modulePath, environment: environment, except: name, drivers)
            Drivers.noteUnstored(environment, module: d.modulePath)
            try ctx.store.setDriverEnvironment(name: name, environment)
            // Mirror what the module shows with its new configuration.
            let poller = Drivers.poller(ctx.store)
            do {
                try poller.apply(try poller.snapshot(modulePath: d.modulePath, environment: environment), driver: name)
            } catch {
                poller.recordFailure(driver: name, reason: "\(error)")
                Console.error("driver \(name) failed: \(error)")
            }
            try Console.report(output.json, "driver \(name): " + (environment.isEmpty ? "no variables" : Drivers.describe(environment)),
                               ["driver": .string(name), "environment": .strings(environment.keys.sorted().map { "\($0)=\(environment[$0] ?? "")" })])
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a PKCS #11 module; its tokens' items leave the keychain.")
        @Argument(help: "The driver's name.") var name: String
        @OptionGroup var output: JSONOption

        func run() throws {
            let ctx = try Context.open(syncDrivers: false)
            guard try ctx.store.drivers().contains(where: { $0.name == name }) else { throw CLIError("no driver named \(name)") }
            try ctx.store.removeDriver(name: name)
            try ExternalDriver.withdrawAll(driver: name, store: ctx.store)
            try Console.report(output.json, "removed driver \(name)", ["removed": .string(name)])
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
                StandardStream.write(snap.serialized())
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
                    StandardStream.write(Array((line.hasSuffix("\n") ? line : line + "\n").utf8))
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
    /// when no driver is configured. Returns the poller (what it saw).
    @discardableResult
    static func sync(_ store: KeychainStore) -> DriverPoller? {
        guard let drivers = try? store.drivers(), !drivers.isEmpty else { return nil }
        let p = poller(store)
        for f in p.pollAll() {
            Console.error("driver \(f.driver) failed: \(f.reason)")
        }
        return p
    }

    static let environmentRule = """
        A module reads its configuration from variables (SOFTHSM2_CONF, OPENSC_CONF, PCSCLITE_CSOCK_NAME, \
        TPM2_PKCS11_STORE/_TCTI/_LOG_LEVEL). Give them with --env NAME=VALUE: they are stored with the driver \
        and every process that loads it (the agent, an application in-process, this command) gives the module \
        exactly those, never its own values of the names above; so the agent, whoever started it, sees the \
        cards this command sees. Refused: LD_*, GLIBC_TUNABLES, MALLOC_*, KEYSHARE_*, OPENSSL_*, XDG_*, PATH, \
        HOME and other names that change how the loader or keyshare behaves. Values are shown by driver list.
        """

    /// `--env NAME=VALUE` options as a set, or one clear line.
    static func parseEnvironment(_ options: [String]) throws -> [String: String] {
        var out: [String: String] = [:]
        for o in options {
            guard let eq = o.firstIndex(of: "="), eq != o.startIndex else { throw CLIError("--env takes NAME=VALUE (got \(o))") }
            let name = String(o[..<eq])
            if let why = DriverEnvironment.refusal(name) { throw CLIError("--env \(name): refused: \(why)") }
            guard out[name] == nil else { throw CLIError("--env \(name) given twice") }
            out[name] = String(o[o.index(after: eq)...])
        }
        if let why = DriverEnvironment.problem(out) { throw CLIError(why) }
        return out
    }

    /// One module is loaded once per process, with one configuration: two
    /// drivers of the same module must give it the same variables.
    static func checkShared(module: String, environment: [String: String], except name: String,
                            _ drivers: [KeychainStore.DriverConfig]) throws {
        if let other = drivers.first(where: { $0.name != name && $0.modulePath == module && $0.environment != environment }) {
            throw CLIError("driver \(other.name) loads \(module) with other variables (\(describe(other.environment))); "
                + "a module is loaded once per process, so both must give the same --env")
        }
    }

    /// A configuration variable set in this shell but not given with --env
    /// is not what the driver sees (in any process): say so once.
    static func noteUnstored(_ environment: [String: String], module: String) {
        let env = ProcessInfo.processInfo.environment
        let file = module.split(separator: "/").last.map { $0.lowercased() } ?? ""
        let names = DriverEnvironment.configurationNames
        let relevant = file.contains("softhsm") ? names.filter { $0.hasPrefix("SOFTHSM") }
            : file.contains("opensc") ? names.filter { $0.hasPrefix("OPENSC") || $0.hasPrefix("PCSCLITE") }
            : file.contains("tpm2") ? names.filter { $0.hasPrefix("TPM2") } : names
        for name in relevant where environment[name] == nil {
            guard let value = env[name] else { continue }
            Console.error("note: \(name) is set here but drivers do not take it from the environment; "
                + "to give it to this driver: --env \(name)=\(value)")
        }
    }

    static func describe(_ environment: [String: String]) -> String {
        environment.isEmpty ? "-" : environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    }
}
