import AgentProtocol
import ArgumentParser
import CLinux
import FoundationEssentials
import Glibc
import KeyshareAgent

/// `keyshare agent`: the per-user agent that holds the unlocked keys
/// (docs/agent.md), and its management (`status`, `stop`, `restart`). The
/// module starts it on first use (`keyshare agent --daemonize`); systemd can
/// start it from keyshare-agent.socket instead.
struct AgentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Run or manage the keyshare agent: the one process that holds the store's unlocked keys.",
        discussion: """
            One agent serves one store. The default store's agent listens on $XDG_RUNTIME_DIR/keyshare/agent.sock
            (or /tmp/keyshare-agent-UID/agent.sock when XDG_RUNTIME_DIR is unset); another store's (KEYSHARE_HOME)
            in a directory of its own under it; $KEYSHARE_AGENT_SOCKET names a socket outright. Applications reach it
            through libkeyshare-pkcs11.so. See keyshare-pkcs11(7), "The agent".
            """,
        subcommands: [Run.self, Status.self, Stop.self, Restart.self, Socket.self],
        defaultSubcommand: Run.self)

    struct Run: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "run", abstract: "Run the agent in the foreground (the default; how systemd and the module start it).")

        @Option(help: "Exit after this many seconds with no client (0: never; default $KEYSHARE_AGENT_IDLE_TIMEOUT or 600).")
        var idleTimeout: Double?

        @Flag(help: "Detach from the starting process (how the module auto-starts the agent); log to DIR/agent.log.")
        var daemonize = false

        func run() throws {
            // First: run under malloc settings that overwrite freed memory
            // (CLinux KEYSHARE_AGENT_MALLOC_TUNABLES); returns when in force.
            _ = keyshare_agent_scrub_heap(CommandLine.unsafeArgv)
            let idle = idleTimeout
                ?? ProcessInfo.processInfo.environment["KEYSHARE_AGENT_IDLE_TIMEOUT"].flatMap(Double.init) ?? 600
            guard idle >= 0 else { throw ValidationError("--idle-timeout must be 0 or more") }
            var readyFD: Int32?
            if daemonize {
                // Started by a client (connect.c spawns with closefrom(3)) or by
                // hand: either way nothing of the starter's stays open in the agent.
                keyshare_close_from(3)
                var dirBuf = [CChar](repeating: 0, count: 512)
                var why = [CChar](repeating: 0, count: 1024)
                guard ksa_agent_dir(&dirBuf, dirBuf.count) == 0 else { throw CLIError("the agent's directory path is too long") }
                guard ksa_check_dir(dirBuf, 1, &why, why.count) == 0 else {
                    throw CLIError(String(decoding: why.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self))
                }
                let dir = String(decoding: dirBuf.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
                var fd: Int32 = -1
                guard keyshare_daemonize(&fd) == 0 else { throw CLIError("cannot detach the agent") }
                readyFD = fd
                let null = open("/dev/null", O_RDWR | O_CLOEXEC)
                let log = open(dir + "/agent.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0o600)
                dup2(null, 0)
                dup2(null, 1)
                dup2(log >= 0 ? log : null, 2)
            }
            let status = Agent(options: .init(idleTimeout: idle, readyFD: readyFD)).run()
            if status != 0 { throw CLIExit(code: status) }
        }
    }

    /// What `status` prints, in this order (the JSON has every field).
    static let statusFields = ["pid", "version", "protocol", "store", "socket", "log", "uptime", "clients", "connections",
                               "unlocked", "idleTimeout"]

    static func status() throws -> [String: String]? {
        do {
            return try ControlProtocol.call(.agentStatus, .init(), program: AgentControl.program, start: false)
                .fields.mapValues { String(decoding: $0, as: UTF8.self) }
        } catch is ControlProtocol.NotRunning {
            return nil
        } catch let e as ControlProtocol.Failure {
            throw CLIError(e.description)
        }
    }

    /// This environment's agent socket (whether or not an agent listens there).
    static var socketPath: String {
        var buf = [CChar](repeating: 0, count: 128)
        guard ksa_socket_path(&buf, buf.count) == 0 else { return "(path too long)" }
        return String(decoding: buf.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the agent that serves this environment's store: pid, version, store, socket, clients, unlocks.",
            discussion: "Exit status 0 when an agent runs, 3 when none does (as systemctl status).")
        @Flag(help: "JSON output.") var json = false

        func run() throws {
            guard let s = try AgentCommand.status() else {
                if json {
                    try Console.json(["running": "false", "socket": AgentCommand.socketPath])
                } else {
                    Console.out("no keyshare agent is running for this store (socket \(AgentCommand.socketPath))")
                }
                throw CLIExit(code: 3)
            }
            if json {
                var all = s
                all["running"] = "true"
                return try Console.json(all)
            }
            for k in AgentCommand.statusFields {
                guard var v = s[k] else { continue }
                if k == "uptime" { v += " s" }
                if k == "store" && s["storeExists"] == "0" { v += " (not created yet)" }
                if k == "idleTimeout" { v = v == "0" ? "never" : v + " s" }
                Console.out(String(repeating: " ", count: max(0, 12 - k.count)) + k + ": " + v)
            }
            if s["retired"] == "1" { Console.out("     retired: yes (exits when its last client goes)") }
        }
    }

    /// Asks the agent to stop and waits (bounded) for its pid to be gone.
    static func stop() throws -> String? {
        guard let s = try status(), let pid = s["pid"].flatMap(Int32.init) else { return nil }
        _ = try? ControlProtocol.call(.agentStop, .init(), program: AgentControl.program, start: false)
        for _ in 0..<100 {
            if kill(pid, 0) != 0 { return s["pid"] }
            usleep(50_000)
        }
        throw CLIError("the keyshare agent (pid \(pid)) did not stop within 5 s")
    }

    struct Socket: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the agent socket this environment's store is served on (to bind into a sandbox or container).",
            discussion: "Nothing is started or checked: the path is computed as the module computes it.")
        @Flag(help: "Print its directory (the agent's pid file and log are there) instead.") var dir = false
        @OptionGroup var output: JSONOption

        func run() throws {
            let path = AgentCommand.socketPath
            let directory = PathString.directory(path)
            try Console.report(output.json, dir ? directory : path, ["socket": .string(path), "directory": .string(directory)])
        }
    }

    struct Stop: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop the agent: every client's logins and unlocks end now (their next call starts a new agent).")
        @Flag(help: "JSON output.") var json = false

        func run() throws {
            let pid = try AgentCommand.stop()
            if json { return try Console.json(["stopped": pid ?? ""]) }
            Console.out(pid.map { "stopped the keyshare agent (pid \($0))" } ?? "no keyshare agent was running")
        }
    }

    struct Restart: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop the agent and start a new one (after an upgrade, or to drop every login).")
        @Flag(help: "JSON output.") var json = false

        func run() throws {
            let old = try AgentCommand.stop()
            do {
                _ = try ControlProtocol.call(.agentStatus, .init(), program: AgentControl.program, start: true)
            } catch let e as ControlProtocol.Failure {
                throw CLIError(e.description)
            }
            guard let s = try AgentCommand.status() else { throw CLIError("the keyshare agent did not start") }
            if json { return try Console.json(["stopped": old ?? "", "started": s["pid"] ?? ""]) }
            Console.out("started the keyshare agent (pid \(s["pid"] ?? "?"))" + (old.map { ", replacing pid \($0)" } ?? ""))
        }
    }
}
