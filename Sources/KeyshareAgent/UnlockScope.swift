#if canImport(Glibc)
import Glibc
#endif
import KeySharing
import Keychain
import KeyshareCrypto

/// Which programs a `keyshare unlock` reaches (issue 27, "Unlocks that are
/// scoped"; docs/agent.md "Unlock across processes"): the programs it names
/// (`--program PATH...`), else those the token's policy `unlock` rules name;
/// never "every program". Taken at the unlock (NamedProgram: file and
/// content), minus the programs that authenticate a person (Authenticators),
/// which no unlock reaches even when named.
struct UnlockScope {
    /// At most this many programs in one unlock.
    static let maxPrograms = 64

    /// The programs the unlock reaches.
    var programs: [NamedProgram] = []
    /// Named but left out, with why (an authenticator; nothing at that path).
    var leftOut: [(path: String, why: String)] = []
    /// "program" (from --program) or "policy" (from its unlock rules).
    var source = "program"

    /// The scope of an unlock of `token`: `paths` (from the CLI, resolved
    /// there; nil: none given) or else the policy's unlock rules for the token.
    static func make(paths: [String]?, policy: AgentPolicy, token: TokenID) throws -> UnlockScope {
        var scope = UnlockScope()
        var named: [(String, NamedProgram?)] = []
        if let paths {
            guard paths.count <= maxPrograms else {
                throw ControlProtocol.Failure("an unlock names at most \(maxPrograms) programs")
            }
            for p in paths {
                guard p.hasPrefix("/"), p.utf8.count <= 4096 else { throw ControlProtocol.Failure("unusable program path \(p)") }
                named.append((p, NamedProgram(path: p)))
            }
        } else {
            scope.source = "policy"
            named = policy.unlockRules(token: token).map { ($0.exe, NamedProgram(path: $0.exe, recorded: $0.digest)) }
        }
        for (path, program) in named {
            guard let program else {
                scope.leftOut.append((path, "nothing is at that path for the agent"))
                continue
            }
            if let why = Authenticators.reason(for: program) {
                scope.leftOut.append((path, why))
            } else if !scope.programs.contains(where: { $0.path == program.path }) {
                scope.programs.append(program)
            }
        }
        return scope
    }

    /// Whether the unlock reaches `program` (before the per-client authenticator check).
    func reaches(_ program: ProgramIdentity) -> Bool {
        programs.contains { $0.names(program) }
    }
}

/// Whether any unlock may reach one client: not when it authenticates a
/// person (its hello says libpam or libcryptsetup is loaded, or its
/// executable is on the built-in list). Decided once, when an unlock first
/// names the client (the list is read then, not at every hello), and logged.
final class UnlockBarrier: @unchecked Sendable {
    let program: ProgramIdentity
    /// KSA_HELLO_AUTHENTICATOR: trusted as is (a forged flag only loses the unlock).
    let helloSaysAuthenticator: Bool
    private let lock = Lock()
    private var decided = false
    private var why: String?

    init(program: ProgramIdentity, helloSaysAuthenticator: Bool) {
        self.program = program
        self.helloSaysAuthenticator = helloSaysAuthenticator
    }

    /// Why no unlock reaches this client; nil: unlocks that name it do.
    func refusal(pid: pid_t) -> String? {
        lock.withLock {
            if decided { return why }
            decided = true
            if helloSaysAuthenticator {
                why = "it has libpam or libcryptsetup loaded (its hello says so), so it authenticates a person"
            } else {
                why = Authenticators.reason(for: program)
            }
            if let why { AgentLog.line("client pid \(pid) exe \(program): no unlock reaches it: \(why); it logs in itself (C_Login)") }
            return why
        }
    }
}
