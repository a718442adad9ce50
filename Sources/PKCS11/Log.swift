#if canImport(Glibc)
import Glibc
#endif
import CPKCS11

/// The KEYSHARE_DEBUG call log. The environment is read once, on first use,
/// so a disabled log costs one load of a constant per call. Callers pass only
/// handles, mechanism numbers and flags: never a PIN, key or data buffer.
public enum Log {
    /// Where log lines go, or -1 when logging is off.
    /// Read with secure_getenv (ks_secure_getenv): in a setuid or setgid host
    /// (sudo or su through pam_p11) the environment is the invoker's, and
    /// KEYSHARE_LOG would have root create or append to any file it names.
    private static let fd: Int32 = {
        guard let v = ks_secure_getenv("KEYSHARE_DEBUG"), let s = String(validatingCString: v), !s.isEmpty, s != "0" else {
            return -1
        }
        if let p = ks_secure_getenv("KEYSHARE_LOG"), let path = String(validatingCString: p), !path.isEmpty {
            let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
            if fd >= 0 { return fd }
        }
        return STDERR_FILENO
    }()

    /// In the agent (docs/agent.md, "Debug log"), each client's calls are
    /// logged to the descriptor that client sent (its KEYSHARE_LOG file or its
    /// stderr), with the client's pid: a thread-local destination set around
    /// each call. Never set in-process, where `enabled` stays one load.
    nonisolated(unsafe) private static var destinationsUsed = false
    private static let destinationKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Runs `body` with this thread's log lines going to `fd`, prefixed with `pid`.
    public static func withDestination<T>(fd: Int32, pid: Int32, _ body: () throws -> T) rethrows -> T {
        guard fd >= 0 else { return try body() }
        destinationsUsed = true
        // fd and pid packed in the key's pointer value (never zero: fd + 1).
        let packed = UInt(UInt32(bitPattern: pid)) << 32 | UInt(UInt32(fd) + 1)
        let previous = pthread_getspecific(destinationKey)
        pthread_setspecific(destinationKey, UnsafeRawPointer(bitPattern: packed))
        defer { pthread_setspecific(destinationKey, previous) }
        return try body()
    }

    /// This thread's destination (fd, pid, whether it is a client's), else the process's.
    private static var destination: (fd: Int32, pid: Int32, client: Bool) {
        if destinationsUsed, let p = pthread_getspecific(destinationKey) {
            let packed = UInt(bitPattern: p)
            return (Int32(truncatingIfNeeded: packed & 0xffff_ffff) - 1, Int32(truncatingIfNeeded: packed >> 32), true)
        }
        return (fd, getpid(), false)
    }

    public static var enabled: Bool { fd >= 0 || (destinationsUsed && pthread_getspecific(destinationKey) != nil) }

    /// Monotonic nanoseconds, for call durations.
    public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    public static func call(_ function: StaticString, _ details: String, rv: CK_RV, started: UInt64) {
        guard enabled else { return }
        let micros = (now() &- started) / 1000
        let ms = "\(micros / 1000).\(String(micros % 1000 + 1000).dropFirst())"
        line("\(function)(\(details)) = \(ReturnValue.name(rv)) \(ms) ms")
    }

    public static func message(_ text: String) {
        guard enabled else { return }
        line(text)
    }

    /// Where warnings also go: the agent's log (set once by the agent before
    /// it serves a client; nil in-process, where the debug log is the only one).
    nonisolated(unsafe) public static var warningSink: (@Sendable (String) -> Void)?

    /// A configuration the user must fix (a driver that cannot see a token it
    /// mirrored): to the debug log, and to the agent's log in the agent even
    /// without KEYSHARE_DEBUG. Never a PIN or key value.
    public static func warning(_ text: String) {
        message(text)
        warningSink?(text)
    }

    /// One write(2) per line, so lines of concurrent threads and processes
    /// sharing a log file do not interleave.
    ///
    /// A client's descriptor (the agent) is written without blocking and
    /// without SIGPIPE: a socket with MSG_DONTWAIT | MSG_NOSIGNAL, a pipe or
    /// terminal through the agent's own O_NONBLOCK description of it
    /// (ksa_log_fd_nonblocking); what does not fit now is dropped. A client
    /// whose log nobody reads must not hold its call inside the module,
    /// where a fork of the agent would wait for it (ForkGate) with every
    /// other client's calls.
    private static func line(_ text: String) {
        let (fd, pid, client) = destination
        guard fd >= 0 else { return }
        var s = "keyshare[\(pid)] \(text)\n"
        s.withUTF8 { buf in
            var off = 0
            while off < buf.count {
                var n = client ? send(fd, buf.baseAddress! + off, buf.count - off, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL)) : -1
                if !client || (n < 0 && errno == ENOTSOCK) { n = write(fd, buf.baseAddress! + off, buf.count - off) }
                if n <= 0 { break }
                off += n
            }
        }
    }
}
