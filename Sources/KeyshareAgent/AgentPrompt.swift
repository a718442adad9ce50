#if canImport(Glibc)
import Glibc
#endif
import KeySharing
import Keychain
import KeyshareCrypto
import PKCS11

/// The agent's prompt for one client (docs/agent.md, "The agent's prompt" and
/// "Consent"): the ClientPrompt its Module gets. The PIN prompt and the
/// consent question run pinentry (Pinentry.swift) on the client's display or
/// terminal, naming the program as the agent identified it.
///
/// Consent, for a key of a token whose consent is `ask`:
/// - an allow rule for the program and token (the policy at the hello, or
///   the store's policy now) spares the question;
/// - the answers this process got are kept for its life: "Allow once" per
///   key, "Always allow" per token (and written as a rule), "Deny" per key
///   (no prompt storm from a program that retries);
/// - with no way to ask (no display or terminal, no pinentry, a pinentry that
///   cannot show itself): refused, with a log line;
/// - no answer in time, or the client gone: cancelled, nothing remembered.
/// One dialog at a time per client: a second waits (at most the timeout),
/// then finds the first one's answer.
final class AgentPrompt: @unchecked Sendable {
    let agent: Agent
    let settings: PinentrySettings?
    let place: PromptPlace
    let program: ProgramIdentity
    let pid: pid_t
    /// The client's policy as bound at its hello.
    let policy: AgentPolicy

    private let lock = Lock()
    private var allowedOnce: Set<PersistentReference> = []
    private var denied: Set<PersistentReference> = []
    private var alwaysTokens: Set<TokenID> = []
    private var busy = false

    init(agent: Agent, settings: PinentrySettings?, display: ClientDisplay, pidfd: Int32, program: ProgramIdentity, pid: pid_t,
         policy: AgentPolicy) {
        self.agent = agent
        self.settings = settings
        var shown = display
        if let tty = display.tty, !Self.isTerminal(tty, of: pid) {
            AgentLog.line("pid \(pid): the terminal \(tty) it named is not its own: its prompts use its display only")
            shown.tty = nil
        }
        // A copy of the pidfd, owned here: the dialog ends when the client exits.
        self.place = PromptPlace(display: shown, abortFD: pidfd >= 0 ? fcntl(pidfd, F_DUPFD_CLOEXEC, 3) : -1)
        self.program = program
        self.pid = pid
        self.policy = policy
    }

    deinit { if place.abortFD >= 0 { close(place.abortFD) } }

    var clientPrompt: ClientPrompt {
        ClientPrompt(available: { [self] in available }, pin: { [self] q in askPIN(q) }, consent: { [self] q in consent(q) },
                     audit: { [program, pid] use in Audit.shared.record(.init(program: program.description, pid: pid, use: use)) })
    }

    var available: Bool { settings != nil && place.reachable }

    /// Whether `path` is a terminal of the client's: a character device of
    /// this user that is the client's controlling terminal or on its
    /// descriptor 0, 1 or 2. The hello's terminal is the client's word; a
    /// prompt must not be put on another session's terminal.
    static func isTerminal(_ path: String, of pid: pid_t) -> Bool {
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFCHR, st.st_uid == geteuid() else { return false }
        for fd in 0...2 {
            var f = stat()
            if stat("/proc/\(pid)/fd/\(fd)", &f) == 0, (f.st_mode & S_IFMT) == S_IFCHR, f.st_rdev == st.st_rdev { return true }
        }
        // /proc/PID/stat: "pid (comm) state ppid pgrp session tty_nr ...".
        let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var buf = [UInt8](repeating: 0, count: 1024)
        let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0, let close = buf.prefix(n).lastIndex(of: 0x29 /* ) */) else { return false }
        let fields = buf[(close + 1)..<n].split(separator: 0x20)
        guard fields.count > 4, let ttyNR = UInt64(String(decoding: fields[4], as: UTF8.self)), ttyNR != 0 else { return false }
        return ttyNR == UInt64(st.st_rdev)
    }

    /// The program as a person should read it: its path as the client names
    /// it (shortened from the left), and a warning when the file at that path
    /// here is another file (a client in its own mount namespace can make
    /// /proc/PID/exe show any path).
    var programName: String {
        var p = program.path
        if p.utf8.count > 160 { p = "…" + String(decoding: Array(p.utf8).suffix(150), as: UTF8.self) }
        let same = FileIdentity(path: program.path) == program.file
        return same ? "\(p) (pid \(pid))" : "a program calling itself \(p) (pid \(pid); not the file at that path)"
    }

    private var who: String { "pid \(pid) (\(program.path))" }

    // MARK: the PIN

    func askPIN(_ q: PINQuestion) -> [UInt8]? {
        guard let settings, place.reachable else { return nil }
        guard acquire(settings) else {
            AgentLog.line("\(who): PIN prompt for token \(q.token) not shown: another prompt for this client did not end in time")
            return nil
        }
        defer { release() }
        let label = Self.short(q.tokenLabel)
        var desc = "\(programName) asks for the \(q.kind.rawValue) of token “\(label)”."
        var texts = Pinentry.Texts(title: "keyshare: \(label)", description: "")
        if let left = q.attemptsLeft {
            desc += "\n\nA wrong PIN was entered before: \(left) attempt\(left == 1 ? "" : "s") left before the PIN locks."
            texts.error = "Wrong PIN before: \(left) attempt\(left == 1 ? "" : "s") left"
        }
        desc += "\n\nCancel if you did not expect this request."
        texts.description = desc
        switch Pinentry.getPIN(settings, place, texts) {
        case .success(let pin):
            AgentLog.line("\(who): PIN prompt for token \(q.token): answered")
            return pin
        case .failure(let f):
            AgentLog.line("\(who): PIN prompt for token \(q.token): \(f)")
            return nil
        }
    }

