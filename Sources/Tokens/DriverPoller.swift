import Keychain
import KeyshareCrypto

/// Polls every configured external PKCS #11 module and mirrors what it sees
/// into the store. How a module is asked is the isolation: in a child
/// process (the CLI: a crash or hang kills only the child) or in this
/// process with a deadline (the PKCS #11 module, which must route signing
/// to the same loaded library anyway).
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
    private let lock = Lock()
    // Guarded by `lock`: drivers whose in-process call hung (never called again),
    // and when a failed driver may be tried again.
    private var hung: Set<String> = []
    private var retryAfter: [String: Double] = [:]

    public init(store: KeychainStore, isolation: Isolation, timeout: Double = 5) {
        self.store = store
        self.isolation = isolation
        self.timeout = timeout
    }

    /// One snapshot of a module, isolated as configured.
    public func snapshot(modulePath: String) throws -> DriverSnapshot {
        switch isolation {
        case .childProcess(let exe):
            switch try ChildProcess.run(exe, ["driver", "snapshot", "--module", modulePath], timeout: timeout) {
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
            return try withDeadline(modulePath) { try DriverSnapshot.probe(modulePath: modulePath) }
        }
    }

    private func failure(_ why: String) -> ExternalModuleError {
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

    /// Polls every configured driver once and mirrors it. A failing driver is
    /// recorded (`driver list` shows why), its cards are withdrawn, and it is
    /// retried only after a pause. Returns the failures of this round.
    @discardableResult
    public func pollAll() -> [(driver: String, reason: String)] {
        guard let drivers = try? store.drivers() else { return [] }
        var failures: [(String, String)] = []
        let now = monotonicSeconds()
        for d in drivers {
            if let t = lock.withLock({ retryAfter[d.name] }), now < t { continue }
            do {
                let snap = try snapshot(modulePath: d.modulePath)
                try ExternalDriver.mirror(snap, driver: d.name, store: store)
                lock.withLock { retryAfter[d.name] = nil }
                try store.setDriverStatus(name: d.name, "")
            } catch {
                let reason = "\(error)"
                failures.append((d.name, reason))
                lock.withLock { retryAfter[d.name] = monotonicSeconds() + 10 }
                try? store.setDriverStatus(name: d.name, "failed: " + reason)
                try? ExternalDriver.withdrawAll(driver: d.name, store: store)
            }
        }
        return failures
    }
}

private final class ResultBox: @unchecked Sendable {
    let lock = Lock()
    var value: Result<DriverSnapshot, Error>?
}
