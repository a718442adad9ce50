import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import Keychain
import KeySharing
import KeyshareAgent

/// `keyshare serve`: the password service (spec §6) in the foreground. It
/// unlocks the token once, keeps only the shared password in memory, answers
/// `fetchPassword` per the access policy, and removes its socket on SIGINT/SIGTERM.
struct ServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the password service that hands the shared password to allowed programs.",
        discussion: """
            Without --pin-source it holds no PIN and no password: each request goes to the keyshare agent, which \
            answers the caller itself while the token is unlocked for the calling program (keyshare unlock --for 8h \
            --program PATH, or the policy's unlock rules) and as the share policy says (keyshare share allow / deny / \
            policy); while it is locked, callers are told so. With --pin-source credential:NAME (a systemd encrypted \
            credential) it unlocks the token once and keeps only the shared password in memory (restart it after \
            keyshare password rotate). A PIN from a file or the environment is refused: it would sit on disk or in \
            a unit file in the clear. Logs one line per request on stderr: pid, uid, executable and decision, never \
            the password. SIGINT or SIGTERM removes the socket. The keyshare-password.service user unit runs it at \
            login (systemctl --user enable --now keyshare-password). Exit status 78: refused configuration.
            """)

    @Option(help: "The socket path (default $XDG_RUNTIME_DIR/keyshare/password.sock, else /tmp/keyshare-$UID/password.sock).")
    var socket: String?
    @OptionGroup var selection: TokenSelection
    @OptionGroup var pin: PINOptions

    /// EX_CONFIG: the unit's RestartPreventExitStatus, so systemd does not retry a refused setup.
    static let refusedConfiguration: Int32 = 78

    func run() throws {
        try refusePlaintextPIN()
        var password = ""
        var fromAgent: ((Int32) -> AgentAnswer.Outcome)?
        var origin: String
        if pin.pinSource != nil {
            let ctx = try Context.open()
            let token = try ctx.token(selection)
            let key = try ctx.unlock(token, pin)
            password = try SharedPassword.obtain(store: ctx.store, token: token.tokenID, key: key)
            origin = "token \(token.label), unlocked from its credential"
        } else {
            let token = try AgentControl.resolve(selection)
            fromAgent = Self.askAgent(token: token.id)
            origin = "token \(token.label) through the keyshare agent: answered while it is unlocked for the program that asks "
                + "(keyshare unlock --for 8h --program PATH)"
        }
        let path = socket ?? PasswordSocket.defaultPath()
        if socket == nil { try SecureFile.makePrivateDirectory(PasswordSocket.defaultDirectory()) }
        let home = KeychainStore.defaultHome()
        let server = try PasswordServer(
            socketPath: path, password: password,
            policy: { try AccessPolicyFile.load(home: home) },
            log: { Console.error("serve: " + $0) },
            checkDirectory: Self.checkSocketDirectory, agent: fromAgent)
        password = ""

        signal(SIGPIPE, SIG_IGN)
        var sources: [DispatchSourceSignal] = []
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { server.stop() }
            source.resume()
            sources.append(source)
        }
        Console.error("serve: listening on \(path) (service \(PasswordProtocol.serviceName)); \(origin)")
        let cleanup = server.run()
        sources.forEach { $0.cancel() }
        switch cleanup {
        case .removed: Console.error("serve: stopped; removed \(path)")
        case .leftAlone(let why): Console.error("serve: stopped; \(why): left it alone")
        }
    }

    /// A PIN in the clear is refused before anything else (issue 28 item 4):
    /// `--pin-source file:` or `env:` (a file beside the store, a unit's
    /// Environment=), and the file the unit of earlier releases read,
    /// ~/.config/keyshare/pin, while it exists. One line says why and what
    /// instead; the status is 78, which the unit does not restart on.
    func refusePlaintextPIN() throws {
        let instead = "serve from the agent's unlock (run keyshare serve without --pin-source, then keyshare unlock "
            + "--for 8h --program PATH) or from a systemd encrypted credential (--pin-source credential:NAME with "
            + "LoadCredentialEncrypted=NAME:FILE; see keyshare-serve(1))"
        if let source = pin.pinSource {
            switch source.kind {
            case .credential: break
            case .file, .env:
                Console.error("keyshare serve does not read its PIN from a file or the environment (the PIN would sit in the "
                    + "clear, on disk or in a unit file): " + instead)
                throw CLIExit(code: Self.refusedConfiguration)
            }
        }
        let legacy = Self.legacyPINFile()
        var st = stat()
        if lstat(legacy, &st) == 0 {
            Console.error("\(legacy) holds a PIN in the clear (read by keyshare-password.service before 0.4): delete it "
                + "(shred -u \(legacy)) and " + instead)
            throw CLIExit(code: Self.refusedConfiguration)
        }
    }

    /// $XDG_CONFIG_HOME/keyshare/pin (~/.config/keyshare/pin).
    static func legacyPINFile() -> String {
        let env = ProcessInfo.processInfo.environment
        let home = env["HOME"] ?? ""
        let config = env["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.config"
        return config + "/keyshare/pin"
    }

    /// Each valid request's connection, passed to the agent (KeySharing.AgentAnswer), which
    /// answers the client; a locked token or an absent agent is said to the client here.
    static func askAgent(token: String) -> (Int32) -> AgentAnswer.Outcome {
        { client in
            var m = ControlProtocol.Message()
            m.set("token", token)
            let why: String
            do {
                let r = try ControlProtocol.call(.servePassword, m, program: AgentControl.program, start: false,
                                                 passing: client, timeoutMilliseconds: 5000)
                return AgentAnswer.Outcome(state: AccessState(rawValue: r.string("state") ?? "") ?? .noRequest,
                                           reason: r.string("reason"), exe: r.string("exe"))
            } catch is ControlProtocol.NotRunning {
                why = "the token is locked: no keyshare agent is running (keyshare unlock --for 8h --program PATH)"
            } catch {
                why = "the keyshare agent did not answer: \(error)"
            }
            let reply = PasswordProtocol.Reply(state: .notEnabled, error: why)
            _ = AgentAnswer.write(PasswordProtocol.encode(reply), to: client)
            return AgentAnswer.Outcome(state: .notEnabled, reason: why, exe: nil)
        }
    }

    /// The socket directory gets the store's StrictModes-like check (owned by
    /// this user or root, not group/world-writable, nor any parent): another
    /// user must not be able to swap the socket a client trusts. Called by the
    /// server before it creates anything.
    static let checkSocketDirectory: @Sendable (String) throws -> Void = { dir in
        try SecureDirectory.check(path: dir.isEmpty ? "." : dir)
    }
}
