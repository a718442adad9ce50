import AgentProtocol
import ArgumentParser
import CLinux
import Foundation
import KeyshareAgent

/// `keyshare agent`: the per-user agent that holds the unlocked keys
/// (docs/agent.md). The module starts it on first use (`--daemonize`);
/// systemd can start it from keyshare-agent.socket instead.
struct AgentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Run the keyshare agent: the one process that holds the store's unlocked keys.",
        discussion: """
            Listens on $XDG_RUNTIME_DIR/keyshare/agent.sock (or /tmp/keyshare-agent-UID/agent.sock;
            $KEYSHARE_AGENT_SOCKET overrides). Applications reach it through libkeyshare-pkcs11.so.
            """)

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
            // Started by a client (agent_client.c spawns with closefrom(3)) or by
            // hand: either way nothing of the starter's stays open in the agent.
            keyshare_close_from(3)
            var dirBuf = [CChar](repeating: 0, count: 512)
            guard ksa_agent_dir(&dirBuf, dirBuf.count) == 0, ksa_prepare_dir(dirBuf, 1) == 0 else {
                throw CLIError("the agent directory is missing or not private (owner \(getuid()), mode 0700)")
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
