import Keychain
import KeySharing

/// Which programs may use which tokens and access groups through the agent
/// (`keyshare policy allow|deny|list`, docs/agent.md "Policy"). The program is
/// the executable the agent verified at the hello (CallerCheck: race-free),
/// never anything the client says about itself, and is judged by what it is
/// (ProgramIdentity), not by the path it shows (issue 26, defect 7): a rule
/// names a program when the file at the rule's path NOW, in the agent's own
/// mount namespace, is the program's file (same device and inode: an upgrade
/// in place keeps the rule), or when the program's content has the SHA-256
/// recorded with the rule or that of the file at the path now (a copy of the
/// same program is the same program: a deny is not escaped by copying
/// python3 elsewhere, and an allow of a copy allows nothing new).
///
/// A policy is bound to one program at its hello (`bound(to:)`): the decisions
/// below take that program's name (AgentClient.exe); any other name is a
/// program no rule names.
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
///
/// An `unlock` rule (issue 27) decides no visibility: it names a program that
/// `keyshare unlock` without `--program` unlocks the token for (UnlockScope.swift).
/// It sits beside a program's allow or deny rule for the same token, never
/// replacing it.
///
/// Consent (docs/agent.md, "Consent"): on a token whose consent is `ask`, a
/// program with an allow rule naming it (`spares`) is not asked. "Always
/// allow" at the prompt writes such a rule, marked as written by the prompt
/// (`fromPrompt`): it spares the program the question and nothing else. It
/// does not turn the token into an allow-list (other programs are still asked,
/// not hidden), gives no access groups, and does not let the program see a
/// token an allow-list or a deny rule keeps from it.
public struct AgentPolicy: Sendable, Equatable {
    public enum Effect: String, Sendable { case allow, deny, unlock }

    public struct Rule: Sendable, Equatable, CustomStringConvertible {
        public var effect: Effect
        /// The resolved executable path, in the agent's mount namespace.
        public var exe: String
        /// nil: every token.
        public var tokenID: TokenID?
        /// The label at the time the rule was written (shown, not matched).
        public var tokenLabel: String?
        /// nil: every group (allow rules only).
        public var groups: [String]?
        /// SHA-256 of the file at `exe` when the rule was written (nil: rules
        /// of format 1, or a file that could not be hashed).
        public var digest: [UInt8]?
        /// That file's device and inode then (shown; matching uses the file at `exe` now).
        public var file: FileIdentity?
        /// Written by "Always allow" at the agent's prompt (an allow rule that
        /// only spares the program the consent question; the type's comment).
        public var fromPrompt: Bool

        public init(effect: Effect, exe: String, tokenID: TokenID? = nil, tokenLabel: String? = nil, groups: [String]? = nil,
                    digest: [UInt8]? = nil, file: FileIdentity? = nil, fromPrompt: Bool = false) {
            self.effect = effect
            self.exe = exe
            self.tokenID = tokenID
            self.tokenLabel = tokenLabel
            self.groups = groups
            self.digest = digest
            self.file = file
            self.fromPrompt = fromPrompt
        }

        public var description: String {
            var s = "\(effect.rawValue) \(exe)"
            s += tokenID.map { " token \(tokenLabel ?? "") (\($0))" } ?? " every token"
            if let groups { s += " groups \(groups.joined(separator: ","))" }
            if fromPrompt { s += " (always allowed at the prompt)" }
            return s
        }

        func covers(_ token: TokenID) -> Bool { tokenID == nil || tokenID == token }

        /// How this rule names `program`, if it does (the type's comment says when).
        public func names(_ program: ProgramIdentity) -> Match? {
            if FileIdentity(path: exe) == program.file { return .file }
            guard let d = program.digest else { return nil }
            if d == digest || d == ProgramDigests.file(at: exe)?.digest { return .content }
            return nil
        }
    }

    /// How a rule names a program: the file at its path is the program's, or the content is the same.
    public enum Match: String, Sendable { case file = "same file", content = "same content" }

    public var rules: [Rule]
    /// The program this policy is bound to (bound(to:)): its name and how each rule names it.
    private var subject: Subject?

