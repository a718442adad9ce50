import ArgumentParser
import FoundationEssentials
import Glibc

/// `keyshare browser`: browsers offer keyshare's certificates on a site that
/// asks for one (docs/browsers.md). `setup` registers the module in this
/// user's NSS databases (Chromium's ~/.pki/nssdb, each Firefox profile);
/// `policy` is what the package runs as root: Firefox's enterprise policy
/// for every user.
struct BrowserCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "browser",
        abstract: "Make browsers use keyshare's certificates (NSS databases, Firefox's policy).",
        subcommands: [Setup.self, Policy.self])

    struct Setup: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register the module in this user's NSS databases: Chromium's ~/.pki/nssdb and every Firefox profile.",
            discussion: """
                Edits each database's pkcs11.txt as modutil does (close the browser first: a running one \
                loads modules at its start). Idempotent; --remove takes the module out again. With neither \
                --firefox nor --chromium, both.
                """)

        @Flag(help: "Every Firefox profile of this user.") var firefox = false
        @Flag(help: "Chromium's database, ~/.pki/nssdb (made when missing).") var chromium = false
        @Flag(help: "Take the module out instead.") var remove = false
        @Option(help: "The module to register (default: the one beside this program, else the installed one).") var module: String?
        @OptionGroup var output: JSONOption

        func run() throws {
            struct Row: Encodable { var browser, database, result: String }
            var rows: [Row] = []
            let both = !firefox && !chromium
            let library = remove ? nil : try BrowserProfiles.module(module)
            var failures = 0
            var targets: [(String, String)] = []
            if chromium || both { targets.append(("chromium", BrowserProfiles.chromium)) }
            if firefox || both {
                let profiles = BrowserProfiles.firefox()
                if profiles.isEmpty {
                    if output.json { rows.append(Row(browser: "firefox", database: "", result: "no profile yet")) } else {
                        Console.out("firefox: no profile yet (the package's policy registers the module in new profiles)")
                    }
                }
                targets += profiles.map { ("firefox", $0) }
            }
            for (browser, dir) in targets {
                let db = NSSModuleDatabase(directory: dir)
                do {
                    let change = try library.map { try db.register(library: $0) } ?? db.unregister()
                    let what: String = switch change {
                    case .added: "registered \(library ?? "")"
                    case .updated: "registered \(library ?? "") (replacing another keyshare module path)"
                    case .unchanged: "already registered"
                    case .removed: "removed"
                    case .absent: "not registered"
                    }
                    if output.json { rows.append(Row(browser: browser, database: "sql:" + dir, result: what)) } else {
                        Console.out("\(browser) sql:\(dir): \(what)")
                    }
                } catch {
                    Console.error("\(browser) sql:\(dir): \(ErrorText.describe(error))")
                    failures += 1
                }
            }
            if output.json { try Console.json(rows) }
            if failures > 0 { throw CLIExit(code: 1) }
        }
    }

    struct Policy: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add the module to Firefox's enterprise policy for every user (what the package runs as root).",
            discussion: """
                Merges SecurityDevices.Add.keyshare into the policy file; every other policy stays, and a \
                file that is not JSON is left alone. --remove moves keyshare to SecurityDevices.Delete, so \
                profiles drop the module; --purge takes it out of both (and deletes a file left empty).
                """)

        @Flag(help: "Take the module out: Firefox removes it from profiles at their next start.") var remove = false
        @Flag(help: "Take keyshare out of the policy altogether.") var purge = false
        @Option(help: "The policy file.") var file = FirefoxPolicy.defaultPath
        @Option(help: "The module to register (default: the one beside this program, else the installed one).") var module: String?
        @OptionGroup var output: JSONOption

        func run() throws {
            if remove, purge { throw ValidationError("give --remove or --purge, not both") }
            let policy = FirefoxPolicy(path: file.hasPrefix("/") ? file : FileManager.default.currentDirectoryPath + "/" + file)
            let action: FirefoxPolicy.Action = remove ? .remove : purge ? .purge : .add(library: try BrowserProfiles.module(module))
            let outcome = try policy.apply(action)
            let what: String = switch (action, outcome) {
            case (.add(let lib), .unchanged): "already registers \(lib)"
            case (.add(let lib), _): "registers \(lib) (SecurityDevices.Add.keyshare)"
            case (.remove, .unchanged): "does not register keyshare"
            case (.remove, _): "no longer registers keyshare (SecurityDevices.Delete removes it from profiles)"
            case (.purge, .deleted): "deleted (it held nothing else)"
            case (.purge, .unchanged): "does not name keyshare"
            case (.purge, _): "no longer names keyshare"
            }
            try Console.report(output.json, "\(file): \(what)", ["file": .string(file), "result": .string(what)])
        }
    }
}
