import Keychain

/// Which programs may use which tokens and access groups through the agent
/// (`keyshare policy allow|deny|list`, docs/agent.md "Policy"). The program is
/// the executable the agent verified at the hello (CallerCheck: race-free),
/// never anything the client says about itself.
///
/// The rule, per token T and executable E:
/// - a `deny` rule for E naming T (or every token) hides T from E;
/// - otherwise, when some `allow` rule names T (or every token), only the
///   executables of such rules see T (the allow rules turn T into an allow-list);
/// - otherwise E sees T: with no policy at all every program of the user sees
///   every token, so nothing breaks out of the box.
/// A program refused outright (a `deny` for every token, or not in an allow
/// rule for every token when one exists) gets no client: its C_Initialize
/// fails with CKR_TOKEN_NOT_PRESENT. A program refused only some tokens gets
/// no slot for them (C_GetSlotList leaves them out; their slot IDs are
/// CKR_SLOT_ID_INVALID), as if they did not exist.
///
/// Access groups: the union of the `--access-group`s of E's allow rules (any
/// allow rule of E without groups, or no allow rule: every group).
/// KEYSHARE_ACCESS_GROUPS from the client narrows that, never widens it.
public struct AgentPolicy: Sendable, Equatable {
    public enum Effect: String, Sendable { case allow, deny }

    public struct Rule: Sendable, Equatable, CustomStringConvertible {
        public var effect: Effect
        /// The resolved executable path (as /proc/PID/exe shows it).
        public var exe: String
        /// nil: every token.
        public var tokenID: TokenID?
        /// The label at the time the rule was written (shown, not matched).
        public var tokenLabel: String?
        /// nil: every group (allow rules only).
        public var groups: [String]?

        public init(effect: Effect, exe: String, tokenID: TokenID? = nil, tokenLabel: String? = nil, groups: [String]? = nil) {
            self.effect = effect
            self.exe = exe
            self.tokenID = tokenID
            self.tokenLabel = tokenLabel
            self.groups = groups
        }

        public var description: String {
            var s = "\(effect.rawValue) \(exe)"
            s += tokenID.map { " token \(tokenLabel ?? "") (\($0))" } ?? " every token"
            if let groups { s += " groups \(groups.joined(separator: ","))" }
            return s
        }

        func covers(_ token: TokenID) -> Bool { tokenID == nil || tokenID == token }
    }

    public var rules: [Rule]

    public init(rules: [Rule] = []) { self.rules = rules }

    // MARK: decisions

    /// Whether E is refused as a whole, and why (nil: not refused).
    public func refusal(exe: String) -> String? {
        if let r = rules.first(where: { $0.effect == .deny && $0.exe == exe && $0.tokenID == nil }) {
            return "denied by rule \"\(r)\""
        }
        if rules.contains(where: { $0.effect == .allow && $0.tokenID == nil }),
           !rules.contains(where: { $0.effect == .allow && $0.exe == exe }) {
            return "not in an allow rule, and allow rules cover every token"
        }
        return nil
    }

    /// Whether E may see token T.
    public func allows(exe: String, token: TokenID) -> Bool {
        if rules.contains(where: { $0.effect == .deny && $0.exe == exe && $0.covers(token) }) { return false }
        let allowing = rules.filter { $0.effect == .allow && $0.covers(token) }
        return allowing.isEmpty || allowing.contains { $0.exe == exe }
    }

    /// The access groups E may use; nil: every group.
    public func groups(exe: String) -> Set<String>? {
        let mine = rules.filter { $0.effect == .allow && $0.exe == exe }
        if mine.isEmpty || mine.contains(where: { $0.groups == nil }) { return nil }
        return Set(mine.flatMap { $0.groups ?? [] })
    }

    // MARK: editing

    /// Adds a rule, replacing any rule for the same executable and token.
    public mutating func set(_ rule: Rule) {
        rules.removeAll { $0.exe == rule.exe && $0.tokenID == rule.tokenID }
        rules.append(rule)
    }

    /// Removes the rules of an executable (for one token, or all of them). Returns how many.
    public mutating func remove(exe: String, tokenID: TokenID?) -> Int {
        let before = rules.count
        rules.removeAll { $0.exe == exe && (tokenID == nil || $0.tokenID == tokenID) }
        return before - rules.count
    }

    // MARK: storage (KeychainStore.agentPolicyData: the store's meta table)

    static let header = "keyshare-agent-policy 1"

    /// One line per rule, tab-separated: effect, exe, token ID or *, label, groups or *.
    public func encoded() -> [UInt8] {
        var lines = [Self.header]
        for r in rules {
            lines.append([r.effect.rawValue, r.exe, r.tokenID?.description ?? "*", r.tokenLabel ?? "",
                          r.groups?.joined(separator: ",") ?? "*"].joined(separator: "\t"))
        }
        return Array((lines.joined(separator: "\n") + "\n").utf8)
    }

    public struct Malformed: Error, CustomStringConvertible {
        public let description: String
    }

    public init(decoding bytes: [UInt8]) throws {
        let text = String(decoding: bytes, as: UTF8.self)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
        guard lines.first == Self.header else { throw Malformed(description: "the agent policy has an unknown format") }
        lines.removeFirst()
        rules = try lines.map { line in
            let f = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard f.count == 5, let effect = Effect(rawValue: f[0]), f[1].hasPrefix("/") else {
                throw Malformed(description: "the agent policy has a malformed rule")
            }
            var token: TokenID?
            if f[2] != "*" {
                guard let t = TokenID(f[2]) else { throw Malformed(description: "the agent policy names a malformed token ID") }
                token = t
            }
            let groups = f[4] == "*" ? nil : f[4].split(separator: ",").map(String.init)
            return Rule(effect: effect, exe: f[1], tokenID: token, tokenLabel: f[3].isEmpty ? nil : f[3], groups: groups)
        }
    }

    /// The store's policy; an empty one when none was written.
    public static func load(from store: KeychainStore) throws -> AgentPolicy {
        guard let bytes = try store.agentPolicyData() else { return AgentPolicy() }
        return try AgentPolicy(decoding: bytes)
    }

    public func save(to store: KeychainStore) throws {
        try store.setAgentPolicyData(rules.isEmpty ? nil : encoded())
    }
}
