import KeySharing
import Keychain
import PKCS11

/// Unlock across processes (`keyshare unlock --for D`, `keyshare lock`;
/// docs/agent.md "Unlock across processes"): the agent's table of unlocked
/// tokens, checked at every use, and handed to clients in numbered snapshots.
extension Agent {
    /// Unlocks `token` for the programs of `scope` (replacing the token's
    /// earlier unlock); a scope of no program keeps nothing and changes nothing.
    func unlock(token: TokenID, key: TokenKey, seconds: Double, scope: UnlockScope) {
        guard !scope.programs.isEmpty else { return }
        lock.withLock {
            unlockGeneration += 1
            unlocked[token] = Unlocked(key: key, generation: unlockGeneration, expires: Agent.monotonic() + seconds, scope: scope)
        }
        pushUnlocks()
    }

    /// Ends unlocks (one token or every token); returns how many.
    /// Every client drops its shared login now, and with the table's and
    /// the clients' references gone each TokenKey is zeroed (its deinit).
    @discardableResult
    func endUnlock(token: TokenID?, why: String) -> Int {
        let ended = lock.withLock { () -> [TokenID] in
            let gone = unlocked.keys.filter { token == nil || $0 == token }
            for t in gone { unlocked[t] = nil }
            return gone
        }
        for t in ended { AgentLog.line("token \(t): \(why)") }
        if !ended.isEmpty { pushUnlocks() }
        return ended.count
    }

    func expireUnlocks(now: Double) {
        let expired = lock.withLock { unlocked.filter { $0.value.expires <= now }.map(\.key) }
        for token in expired { endUnlock(token: token, why: "unlock expired") }
    }

    func nextExpiry() -> Double? {
        lock.withLock { unlocked.values.map(\.expires).min() }
    }

    /// Token -> seconds left and programs, one "ID<TAB>seconds<TAB>paths
    /// (comma-separated)" line per unlocked token.
    func unlockedSummary() -> String {
        let now = Agent.monotonic()
        return lock.withLock {
            unlocked.filter { $0.value.expires > now }
                .map { "\($0.key)\t\(Int(($0.value.expires - now).rounded(.up)))\t\($0.value.scope.programs.map(\.path).joined(separator: ","))" }
                .sorted().joined(separator: "\n")
        }
    }

    /// The unlocks a client gets: those not yet expired (checked here, at
    /// every use, not only by the loop's sweep), that name the client's
    /// program (UnlockScope), for the tokens its policy lets it see; none for
    /// a client that authenticates a person (UnlockBarrier, decided outside
    /// the agent's lock: it may read the disk once).
    func sharedUnlocks(for client: AgentClient) -> (table: [TokenID: SharedUnlock], snapshot: UInt64) {
        let (out, snapshot) = lock.withLock { () -> ([TokenID: SharedUnlock], UInt64) in
            // The time is read under the lock, with the snapshot's number: a
            // higher number never holds an unlock a lower one had dropped.
            let now = Agent.monotonic()
            unlockSnapshot += 1
            var out: [TokenID: SharedUnlock] = [:]
            for (t, u) in unlocked where u.expires > now && u.scope.reaches(client.unlockBarrier.program)
                && client.policy.allows(exe: client.exe, token: t) {
                out[t] = SharedUnlock(key: u.key, generation: u.generation)
            }
            return (out, unlockSnapshot)
        }
        guard !out.isEmpty, client.unlockBarrier.refusal(pid: client.pid) == nil else { return ([:], snapshot) }
        return (out, snapshot)
    }

    /// Applies the unlock table to `client` now (before each of its calls,
    /// and after every change of the table). Stale tables are dropped by the
    /// client's runtime (the snapshot number), whichever thread applies last.
    func applyUnlocks(to client: AgentClient) {
        let (table, snapshot) = sharedUnlocks(for: client)
        client.module.applySharedUnlocks(table, snapshot: snapshot)
    }

    /// The key of `token` while it is unlocked (not expired) for `program`, for
    /// the password service (ControlServer, servePassword); nil otherwise.
    func unlockedKey(token: TokenID, for program: ProgramIdentity) -> TokenKey? {
        let now = Agent.monotonic()
        return lock.withLock {
            guard let u = unlocked[token], u.expires > now, u.scope.reaches(program) else { return nil }
            return u.key
        }
    }

    /// Whether `token` is unlocked for any program now (for the password service's refusal text).
    func isUnlocked(token: TokenID) -> Bool {
        let now = Agent.monotonic()
        return lock.withLock { (unlocked[token]?.expires ?? 0) > now }
    }
}
