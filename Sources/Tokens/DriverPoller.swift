import Keychain
import KeyshareCrypto

/// Polls every configured external PKCS #11 module and mirrors what it sees
/// into the store. How a module is asked is the isolation: in a child
/// process (the CLI: a crash or hang kills only the child) or in this
/// process with a deadline (the PKCS #11 module, which must route signing
/// to the same loaded library anyway).
///
/// What a poll may write is the presence rule (docs/architecture.md, "Who
/// decides that a card is present"):
/// - the designated watcher (the process holding the PresenceOwner lock)
///   records what its module shows: insertions and removals;
/// - while a designated watcher lives, nobody else writes presence;
/// - otherwise a process records the cards it sees, and a removal only of a
///   card it saw itself in an earlier poll and no longer sees: a process
///   that never saw the card (no configuration for the module, a sandbox,
///   pcscd or polkit refusing it) cannot declare it gone;
/// - a module that fails (does not load, crashes, hangs) is reported as
///   failed, never as the removal of its cards.
public final class DriverPoller: @unchecked Sendable {
    public enum Isolation: Sendable {
        /// `executable driver snapshot --module PATH` prints a serialized snapshot.
        case childProcess(executable: String)
        case inProcess
    }

    public let store: KeychainStore
    public let isolation: Isolation
    /// Seconds one poll of one module may take before the driver is reported failed.
    public let timeout: Double
    /// Set when this poller belongs to the designated watcher.
    public let owner: PresenceOwner?
    private let lock = Lock()
    // Guarded by `lock`: drivers whose in-process call hung (never called again),
    // when a failed driver may be tried again, and the cards each driver
    // showed at this process's last successful poll of it.
    private var hung: Set<String> = []
    private var retryAfter: [String: Double] = [:]
    private var lastSeen: [String: Set<TokenID>] = [:]

    public init(store: KeychainStore, isolation: Isolation, timeout: Double = 5, owner: PresenceOwner? = nil) {
        self.store = store
        self.isolation = isolation
        self.timeout = timeout
        self.owner = owner
    }

    /// One snapshot of a module, isolated as configured, the module given
    /// `environment` (its stored variables, DriverEnvironment's rule).
    public func snapshot(modulePath: String, environment: [String: String] = [:]) throws -> DriverSnapshot {
        switch isolation {
        case .childProcess(let exe):
            switch try ChildProcess.run(exe, ["driver", "snapshot", "--module", modulePath], driverEnvironment: environment,
                                        timeout: timeout) {
            case .exited(0, let out):
                guard let s = DriverSnapshot(serialized: out) else { throw failure("returned an unreadable snapshot") }
                return s
            case .exited(let code, let out):
                let why = out.split(separator: "\n").first.map(String.init) ?? "exit status \(code)"
                throw failure(why)
            case .signaled(let sig): throw failure("the module crashed (signal \(sig))")
            case .timedOut: throw failure("the module did not answer within \(timeout) s")
            }
        case .inProcess:
            return try withDeadline(modulePath) { try DriverSnapshot.probe(modulePath: modulePath, environment: environment) }
        }
    }

    func failure(_ why: String) -> ExternalModuleError {
        ExternalModuleError(function: "poll", rv: 0, message: why)
    }

    /// Runs `body` on its own thread and gives up after `timeout`; a module
    /// that hung is never called again by this process.
    private func withDeadline(_ key: String, _ body: @escaping @Sendable () throws -> DriverSnapshot) throws -> DriverSnapshot {
        if lock.withLock({ hung.contains(key) }) { throw failure("the module hung earlier in this process") }
        let box = ResultBox()
        startThread {
            let r: Swift.Result<DriverSnapshot, Error> = Swift.Result { try body() }
            box.lock.withLock { box.value = r }
        }
        let end = monotonicSeconds() + timeout
        // The wait may last `timeout`: a fork need not wait for it (ForkGate).
        let result = ForkGate.outside { () -> Result<DriverSnapshot, Error>? in
            while monotonicSeconds() < end {
                if let r = box.lock.withLock({ box.value }) { return r }
                sleepSeconds(0.005)
            }
            return nil
        }
        if let result { return try result.get() }
        lock.withLock { _ = hung.insert(key) }
        throw failure("the module did not answer within \(timeout) s")
    }

    /// Whether this process may write presence now, and may it remove cards
    /// it never saw (only the designated watcher may).
    enum Authority: Equatable { case owner, witness, deferToWatcher }

    func authority() -> Authority {
        if let owner, owner.acquire() { return .owner }
        return PresenceOwner.watcherAlive(store: store) ? .deferToWatcher : .witness
    }

    /// Applies one successful snapshot of driver `name` by the presence rule.
    /// Returns what was recorded.
    @discardableResult
    public func apply(_ snap: DriverSnapshot, driver name: String) throws -> (inserted: [TokenID], removed: [TokenID]) {
        let seen = Set(ExternalDriver.presentTokens(snap, driver: name).keys)
        let before = lock.withLock { () -> Set<TokenID> in
            defer { lastSeen[name] = seen; retryAfter[name] = nil }
            return lastSeen[name] ?? []
        }
        let auth = authority()
        guard auth != .deferToWatcher else { return ([], []) }
        let result = try ExternalDriver.mirror(snap, driver: name, store: store) { id in
            auth == .owner || before.contains(id)
        }
        try store.setDriverStatus(name: name, "")
        return result
    }

    /// Records that driver `name` failed in this process: reported (and kept
    /// in `driver list` when this process may write presence), never a
    /// removal; retried after a pause.
    public func recordFailure(driver name: String, reason: String) {
        lock.withLock { retryAfter[name] = monotonicSeconds() + 10 }
        guard authority() != .deferToWatcher else { return }
        try? store.setDriverStatus(name: name, "failed: " + reason)
    }

    /// Records why a driver's last round failed, without a pause before the
    /// next (a long-lived event child reports and carries on).
    public func recordStatus(driver name: String, reason: String) {
        guard authority() != .deferToWatcher else { return }
        try? store.setDriverStatus(name: name, "failed: " + reason)
    }

    /// The tokens driver `name` showed at this process's last successful
    /// poll of it; nil if this process has not polled it successfully.
    /// `token list` tells from it a token this process's driver cannot see.
    public func seen(driver name: String) -> Set<TokenID>? {
        lock.withLock { lastSeen[name] }
    }

    /// Whether a failed driver is due for another try.
    public func due(_ name: String) -> Bool {
        guard let t = lock.withLock({ retryAfter[name] }) else { return true }
        return monotonicSeconds() >= t
    }

    /// Polls every configured driver once and applies it by the presence
    /// rule. Returns the failures of this round.
    @discardableResult
    public func pollAll() -> [(driver: String, reason: String)] {
        guard let drivers = try? store.drivers(), !drivers.isEmpty else { return [] }
        // The designated watcher records presence: reading the cards here
        // (seconds for a CAC card through OpenSC) would change nothing.
        guard authority() != .deferToWatcher else { return [] }
        var failures: [(String, String)] = []
        for d in drivers where due(d.name) {
            do {
                try apply(try snapshot(modulePath: d.modulePath, environment: d.environment), driver: d.name)
            } catch {
                let reason = "\(error)"
                failures.append((d.name, reason))
                recordFailure(driver: d.name, reason: reason)
            }
        }
        return failures
    }
}

private final class ResultBox: @unchecked Sendable {
    let lock = Lock()
    var value: Result<DriverSnapshot, Error>?
}
