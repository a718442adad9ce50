#if canImport(Glibc)
import Glibc
#endif
import Keychain

/// How a card module tells that cards come and go.
public enum DriverEventMode: String, Sendable, CaseIterable {
    /// The module's blocking C_WaitForSlotEvent where it has one (OpenSC
    /// waits on pcscd), polling where it answers CKR_FUNCTION_NOT_SUPPORTED
    /// (SoftHSM2).
    case auto
    /// Always poll C_GetSlotList (the comparison for docs/benchmarks.md).
    case poll
}

/// The long-lived child (`keyshare driver events`) that watches one module
/// and writes what it sees, one line protocol on stdout:
///
///     MODE wait|poll      how events are found (again when it falls back)
///     T ... / O ... / END a snapshot (DriverSnapshot's text), when it changed
///     HB                  heartbeat, at least every `interval` seconds
///     FAIL <reason>       the module failed this round (not a removal)
///
/// With a blocking module, one thread sits in C_WaitForSlotEvent and wakes
/// the main loop, which takes a snapshot at once. OpenSC 0.23's wait has
/// known faults (events missed, returns that spin), so the main loop also
/// reads C_GetSlotList(TRUE) and the tokens every `safetyInterval` seconds
/// and compares, and a wait that returns at once 20 times in a row is
/// abandoned for polling.
public enum DriverEventSource {
    public static let safetyInterval = 2.0

    /// With KEYSHARE_DEBUG set: one line per step on stderr (the watcher
    /// sends it to KEYSHARE_DRIVER_LOG), with monotonic milliseconds.
    private static let debug = getenv("KEYSHARE_DEBUG").map { String(cString: $0) }.map { !$0.isEmpty && $0 != "0" } ?? false

    static func trace(_ what: @autoclosure () -> String) {
        guard debug else { return }
        let line = "driver-events[\(getpid())] \(Int(monotonicSeconds() * 1000)) \(what())\n"
        _ = line.withCString { write(2, $0, strlen($0)) }
    }

    public static func run(modulePath: String, interval: Double, mode: DriverEventMode,
                           emit: @escaping @Sendable (String) -> Bool) throws -> Never {
        // Orphaned (the watcher died, even by SIGKILL): leave at once. The
        // main thread may be stuck in the module (a pcscd that is gone), so
        // a thread of its own checks. Every exit here is _exit: the module's
        // C_Finalize could wait for the thread blocked in C_WaitForSlotEvent.
        let parent = getppid()
        startThread {
            while getppid() == parent { sleepSeconds(0.25) }
            _exit(0)
        }
        let lib = try PKCS11Library.shared(modulePath)
        let signal = EventSignal()
        var waiting = false
        if mode == .auto {
            let rv = lib.waitForSlotEvent(block: false).rv
            waiting = rv == 0 /* CKR_OK */ || rv == 0x8 /* CKR_NO_EVENT */
        }
        // A module without events (SoftHSM2) may list new tokens only after
        // C_Finalize + C_Initialize; a module whose events were only turned
        // off for a comparison lists them through C_GetSlotList.
        var rescan = !waiting && mode == .auto
        if waiting {
            startThread {
                var quick = 0
                while true {
                    let start = monotonicSeconds()
                    let (rv, slot) = lib.waitForSlotEvent(block: true)
                    trace("C_WaitForSlotEvent rv=0x\(String(rv, radix: 16)) slot=\(slot)")
                    if rv == 0 {
                        signal.post()
                    } else if rv != 0x8 /* CKR_NO_EVENT */ {
                        signal.fail(rv)
                        return
                    }
                    // A wait that returns at once, again and again, is broken.
                    quick = monotonicSeconds() - start < 0.05 ? quick + 1 : 0
                    if quick >= 20 {
                        signal.fail(0x8)
                        return
                    }
                }
            }
            // SoftHSM2 answers the non-blocking probe but refuses to block:
            // give the first wait a moment to say so before announcing the mode.
            if case .failed(let rv) = signal.wait(timeout: 0.05) {
                waiting = false
                rescan = rv == 0x54 /* CKR_FUNCTION_NOT_SUPPORTED */
            }
        }
        guard emit("MODE " + (waiting ? "wait" : "poll")) else { _exit(0) }
        var lastText: String?
        var lastFailure: String?
        var nextCheck = 0.0
        while true {
            var woke = false
            switch signal.wait(timeout: interval) {
            case .event: woke = true
            case .timeout: break
            case .failed(let rv):
                // The module's wait broke: poll from now on.
                waiting = false
                rescan = rv == 0x54 /* CKR_FUNCTION_NOT_SUPPORTED */
                guard emit("MODE poll") else { _exit(0) }
                woke = true
            }
            let now = monotonicSeconds()
            if woke || now >= nextCheck {
                nextCheck = now + (waiting ? max(interval, safetyInterval) : interval)
                // The whole snapshot, not only the slot list: objects written
                // to a present card (enrolment) must show too. A module
                // caches what it read from a card, so this is cheap.
                do {
                    if rescan { lib.rescanIfIdle() }
                    trace("snapshot (woke=\(woke))")
                    let text = try DriverSnapshot.read(lib).serialized()
                    trace("snapshot done, \(text.count) bytes\(text == lastText ? ", unchanged" : "")")
                    lastFailure = nil
                    if text != lastText {
                        lastText = text
                        guard emit(text) else { _exit(0) }
                        continue
                    }
                } catch {
                    // Said once per kind of failure; the next success is sent in full.
                    lastText = nil
                    let reason = "\(error)".split(separator: "\n").first.map(String.init) ?? "error"
                    if reason != lastFailure {
                        lastFailure = reason
                        guard emit("FAIL " + reason) else { _exit(0) }
                        continue
                    }
                }
            }
            guard emit("HB") else { _exit(0) }
        }
    }
}

