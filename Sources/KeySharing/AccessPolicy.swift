import FoundationEssentials
import Glibc

/// The AppConnect-style access decision states (spec §6). Every refusal names
/// its state so a consumer (and the log) can tell "set sharing up first" from
/// "this program is not allowed".
public enum AccessState: String, Codable, Sendable {
    /// The caller is not a recognised consumer: malformed or foreign request.
    case noRequest = "no-request"
    /// Sharing is not set up on the provider: no policy, or an empty one.
    case notEnabled = "not-enabled"
    /// The caller is not in the provider's access-control group.
    case blocked
    /// The caller is allowed: the password is answered.
    case notBlocked = "not-blocked"
}

/// Who is on the other end of the socket, from the kernel (SO_PEERCRED), not
/// from anything the client says about itself.
public struct PeerCredentials: Sendable, Equatable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// /proc/PID/exe at connect time; nil when it cannot be read.
    public var exe: String?
    /// The program by what it is (file and content, CallerCheck), when known:
    /// an `exe` rule then names it as the agent's rules do (NamedProgram), so
    /// a program bind-mounted over an allowed path in the caller's own mount
    /// namespace (`unshare -Urm`), which /proc/PID/exe shows under that path,
    /// is not the allowed program.
    public var program: ProgramIdentity?

    public init(pid: Int32, uid: UInt32, gid: UInt32, exe: String?, program: ProgramIdentity? = nil) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.exe = exe
        self.program = program
    }
}

public struct AccessDecision: Sendable, Equatable {
    public var state: AccessState
    public var reason: String

    public init(state: AccessState, reason: String) {
        self.state = state
        self.reason = reason
    }
}

/// Which local programs may fetch the shared password. On iOS the OS lets only
/// apps holding the provider's items call the service; Linux has no such gate,
/// so the provider keeps this list: the members of its access-control group.
public struct AccessPolicy: Codable, Sendable, Equatable {
    /// One member: an executable (its resolved path) or every process of a user.
    public struct Rule: Codable, Sendable, Hashable, CustomStringConvertible {
        public var exe: String?
        public var uid: UInt32?

        public init(exe: String? = nil, uid: UInt32? = nil) {
            self.exe = exe
            self.uid = uid
        }

        /// `deny`: a deny rule also matches by path alone (refusing more is safe).
        func matches(_ peer: PeerCredentials, deny: Bool = false) -> Bool {
            if let exe {
                if let program = peer.program {
                    let named = NamedProgram(path: exe)?.names(program) ?? false
                    guard named || (deny && peer.exe == exe) else { return false }
                } else if peer.exe != exe {
                    return false
                }
            }
            if let uid, peer.uid != uid { return false }
            return exe != nil || uid != nil
        }

        public var description: String {
            [exe.map { "exe \($0)" }, uid.map { "uid \($0)" }].compactMap { $0 }.joined(separator: ", ")
        }
    }

    public static let defaultGroup = "red.hound.KeySharing"
    public var version = 1
    /// The shared group ID (AppConnect's access-control group) the members belong to.
    public var group: String
    public var allow: [Rule]
    public var deny: [Rule]

    public init(group: String = AccessPolicy.defaultGroup, allow: [Rule] = [], deny: [Rule] = []) {
        self.group = group
        self.allow = allow
        self.deny = deny
    }

    /// The decision for one request. A process of another user is always
    /// refused, whatever the policy says: the password is this user's secret.
    public static func decide(_ policy: AccessPolicy?, peer: PeerCredentials, serviceUID: UInt32) -> AccessDecision {
        guard peer.uid == serviceUID else {
            return AccessDecision(state: .blocked, reason: "a process of another user (uid \(peer.uid)) is always refused")
        }
        guard let policy, !policy.allow.isEmpty else {
            return AccessDecision(state: .notEnabled, reason: "sharing is not enabled: no program is allowed (keyshare share allow)")
        }
        if let rule = policy.deny.first(where: { $0.matches(peer, deny: true) }) {
            return AccessDecision(state: .blocked, reason: "denied by rule \(rule)")
        }
        if let rule = policy.allow.first(where: { $0.matches(peer) }) {
            return AccessDecision(state: .notBlocked, reason: "allowed by rule \(rule)")
        }
        return AccessDecision(state: .blocked, reason: "not a member of the access group \(policy.group)")
    }
}

/// The policy's home: a 0600 JSON file in KEYSHARE_HOME, next to the keychain.
/// A file anyone else could have written is not trusted.
public enum AccessPolicyFile {
    public static let fileName = "share-policy.json"

    public enum PolicyError: Error, CustomStringConvertible {
        case unsafe(String)
        case unreadable(String)

        public var description: String {
            switch self {
            case .unsafe(let why): "the access policy file is not trusted: \(why)"
            case .unreadable(let why): "the access policy file cannot be read: \(why)"
            }
        }
    }

    public static func path(home: String) -> String { home + "/" + fileName }

    /// nil when there is no policy file (sharing not enabled).
    public static func load(home: String) throws -> AccessPolicy? {
        let p = path(home: home)
        var st = stat()
        guard lstat(p, &st) == 0 else {
            if errno == ENOENT { return nil }
            throw PolicyError.unreadable(String(cString: strerror(errno)))
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw PolicyError.unsafe("\(p) is not a regular file") }
        guard st.st_uid == getuid() else { throw PolicyError.unsafe("\(p) belongs to uid \(st.st_uid)") }
        guard st.st_mode & 0o077 == 0 else {
            throw PolicyError.unsafe("\(p) has mode \(String(st.st_mode & 0o777, radix: 8)), not 0600")
        }
        guard let data = FileManager.default.contents(atPath: p) else { throw PolicyError.unreadable(p) }
        do {
            return try JSONDecoder().decode(AccessPolicy.self, from: data)
        } catch {
            throw PolicyError.unreadable("\(p) is not a valid policy")
        }
    }

    public static func save(_ policy: AccessPolicy, home: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        try SecureFile.write([UInt8](try encoder.encode(policy)) + [0x0A], to: path(home: home), mode: 0o600)
    }
}