    private struct Subject: Sendable, Equatable {
        let name: String
        let matches: [Match?]
    }

    public init(rules: [Rule] = []) { self.rules = rules }

    /// This policy for one program, its name `program.description`: the rules
    /// are matched once, here (a stat, and a digest the first time a file is seen).
    public func bound(to program: ProgramIdentity) -> AgentPolicy {
        var p = self
        p.subject = Subject(name: program.description, matches: rules.map { $0.names(program) })
        return p
    }

    /// How rule `i` names the program called `exe` (nil: it does not).
    private func match(_ i: Int, _ exe: String) -> Match? {
        guard let subject, subject.name == exe, i < subject.matches.count else { return nil }
        return subject.matches[i]
    }

    private func indices(_ effect: Effect, naming exe: String, where cond: (Rule) -> Bool = { _ in true }) -> [Int] {
        rules.indices.filter { rules[$0].effect == effect && cond(rules[$0]) && match($0, exe) != nil }
    }

    // MARK: decisions

    /// Whether E is refused as a whole, and why (nil: not refused).
    public func refusal(exe: String) -> String? {
        if let i = indices(.deny, naming: exe, where: { $0.tokenID == nil }).first {
            return "denied by rule \"\(rules[i])\" (\(match(i, exe)?.rawValue ?? ""))"
        }
        if rules.contains(where: { $0.effect == .allow && $0.tokenID == nil }),
           indices(.allow, naming: exe, where: { !$0.fromPrompt }).isEmpty {
            return "not in an allow rule, and allow rules cover every token"
        }
        return nil
    }

    /// Whether E may see token T.
    public func allows(exe: String, token: TokenID) -> Bool {
        if !indices(.deny, naming: exe, where: { $0.covers(token) }).isEmpty { return false }
        let allowing = rules.contains { $0.effect == .allow && !$0.fromPrompt && $0.covers(token) }
        return !allowing || !indices(.allow, naming: exe, where: { !$0.fromPrompt && $0.covers(token) }).isEmpty
    }

    /// Whether E uses T without the consent question: an allow rule names E
    /// for T (or every token), written by `keyshare policy allow` or by
    /// "Always allow" at the prompt.
    public func spares(exe: String, token: TokenID) -> Bool {
        !indices(.allow, naming: exe, where: { $0.covers(token) }).isEmpty
    }

    /// The access groups E may use; nil: every group.
    public func groups(exe: String) -> Set<String>? {
        let mine = indices(.allow, naming: exe, where: { !$0.fromPrompt }).map { rules[$0] }
        if mine.isEmpty || mine.contains(where: { $0.groups == nil }) { return nil }
        return Set(mine.flatMap { $0.groups ?? [] })
    }

    // MARK: editing

    /// The `unlock` rules that cover token T: the programs `keyshare unlock`
    /// without `--program` unlocks T for.
    public func unlockRules(token: TokenID) -> [Rule] {
        rules.filter { $0.effect == .unlock && $0.covers(token) }
    }

    /// Adds a rule, replacing any rule for the same executable and token of
    /// the same kind: allow and deny replace each other, an unlock rule only
    /// an unlock rule. (Editing unbinds: a bound policy is for deciding.)
    public mutating func set(_ rule: Rule) {
        subject = nil
        rules.removeAll { $0.exe == rule.exe && $0.tokenID == rule.tokenID && ($0.effect == .unlock) == (rule.effect == .unlock) }
        rules.append(rule)
    }

    /// Removes the rules of an executable (for one token, or all of them;
    /// only those of one effect when `effect` is given). Returns how many.
    public mutating func remove(exe: String, tokenID: TokenID?, effect: Effect? = nil) -> Int {
        subject = nil
        let before = rules.count
        rules.removeAll { $0.exe == exe && (tokenID == nil || $0.tokenID == tokenID) && (effect == nil || $0.effect == effect) }
        return before - rules.count
    }

    // MARK: storage (KeychainStore.agentPolicyData: the store's meta table)