/// Wakes the event loop from the waiting thread.
final class EventSignal: @unchecked Sendable {
    enum Wake: Equatable { case event, timeout, failed(UInt) }

    private var mutex = pthread_mutex_t()
    private var cond = pthread_cond_t()
    private var pending = false
    private var failure: UInt?

    init() {
        pthread_mutex_init(&mutex, nil)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(&cond, &attr)
        pthread_condattr_destroy(&attr)
    }

    func post() {
        pthread_mutex_lock(&mutex)
        pending = true
        pthread_cond_signal(&cond)
        pthread_mutex_unlock(&mutex)
    }

    /// The waiting thread gave up (`rv`: why); reported once.
    func fail(_ rv: UInt) {
        pthread_mutex_lock(&mutex)
        failure = rv
        pthread_cond_signal(&cond)
        pthread_mutex_unlock(&mutex)
    }

    /// An event (consumed), a failure (consumed), or the timeout.
    func wait(timeout: Double) -> Wake {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let ns = Int(deadline.tv_nsec) + Int(timeout * 1e9)
        deadline.tv_sec += ns / 1_000_000_000
        deadline.tv_nsec = ns % 1_000_000_000
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        while !pending && failure == nil {
            if pthread_cond_timedwait(&cond, &mutex, &deadline) == ETIMEDOUT { break }
        }
        if let rv = failure {
            failure = nil
            return .failed(rv)
        }
        if pending {
            pending = false
            return .event
        }
        return .timeout
    }
}

/// The watcher's side: one `driver events` child per configured module,
/// their output read in one loop. A snapshot is applied by the presence
/// rule (DriverPoller.apply) the moment it arrives; a child that crashes
/// is reported failed and started again after a pause; one whose
/// heartbeat stops for `hangTimeout` seconds is killed and reported hung.
final class DriverStreams: @unchecked Sendable {
    let poller: DriverPoller
    let executable: String
    let interval: Double
    let mode: DriverEventMode

    private final class Child {
        let name: String
        let modulePath: String
        let environment: [String: String]
        let pid: pid_t
        let fd: Int32
        var buffer: [UInt8] = []
        var snapshotLines: [Substring] = []
        var lastHeard: Double
        /// The last FAIL line: why a child that then exits stopped.
        var lastFailure: String?
        init(name: String, modulePath: String, environment: [String: String], pid: pid_t, fd: Int32) {
            self.name = name
            self.modulePath = modulePath
            self.environment = environment
            self.pid = pid
            self.fd = fd
            lastHeard = monotonicSeconds()
        }
    }

    private var children: [String: Child] = [:]  // only touched by the run loop's thread

    /// How long a child may go without a heartbeat before it is called hung:
    /// binding a real card can take seconds (the virtual CAC takes 2 s, a
    /// card with large certificates behind a slow reader more), during which
    /// the module holds its lock and the child's loop waits.
    var hangTimeout: Double { max(poller.timeout, 20) }

    init(poller: DriverPoller, executable: String, interval: Double, mode: DriverEventMode) {
        self.poller = poller
        self.executable = executable
        self.interval = interval
        self.mode = mode
    }

