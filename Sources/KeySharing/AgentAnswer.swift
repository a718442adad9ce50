#if canImport(Glibc)
import Glibc
#endif

/// The password service answered by the agent (issue 28 item 4;
/// docs/password-service.md, "Serving from the agent's unlock"). `keyshare
/// serve` without a PIN source holds no PIN, no token key and no password: for
/// each complete, valid request it passes the client's connection to the agent
/// (SCM_RIGHTS), and the agent, which holds the keys `keyshare unlock` gave
/// it, judges the caller as the service does (CallerCheck, the share policy of
/// the agent's own store), writes the reply on that connection itself and
/// tells the service only the state, for its log. So the password exists only
/// in the agent and in the allowed client, and only while the token is
/// unlocked for the program that asks.
public enum AgentAnswer {
    /// What the agent did, for the service's log line (never the password).
    public struct Outcome: Sendable, Equatable {
        public var state: AccessState
        public var reason: String?
        public var exe: String?

        public init(state: AccessState, reason: String?, exe: String?) {
            self.state = state
            self.reason = reason
            self.exe = exe
        }
    }

    /// Why the password is not answered to an allowed caller (the token is locked for it).
    public struct Refused: Error, Sendable {
        public let decision: AccessDecision
        public init(_ state: AccessState, _ reason: String) { decision = AccessDecision(state: state, reason: reason) }
    }

    /// Judges the caller on `client` (the service's end of a connection whose
    /// request the service has read and validated) against `policy`, and
    /// writes the reply on it: the password from `password` (given the
    /// caller's program: the agent answers only while the token is unlocked
    /// for it) when the policy allows the caller, else the refusal. The write
    /// is bounded by the protocol's reply deadline.
    public static func answer(client: Int32, policy: () throws -> AccessPolicy?,
                              password: (ProgramIdentity) -> Result<String, Refused>) -> Outcome {
        var exe: String?
        let decision: AccessDecision
        var secret: String?
        if let cred = Connection.peerCredentials(client) {
            let unseen = PeerCredentials(pid: cred.pid, uid: cred.uid, gid: cred.gid, exe: nil)
            do {
                let policy = try policy()
                if cred.uid != getuid() || policy?.allow.isEmpty != false {
                    decision = AccessPolicy.decide(policy, peer: unseen, serviceUID: getuid())
                } else {
                    var check = CallerCheck()
                    switch check.verify(connection: client, pid: cred.pid) {
                    case .failure(let refusal):
                        decision = AccessDecision(state: .blocked, reason: refusal.reason)
                    case .success(let caller):
                        exe = caller.program.path
                        var peer = unseen
                        peer.exe = caller.program.path
                        peer.program = caller.program
                        let judged = AccessPolicy.decide(policy, peer: peer, serviceUID: getuid())
                        if judged.state == .notBlocked {
                            switch password(caller.program) {
                            case .success(let p):
                                secret = p
                                decision = judged
                            case .failure(let refusal):
                                decision = refusal.decision
                            }
                        } else {
                            decision = judged
                        }
                    }
                }
            } catch {
                decision = AccessDecision(state: .notEnabled, reason: "\(error)")
            }
        } else {
            decision = AccessDecision(state: .noRequest, reason: "the caller's credentials cannot be read")
        }
        var bytes = PasswordProtocol.encode(decision.state == .notBlocked && secret != nil
            ? PasswordProtocol.Reply(state: .notBlocked, password: secret)
            : PasswordProtocol.Reply(state: decision.state, error: decision.reason))
        defer { bytes.withUnsafeMutableBytes { if let b = $0.baseAddress { explicit_bzero(b, $0.count) } } }
        let written = write(bytes, to: client)
        return Outcome(state: decision.state, reason: written ? (decision.state == .notBlocked ? nil : decision.reason)
                       : "the reply could not be written to the client", exe: exe)
    }

    /// Writes all of `bytes` within the reply deadline (the connection is non-blocking: the service set it so).
    public static func write(_ bytes: [UInt8], to fd: Int32) -> Bool {
        var done = 0
        let deadline = Connection.monotonicMilliseconds() + Int64(PasswordProtocol.requestTimeoutMilliseconds)
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + done, $0.count - done, Int32(MSG_NOSIGNAL)) }
            if n > 0 { done += n; continue }
            if n < 0 && errno == EINTR { continue }
            guard n < 0 && errno == EAGAIN else { return false }
            let left = deadline - Connection.monotonicMilliseconds()
            guard left > 0 else { return false }
            var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            _ = poll(&p, 1, Int32(left))
        }
        return true
    }
}
