import Keychain
import KeyshareCrypto

/// Something that happened to a token, in the order it happened.
public enum TokenEvent: Equatable, Sendable, CustomStringConvertible {
    case inserted(TokenID)
    case removed(TokenID)

    public var description: String {
        switch self {
        case .inserted(let id): "inserted \(id)"
        case .removed(let id): "removed \(id)"
        }
    }
}

/// Presence of every token as the store reports it: whether it is present
/// and how many times it was inserted or removed (its presence generation).
public typealias PresenceState = [TokenID: (present: Bool, generation: Int64)]

/// Turns successive presence states into events. Generations make a quick
/// remove+insert between two polls still give both events, in order, so
/// none is lost or duplicated however slowly the watcher polls.
public struct PresenceTracker: Sendable {
    private var last: [TokenID: (present: Bool, generation: Int64)]?

    public init() {}

    public mutating func update(_ state: PresenceState) -> [TokenEvent] {
        guard let previous = last else {
            last = state
            return state.filter(\.value.present).keys.sorted().map { .inserted($0) }
        }
        var events: [TokenEvent] = []
        for id in Set(previous.keys).union(state.keys).sorted() {
            let before = previous[id] ?? (false, 0)
            let after = state[id] ?? (false, before.generation)
            var transitions = max(0, after.generation - before.generation)
            let flips = before.present != after.present
            if flips && transitions % 2 == 0 { transitions += 1 }
            if !flips && transitions % 2 == 1 { transitions -= 1 }
            var present = before.present
            for _ in 0..<transitions {
                present.toggle()
                events.append(present ? .inserted(id) : .removed(id))
            }
        }
        last = state
        return events
    }

    /// Present token IDs as of the last update.
    public var present: Set<TokenID> { Set((last ?? [:]).filter(\.value.present).keys) }
}

/// Shaped like CryptoTokenKit's TKTokenWatcher: the token IDs present, an
/// insertion handler (called for every token already present when it is
/// set, then for each new one) and one-shot removal handlers per token ID.
/// Sees soft tokens created, inserted, removed or deleted by any process
/// (it polls the store's presence generations, one cheap query) and, with a
/// `DriverPoller`, cards appearing and disappearing in external modules.
public final class TokenWatcher: @unchecked Sendable {
    public typealias Handler = @Sendable (TokenID) -> Void

    public let store: KeychainStore
    public let interval: Double
    public let drivers: DriverPoller?
    public let driverInterval: Double
    /// How external modules are watched when their poller runs them in child
    /// processes: one long-lived `driver events` child per module, using the
    /// module's blocking C_WaitForSlotEvent where it has one (DriverEvents.swift).
    public let driverEvents: DriverEventMode
    /// Told when an external module fails (crash, hang, error); the watcher carries on.
    public var driverFailureHandler: (@Sendable (_ driver: String, _ reason: String) -> Void)?
    /// Told how each module's events are found ("wait": C_WaitForSlotEvent, "poll").
    public var driverModeHandler: (@Sendable (_ driver: String, _ mode: String) -> Void)?

    private let lock = Lock()
    // Guarded by `lock`.
    private var tracker = PresenceTracker()
    private var insertion: Handler?
    private var removal: [TokenID: [Handler]] = [:]
    private var running = false
    private var stopped = false
    /// Serialises whole poll rounds so events are delivered in order.
    private let pollLock = Lock()

    public init(store: KeychainStore, interval: Double = 0.2, drivers: DriverPoller? = nil, driverInterval: Double = 0.5,
                driverEvents: DriverEventMode = .auto) {
        self.store = store
        self.interval = interval
        self.drivers = drivers
        self.driverInterval = driverInterval
        self.driverEvents = driverEvents
    }

    /// The token IDs present now.
    public var tokenIDs: [TokenID] {
        _ = try? poll()
        return lock.withLock { tracker.present.sorted() }
    }

    /// Sets the insertion handler and calls it at once for every token present.
    public func setInsertionHandler(_ handler: @escaping Handler) {
        _ = try? poll()
        let present = lock.withLock { () -> [TokenID] in
            insertion = handler
            return tracker.present.sorted()
        }
        for id in present { handler(id) }
    }

    /// Called once, when the token with this ID is removed.
    public func addRemovalHandler(_ handler: @escaping Handler, forTokenID id: TokenID) {
        lock.withLock { removal[id, default: []].append(handler) }
    }

    /// The store's presence of every token, including tokens made before
    /// presence generations existed (generation 0). `presence()` reads state
    /// and generation in one query; only tokens it lacks come from the
    /// second read, so a change between the two cannot pair a new state
    /// with an old generation (which would lose a remove+insert pair).
    public static func readPresence(_ store: KeychainStore) throws -> PresenceState {
        var state = try store.presence()
        for rec in try store.tokens() where state[rec.tokenID] == nil {
            state[rec.tokenID] = (rec.present, 0)
        }
        return state
    }

    /// One round: read presence, deliver the events. Handlers run outside the
    /// lock (they may call back into the watcher).
    @discardableResult
    public func poll() throws -> [TokenEvent] {
        try pollLock.withLock {
            let state = try Self.readPresence(store)
            let events = lock.withLock { tracker.update(state) }
            // One event at a time: an insertion handler may add the removal
            // handler that the very next event (a quick removal) must find.
            for e in events {
                let calls = lock.withLock { () -> [Handler] in
                    switch e {
                    case .inserted: insertion.map { [$0] } ?? []
                    case .removed(let id): removal.removeValue(forKey: id) ?? []
                    }
                }
                switch e {
                case .inserted(let id), .removed(let id): for h in calls { h(id) }
                }
            }
            return events
        }
    }

    /// Starts polling on background threads: presence every `interval`,
    /// external modules every `driverInterval` (on their own thread, so a
    /// slow module never delays soft-token events).
    public func start() {
        let go = lock.withLock { () -> Bool in
            guard !running else { return false }
            running = true
            return true
        }
        guard go else { return }
        startThread { [self] in
            while !lock.withLock({ stopped }) {
                _ = try? poll()
                sleepSeconds(interval)
            }
        }
        guard let drivers else { return }
        // The designated watcher, when the poller is meant to be one and no
        // other process is: it alone then records card presence.
        _ = drivers.owner?.acquire()
        if case .childProcess(let exe) = drivers.isolation {
            startThread { [self] in
                let streams = DriverStreams(poller: drivers, executable: exe, interval: driverInterval, mode: driverEvents)
                streams.run(
                    stopped: { lock.withLock { stopped } },
                    applied: { _ = try? poll() },  // deliver the events now, not at the next store poll
                    failed: { driverFailureHandler?($0, $1) },
                    modeChanged: { driverModeHandler?($0, $1) })
            }
        } else {
            startThread { [self] in
                while !lock.withLock({ stopped }) {
                    for f in drivers.pollAll() { driverFailureHandler?(f.driver, f.reason) }
                    sleepSeconds(driverInterval)
                }
            }
        }
    }

    public func stop() {
        lock.withLock { stopped = true }
    }
}
