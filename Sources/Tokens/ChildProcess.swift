#if canImport(Glibc)
import Glibc
#endif
import Keychain

/// Runs a helper process with a deadline and collects its stdout. Used to
/// poll external PKCS #11 modules outside our own process, so a module that
/// crashes or hangs costs a child, never the keychain (no Foundation here:
/// the module links this layer).
enum ChildProcess {
    enum Outcome: Equatable {
        case exited(Int32, output: String)
        case signaled(Int32)
        case timedOut
    }

    /// Starts `executable` with its stdout on a pipe (returned, close-on-exec,
    /// so no other child inherits it) and its stderr on /dev/null, or appended
    /// to the file named by KEYSHARE_DRIVER_LOG (a debugging aid: the event
    /// children then log each step there with KEYSHARE_DEBUG=1).
    /// `driverEnvironment`: a driver's stored variables, given to the child
    /// by DriverEnvironment's rule (nil: this process's environment as is).
    static func spawn(_ executable: String, _ arguments: [String],
                      driverEnvironment: [String: String]? = nil) throws -> (pid: pid_t, output: Int32) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw ExternalModuleError(function: "pipe", rv: 0, message: "cannot create a pipe") }
        // (pipe2 is not visible to Swift's Glibc module; a spawn racing
        // between these lines could inherit the pipe, a child of ours only.)
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        let log = getenv("KEYSHARE_DRIVER_LOG").map { String(cString: $0) } ?? ""
        posix_spawn_file_actions_addopen(&actions, 2, log.isEmpty ? "/dev/null" : log, O_WRONLY | O_APPEND | O_CREAT, 0o600)
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        let envp: [UnsafeMutablePointer<CChar>?]? = driverEnvironment.map {
            DriverEnvironment.childEnvironment($0).map { strdup($0) } + [nil]
        }
        defer { for p in envp ?? [] { free(p) } }
        var pid: pid_t = 0
        let rc = envp.map { posix_spawn(&pid, executable, &actions, nil, argv, $0) }
            ?? posix_spawn(&pid, executable, &actions, nil, argv, environ)
        close(fds[1])
        guard rc == 0 else {
            close(fds[0])
            throw ExternalModuleError(function: "posix_spawn", rv: 0, message: "cannot run \(executable): \(String(cString: strerror(rc)))")
        }
        return (pid, fds[0])
    }

    static func run(_ executable: String, _ arguments: [String], driverEnvironment: [String: String]? = nil,
                    timeout: Double) throws -> Outcome {
        let (pid, out) = try spawn(executable, arguments, driverEnvironment: driverEnvironment)
        // Waiting for the child can take up to `timeout`: a fork of the host
        // must not wait as long (Keychain.ForkGate).
        return ForkGate.outside { collect(pid: pid, fd: out, timeout: timeout) }
    }

    private static func collect(pid: pid_t, fd: Int32, timeout: Double) -> Outcome {
        var output: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let end = Double(deadline.tv_sec) + Double(deadline.tv_nsec) / 1e9 + timeout
        var timedOut = false
        while true {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let left = end - (Double(now.tv_sec) + Double(now.tv_nsec) / 1e9)
            if left <= 0 { timedOut = true; break }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let r = poll(&p, 1, Int32(min(left, 1) * 1000) + 1)
            if r < 0 && errno == EINTR { continue }
            if r <= 0 { continue }
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            output += buf.prefix(n)
            if output.count > 64 << 20 { timedOut = true; break }  // a runaway child
        }
        close(fd)
        if timedOut { kill(pid, SIGKILL) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        if timedOut { return .timedOut }
        if status & 0x7F != 0 { return .signaled(status & 0x7F) }
        return .exited((status >> 8) & 0xFF, output: String(decoding: output, as: UTF8.self))
    }
}

/// A detached pthread for the watcher's loops (no Foundation Thread here).
func startThread(_ body: @escaping @Sendable () -> Void) {
    final class Box { let body: @Sendable () -> Void; init(_ b: @escaping @Sendable () -> Void) { body = b } }
    let arg = Unmanaged.passRetained(Box(body)).toOpaque()
    var tid = pthread_t()
    let rc = pthread_create(&tid, nil, { raw in
        let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
        box.body()
        return nil
    }, arg)
    if rc == 0 { pthread_detach(tid) } else { Unmanaged<Box>.fromOpaque(arg).release() }
}

func monotonicSeconds() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}

func sleepSeconds(_ s: Double) {
    guard s > 0 else { return }
    usleep(UInt32(min(s, 60) * 1_000_000))
}
