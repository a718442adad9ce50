import Glibc

/// Runs a helper program (journalctl, certutil) with posix_spawn: its output and errors
/// collected, a deadline on the whole run (Foundation's Process is not in FoundationEssentials).
enum Subprocess {
    struct Result {
        var status: Int32  // the exit status; 128 + the signal when one ended it
        var output: [UInt8]
        var errors: [UInt8]
    }

    enum Failure: Error, CustomStringConvertible {
        case cannotStart(String, Int32)
        case timedOut(String, Double)

        var description: String {
            switch self {
            case .cannotStart(let path, let errno): "cannot run \(path): \(String(cString: strerror(errno)))"
            case .timedOut(let path, let seconds): "\(path) did not finish in \(Int(seconds)) s (stopped)"
            }
        }
    }

    /// At most `limit` bytes are kept of each stream (the rest is read and dropped).
    /// Standard input is /dev/null; no descriptor of ours but the two pipes is inherited.
    static func run(_ path: String, _ arguments: [String], timeout: Double = 30, limit: Int = 64 << 20) throws -> Result {
        var outPipe: [Int32] = [0, 0], errPipe: [Int32] = [0, 0]
        guard pipe(&outPipe) == 0 else { throw Failure.cannotStart(path, errno) }
        guard pipe(&errPipe) == 0 else {
            let e = errno
            close(outPipe[0]); close(outPipe[1])
            throw Failure.cannotStart(path, e)
        }
        for fd in outPipe + errPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, &actions, nil, argv, environ)
        close(outPipe[1]); close(errPipe[1])
        guard rc == 0 else {
            close(outPipe[0]); close(errPipe[0])
            throw Failure.cannotStart(path, rc)
        }
        var result = Result(status: 0, output: [], errors: [])
        let timedOut = collect(outPipe[0], errPipe[0], into: &result, timeout: timeout, limit: limit)
        close(outPipe[0]); close(errPipe[0])
        if timedOut { kill(pid, SIGKILL) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        if timedOut { throw Failure.timedOut(path, timeout) }
        result.status = status & 0x7F != 0 ? 128 + (status & 0x7F) : (status >> 8) & 0xFF
        return result
    }

    /// Reads both pipes to their ends; true when the deadline passed first.
    private static func collect(_ out: Int32, _ err: Int32, into result: inout Result, timeout: Double, limit: Int) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let end = Double(now.tv_sec) + Double(now.tv_nsec) / 1e9 + timeout
        var open = [out, err]
        var buf = [UInt8](repeating: 0, count: 65536)
        while !open.isEmpty {
            clock_gettime(CLOCK_MONOTONIC, &now)
            let left = end - (Double(now.tv_sec) + Double(now.tv_nsec) / 1e9)
            if left <= 0 { return true }
            var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let r = poll(&fds, nfds_t(fds.count), Int32(min(left, 1) * 1000) + 1)
            if r < 0 && errno != EINTR { return true }
            if r <= 0 { continue }
            for p in fds where p.revents != 0 {
                let n = buf.withUnsafeMutableBytes { read(p.fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { open.removeAll { $0 == p.fd }; continue }
                if p.fd == out {
                    if result.output.count < limit { result.output += buf.prefix(min(n, limit - result.output.count)) }
                } else if result.errors.count < limit {
                    result.errors += buf.prefix(min(n, limit - result.errors.count))
                }
            }
        }
        return false
    }
}