    /// Format 2 adds the program's SHA-256 and device:inode to format 1's
    /// fields; format 1 is still read (its rules match by path only). Format
    /// 3 is format 2 with `unlock` rules: written only when the policy has
    /// one, so a policy without them stays readable by an agent that knows
    /// format 2 (and one with them is refused there as a whole, fail closed,
    /// rather than read without its unlock rules). Format 4 adds an eighth
    /// field, who wrote the rule (`prompt`: "Always allow" at the agent's
    /// prompt, else `-`): written only when some rule comes from the prompt.
    static let header4 = "keyshare-agent-policy 4"
    static let header3 = "keyshare-agent-policy 3"
    static let header = "keyshare-agent-policy 2"
    static let header1 = "keyshare-agent-policy 1"

    /// One line per rule, tab-separated: effect, exe, token ID or *, label,
    /// groups or *, SHA-256 (hex) or -, device:inode or -[, prompt or -].
    public func encoded() -> [UInt8] {
        let four = rules.contains { $0.fromPrompt }
        var lines = [four ? Self.header4 : rules.contains { $0.effect == .unlock } ? Self.header3 : Self.header]
        for r in rules {
            var f = [r.effect.rawValue, r.exe, r.tokenID?.description ?? "*", r.tokenLabel ?? "",
                     r.groups?.joined(separator: ",") ?? "*", r.digest.map(ProgramDigests.hex) ?? "-",
                     r.file.map { "\($0.device):\($0.inode)" } ?? "-"]
            if four { f.append(r.fromPrompt ? "prompt" : "-") }
            lines.append(f.joined(separator: "\t"))
        }
        return Array((lines.joined(separator: "\n") + "\n").utf8)
    }

    public struct Malformed: Error, CustomStringConvertible {
        public let description: String
    }

    public init(decoding bytes: [UInt8]) throws {
        let text = String(decoding: bytes, as: UTF8.self)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
        let fieldCount: Int
        switch lines.first {
        case Self.header4: fieldCount = 8
        case Self.header3, Self.header: fieldCount = 7
        case Self.header1: fieldCount = 5
        default: throw Malformed(description: "the agent policy has an unknown format")
        }
        let unlockRules = lines.first == Self.header3 || lines.first == Self.header4
        lines.removeFirst()
        rules = try lines.map { line in
            let f = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard f.count == fieldCount, let effect = Effect(rawValue: f[0]), f[1].hasPrefix("/"),
                  effect != .unlock || unlockRules else {
                throw Malformed(description: "the agent policy has a malformed rule")
            }
            var digest: [UInt8]?
            var file: FileIdentity?
            var fromPrompt = false
            if fieldCount == 8 {
                guard f[7] == "prompt" || f[7] == "-", f[7] == "-" || (effect == .allow && f[2] != "*") else {
                    throw Malformed(description: "the agent policy has a malformed rule source")
                }
                fromPrompt = f[7] == "prompt"
            }
            if fieldCount >= 7 {
                if f[5] != "-" {
                    guard let d = ProgramDigests.unhex(f[5]) else { throw Malformed(description: "the agent policy has a malformed digest") }
                    digest = d
                }
                if f[6] != "-" {
                    let parts = f[6].split(separator: ":", omittingEmptySubsequences: false)
                    guard parts.count == 2, let dev = UInt64(parts[0]), let ino = UInt64(parts[1]) else {
                        throw Malformed(description: "the agent policy has a malformed file identity")
                    }
                    file = FileIdentity(device: dev, inode: ino)
                }
            }
            var token: TokenID?
            if f[2] != "*" {
                guard let t = TokenID(f[2]) else { throw Malformed(description: "the agent policy names a malformed token ID") }
                token = t
            }
            let groups = f[4] == "*" ? nil : f[4].split(separator: ",").map(String.init)
            return Rule(effect: effect, exe: f[1], tokenID: token, tokenLabel: f[3].isEmpty ? nil : f[3], groups: fromPrompt ? nil : groups,
                        digest: digest, file: file, fromPrompt: fromPrompt)
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