    /// Runs until `stopped` says so; `applied` is called after each snapshot
    /// was applied, `failed` for each failure, `modeChanged` with a driver's
    /// event mode ("wait" or "poll").
    func run(stopped: () -> Bool, applied: () -> Void, failed: (String, String) -> Void, modeChanged: (String, String) -> Void) {
        defer { for c in children.values { stop(c) } }
        var nextConfigRead = 0.0
        while !stopped() {
            let now = monotonicSeconds()
            if now >= nextConfigRead {
                nextConfigRead = now + max(interval, 0.5)
                reconcile(failed: failed)
            }
            let list = Array(children.values)
            var fds = list.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            let waitMs = Int32(max(interval, 0.05) * 1000)
            if fds.isEmpty {
                sleepSeconds(max(interval, 0.05))
                continue
            }
            let r = poll(&fds, nfds_t(fds.count), waitMs)
            if r < 0 && errno != EINTR { sleepSeconds(0.1) }
            for (i, c) in list.enumerated() where fds[i].revents != 0 {
                var buf = [UInt8](repeating: 0, count: 65536)
                let n = buf.withUnsafeMutableBytes { read(c.fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 {
                    ended(c, failed: failed)
                    continue
                }
                c.lastHeard = monotonicSeconds()
                c.buffer += buf.prefix(n)
                while let nl = c.buffer.firstIndex(of: 0x0A) {
                    let line = String(decoding: c.buffer[..<nl], as: UTF8.self)
                    c.buffer.removeFirst(nl + 1)
                    handle(line, c, applied: applied, failed: failed, modeChanged: modeChanged)
                }
                if c.buffer.count > 64 << 20 {  // a runaway child
                    stop(c)
                    children[c.name] = nil
                    fail(c.name, "the module's watcher wrote too much", failed)
                }
            }
            let t = monotonicSeconds()
            for c in Array(children.values) where t - c.lastHeard > hangTimeout {
                stop(c)
                children[c.name] = nil
                fail(c.name, "the module did not answer within \(Int(hangTimeout)) s", failed)
            }
        }
    }

    /// Children for the configured drivers: new ones started (when due),
    /// removed, re-pointed or reconfigured (`driver set-env`) ones stopped.
    private func reconcile(failed: (String, String) -> Void) {
        guard let drivers = try? poller.store.drivers() else { return }
        let wanted = Dictionary(drivers.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        for c in Array(children.values)
        where wanted[c.name]?.modulePath != c.modulePath || wanted[c.name]?.environment != c.environment {
            stop(c)
            children[c.name] = nil
        }
        for (name, d) in wanted.sorted(by: { $0.key < $1.key }) where children[name] == nil && poller.due(name) {
            do {
                let (pid, fd) = try ChildProcess.spawn(executable, [
                    "driver", "events", "--module", d.modulePath, "--interval", "\(interval)", "--mode", mode.rawValue,
                ], driverEnvironment: d.environment)
                children[name] = Child(name: name, modulePath: d.modulePath, environment: d.environment, pid: pid, fd: fd)
            } catch {
                fail(name, "\(error)", failed)
            }
        }
    }

    private func handle(_ line: String, _ c: Child, applied: () -> Void, failed: (String, String) -> Void,
                        modeChanged: (String, String) -> Void) {
        if line == "HB" { return }
        if line.hasPrefix("MODE ") { return modeChanged(c.name, String(line.dropFirst(5))) }
        if line.hasPrefix("FAIL ") {
            c.lastFailure = String(line.dropFirst(5))
            return fail(c.name, String(line.dropFirst(5)), failed, retry: false)
        }
        c.snapshotLines.append(Substring(line))
        guard line == "END" else { return }
        let text = c.snapshotLines.joined(separator: "\n") + "\n"
        c.snapshotLines.removeAll()
        guard let snap = DriverSnapshot(serialized: text) else { return fail(c.name, "returned an unreadable snapshot", failed) }
        do {
            DriverEventSource.trace("watcher: snapshot of \(c.name) received (\(snap.tokens.count) token(s))")
            try poller.apply(snap, driver: c.name)
            DriverEventSource.trace("watcher: applied")
            applied()
            DriverEventSource.trace("watcher: events delivered")
        } catch {
            failed(c.name, "\(error)")
        }
    }

    /// The child's output ended: it exited or crashed.
    private func ended(_ c: Child, failed: (String, String) -> Void) {
        close(c.fd)
        children[c.name] = nil
        var status: Int32 = 0
        while waitpid(c.pid, &status, 0) < 0 && errno == EINTR {}
        if status & 0x7F != 0 {
            fail(c.name, "the module crashed (signal \(status & 0x7F))", failed)
        } else if let said = c.lastFailure {
            poller.recordFailure(driver: c.name, reason: said)  // already reported: only the pause before a restart
        } else {
            fail(c.name, "the module's watcher exited (status \((status >> 8) & 0xFF))", failed)
        }
    }

    private func fail(_ name: String, _ reason: String, _ failed: (String, String) -> Void, retry: Bool = true) {
        if retry { poller.recordFailure(driver: name, reason: reason) } else { poller.recordStatus(driver: name, reason: reason) }
        failed(name, reason)
    }

    private func stop(_ c: Child) {
        kill(c.pid, SIGKILL)
        close(c.fd)
        var status: Int32 = 0
        while waitpid(c.pid, &status, 0) < 0 && errno == EINTR {}
    }
}
