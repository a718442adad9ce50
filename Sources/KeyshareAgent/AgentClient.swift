#if canImport(Glibc)
import Glibc
#endif
import KeyshareCrypto
import PKCS11

/// One client process: its own PKCS #11 module state (logins, sessions, handles).
final class AgentClient: @unchecked Sendable {
    let token: [UInt8]
    let pid: pid_t
    let exe: String
    let module: Module
    let policy: AgentPolicy
    /// The client's debug-log descriptor (-1: no log), closed when the client goes.
    let logFD: Int32
    /// A pidfd of the client's process (-1: none), watched by the agent's loop.
    let pidfd: Int32
    /// Where the client's person can be asked (its display, its terminal).
    let display: ClientDisplay
    /// Its program, and whether any unlock may reach it (UnlockScope.swift).
    let unlockBarrier: UnlockBarrier
    /// Guarded by Agent.lock.
    var connections = 1
    private let goneLock = Lock()
    private var isGone = false

    init(token: [UInt8], pid: pid_t, exe: String, module: Module, policy: AgentPolicy, logFD: Int32 = -1, pidfd: Int32 = -1,
         display: ClientDisplay = ClientDisplay(), unlockBarrier: UnlockBarrier) {
        self.display = display
        self.unlockBarrier = unlockBarrier
        self.token = token
        self.pid = pid
        self.exe = exe
        self.module = module
        self.policy = policy
        self.logFD = logFD
        self.pidfd = pidfd
    }

    var gone: Bool { goneLock.withLock { isGone } }

    /// True exactly once: the caller finalises the client.
    func markGone() -> Bool {
        goneLock.withLock {
            if isGone { return false }
            isGone = true
            return true
        }
    }

    deinit {
        if logFD >= 0 { close(logFD) }
        if pidfd >= 0 { close(pidfd) }
    }
}

/// A client's display: the variables of hello field 2 (DISPLAY,
/// WAYLAND_DISPLAY, XAUTHORITY, ...) and its terminal (field 3).
public struct ClientDisplay: Sendable, Equatable {
    public var variables: [String: String] = [:]
    public var tty: String?
    public init() {}
}

/// The agent's log: one line per decision on stderr (the journal under
/// systemd, DIR/agent.log when auto-started). Never a PIN, key or value.
enum AgentLog {
    static func line(_ s: String) {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let text = "keyshare-agent[\(getpid())] \(ts.tv_sec): \(sanitized(s))\n"
        _ = text.withCString { write(2, $0, strlen($0)) }
    }

    /// One line, whatever a client put in the strings it logs (a tty name,
    /// a display value, a path, a groups list): control characters (C0, DEL,
    /// C1) become \xNN, so a newline cannot forge a line of the log.
    static func sanitized(_ s: String) -> String {
        guard s.unicodeScalars.contains(where: isControl) else { return s }
        var out = String.UnicodeScalarView()
        for u in s.unicodeScalars {
            if isControl(u) {
                let hex = Array("0123456789abcdef".unicodeScalars)
                out.append(contentsOf: ["\\", "x", hex[Int(u.value >> 4) & 15], hex[Int(u.value) & 15]])
            } else {
                out.append(u)
            }
        }
        return String(out)
    }

    private static func isControl(_ u: Unicode.Scalar) -> Bool {
        u.value < 0x20 || (0x7f...0x9f).contains(u.value)
    }
}
