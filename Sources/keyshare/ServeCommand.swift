import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import Keychain
import KeySharing

/// `keyshare serve`: the password service (spec §6) in the foreground. It
/// unlocks the token once, keeps only the shared password in memory, answers
/// `fetchPassword` per the access policy, and removes its socket on SIGINT/SIGTERM.
struct ServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the password service that hands the shared password to allowed programs.",
        discussion: """
            Unlocks the token once, keeps only the shared export password in memory and answers each request \
            on the socket as the policy says (keyshare share allow / deny / policy), from the caller's kernel \
            credentials. Logs one line per request on stderr: pid, uid, executable and decision, never the \
            password. SIGINT or SIGTERM removes the socket. After keyshare password rotate, restart it. \
            The keyshare-password.service user unit runs it at login (systemctl --user enable --now keyshare-password).
            """)

    @Option(help: "The socket path (default $XDG_RUNTIME_DIR/keyshare/password.sock, else /tmp/keyshare-$UID/password.sock).")
    var socket: String?
    @OptionGroup var selection: TokenSelection
    @OptionGroup var pin: PINOptions

    func run() throws {
        let password: String
        do {
            let ctx = try Context.open()
            let token = try ctx.token(selection)
            let key = try ctx.unlock(token, pin)
            password = try SharedPassword.obtain(store: ctx.store, token: token.tokenID, key: key)
        }
        let path = socket ?? PasswordSocket.defaultPath()
        if socket == nil { try SecureFile.makePrivateDirectory(PasswordSocket.defaultDirectory()) }
        let home = KeychainStore.defaultHome()
        let server = try PasswordServer(
            socketPath: path, password: password,
            policy: { try AccessPolicyFile.load(home: home) },
            log: { Console.error("serve: " + $0) },
            checkDirectory: Self.checkSocketDirectory)

        signal(SIGPIPE, SIG_IGN)
        var sources: [DispatchSourceSignal] = []
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { server.stop() }
            source.resume()
            sources.append(source)
        }
        Console.error("serve: listening on \(path) (service \(PasswordProtocol.serviceName))")
        let cleanup = server.run()
        sources.forEach { $0.cancel() }
        switch cleanup {
        case .removed: Console.error("serve: stopped; removed \(path)")
        case .leftAlone(let why): Console.error("serve: stopped; \(why): left it alone")
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