    // MARK: consent

    func consent(_ q: ConsentQuestion) -> ConsentAnswer {
        if let known = remembered(q) { return known }
        guard let settings, place.reachable else {
            // Its display and terminal are fixed at the hello: refused for this process's life, logged once per key.
            lock.withLock { _ = denied.insert(q.keyReference) }
            AgentLog.line("\(who): use of key “\(Self.short(q.keyLabel))” of token \(q.token) to \(q.use.rawValue) refused: the token asks for consent and no prompt can reach this client (\(settings == nil ? "no pinentry" : "no display or terminal"))")
            return .rejected
        }
        guard acquire(settings) else {
            AgentLog.line("\(who): consent for token \(q.token) not asked: another prompt for this client did not end in time")
            return .canceled
        }
        defer { release() }
        if let known = remembered(q) { return known }  // answered while this one waited
        let label = Self.short(q.tokenLabel)
        let key = q.keyLabel.isEmpty ? "a key (ID \(ProgramDigests.hex(q.keyID).prefix(16)))" : "the key “\(Self.short(q.keyLabel))”"
        var texts = Pinentry.Texts(title: "keyshare: use of a key of \(label)", description: """
            \(programName) wants to use \(key) of token “\(label)” to \(q.use.rawValue).

            Allow once: this process, this key. Always allow: this program, every key of “\(label)”, \
            without asking again (keyshare policy list shows the rule).
            """)
        texts.ok = "Allow once"
        texts.notOK = "Always allow"
        texts.cancel = "Deny"
        let what = "use of key “\(Self.short(q.keyLabel))” of token \(q.token) to \(q.use.rawValue)"
        switch Pinentry.confirm(settings, place, texts) {
        case .success(.ok):
            lock.withLock { _ = allowedOnce.insert(q.keyReference) }
            AgentLog.line("\(who): \(what): allowed once")
            return .allowed
        case .success(.notOK):
            lock.withLock { _ = alwaysTokens.insert(q.token) }
            let written = writeRule(q)
            AgentLog.line("\(who): \(what): always allowed\(written ? " (allow rule written)" : " for this process (no rule could be written)")")
            return .allowed
        case .success(.cancel):
            lock.withLock { _ = denied.insert(q.keyReference) }
            AgentLog.line("\(who): \(what): denied")
            return .rejected
        case .failure(let f):
            AgentLog.line("\(who): \(what): \(f)")
            if case .failed = f { return .rejected }  // no prompt could be shown: refused
            return .canceled
        }
    }

    /// An answer already known: this process's, or an allow rule (the bound
    /// policy, then the store's now: a rule written since the hello counts).
    private func remembered(_ q: ConsentQuestion) -> ConsentAnswer? {
        if let a = lock.withLock({ () -> ConsentAnswer? in
            if allowedOnce.contains(q.keyReference) || alwaysTokens.contains(q.token) { return .allowed }
            return denied.contains(q.keyReference) ? .rejected : nil
        }) { return a }
        let exe = program.description
        if policy.spares(exe: exe, token: q.token) { return .allowed }
        if let now = try? agent.policy().bound(to: program), now.spares(exe: exe, token: q.token) {
            lock.withLock { _ = alwaysTokens.insert(q.token) }
            return .allowed
        }
        return nil
    }

    /// "Always allow": an allow rule for this program (its path, file and
    /// SHA-256) and the token, marked as the prompt's, in the store's policy.
    private func writeRule(_ q: ConsentQuestion) -> Bool {
        let path = program.path
        guard path.hasPrefix("/"), path.utf8.count <= 4096, !path.contains("\t"), !path.contains("\n") else { return false }
        let label = String(q.tokenLabel.map { $0 == "\t" || $0 == "\n" || $0 == "\r" ? " " : $0 })
        do {
            guard let store = try agent.openStore() else { return false }
            try store.transaction { () throws in
                var p = try AgentPolicy.load(from: store)
                p.set(AgentPolicy.Rule(effect: .allow, exe: path, tokenID: q.token, tokenLabel: label, digest: program.digest,
                                       file: program.file, fromPrompt: true))
                try p.save(to: store)
            }
            return true
        } catch {
            AgentLog.line("\(who): cannot write the allow rule for token \(q.token): \(error)")
            return false
        }
    }

    // MARK: one dialog at a time

    private func acquire(_ settings: PinentrySettings) -> Bool {
        let until = Agent.monotonic() + Double(settings.timeout)
        while true {
            if lock.withLock({ () -> Bool in
                if busy { return false }
                busy = true
                return true
            }) { return true }
            if Agent.monotonic() >= until { return false }
            usleep(50_000)
        }
    }

    private func release() { lock.withLock { busy = false } }

    static func short(_ s: String) -> String {
        s.utf8.count <= 64 ? s : String(decoding: Array(s.utf8).prefix(60), as: UTF8.self) + "…"
    }
}
