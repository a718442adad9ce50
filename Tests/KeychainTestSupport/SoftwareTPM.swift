import Foundation

/// A real swtpm for one test (docs/tpm.md, "Testing"): its own state
/// directory, loopback only, the control port right after the server port
/// (the swtpm TCTI assumes it), `startup-clear` so it is usable at once.
/// Stopped by its PID when released; `restart()` keeps the state (same TPM),
/// a new instance is another machine's TPM.
public final class SoftwareTPM: @unchecked Sendable {
    public let stateDirectory: String
    public private(set) var port: UInt16 = 0
    private var pid: pid_t = 0
    private let ownsDirectory: Bool

    public var tcti: String { "swtpm:host=127.0.0.1,port=\(port)" }

    /// nil when swtpm is not installed (the Makefile's DEB_PACKAGES has it).
    public static func start(stateDirectory: String? = nil) throws -> SoftwareTPM? {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/swtpm") else { return nil }
        let t = try SoftwareTPM(stateDirectory: stateDirectory)
        try t.launch()
        return t
    }

    private init(stateDirectory: String?) throws {
        if let stateDirectory {
            self.stateDirectory = stateDirectory
            ownsDirectory = false
        } else {
            var template = Array((NSTemporaryDirectory() + "keyshare-swtpm-XXXXXX").utf8CString)
            guard let p = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
                throw POSIXError(.EIO)
            }
            self.stateDirectory = String(cString: p)
            ownsDirectory = true
        }
    }

    deinit {
        stop()
        if ownsDirectory { try? FileManager.default.removeItem(atPath: stateDirectory) }
    }

    /// Two consecutive free loopback ports.
    private static func freePortPair() -> UInt16 {
        func free(_ port: UInt16) -> Bool {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = port.bigEndian
            a.sin_addr.s_addr = inet_addr("127.0.0.1")
            return withUnsafePointer(to: &a) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            } == 0
        }
        while true {
            let p = UInt16.random(in: 20000...60000)
            if free(p) && free(p + 1) { return p }
        }
    }

    private func launch() throws {
        port = Self.freePortPair()
        let pidFile = stateDirectory + "/swtpm.pid"
        try? FileManager.default.removeItem(atPath: pidFile)
        // posix_spawn + waitpid: Foundation's Process can miss the exit of a
        // parent that daemonised (it stayed a zombie, waitUntilExit hung).
        let args = ["/usr/bin/swtpm", "socket", "--tpmstate", "dir=\(stateDirectory)", "--tpm2",
                    "--server", "type=tcp,port=\(port),bindaddr=127.0.0.1",
                    "--ctrl", "type=tcp,port=\(port + 1),bindaddr=127.0.0.1",
                    "--flags", "not-need-init,startup-clear", "--daemon", "--pid", "file=\(pidFile)"]
        var cargs = args.map { strdup($0) } + [nil]
        defer { for a in cargs { free(a) } }
        // The test runner's threads block most signals and a spawned child
        // inherits that mask: swtpm would then ignore the SIGTERM that stops it.
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attr, &empty)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK))
        // Only stdin/out/err go to the daemon: a TPM connection another test holds
        // open, inherited by this swtpm, would keep that TPM (which serves one
        // connection at a time) waiting on it forever once the test closes its end.
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        closeFrom3(&actions)
        var child: pid_t = 0
        guard posix_spawn(&child, args[0], &actions, &attr, &cargs, environ) == 0 else { throw POSIXError(.ECHILD) }
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        guard status == 0,
              let text = try? String(contentsOfFile: pidFile, encoding: .utf8),
              let n = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw POSIXError(.ECHILD)
        }
        pid = n
    }

    public func stop() {
        guard pid > 0 else { return }
        kill(pid, SIGTERM)
        // Wait until it is gone (it is not our child: the daemon re-parented,
        // and may stay a zombie for a while, which counts as gone).
        func alive() -> Bool {
            guard kill(pid, 0) == 0 else { return false }
            let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
            return !stat.contains(") Z ")
        }
        for _ in 0..<200 where alive() { usleep(10_000) }
        pid = 0
    }

    /// The same TPM switched off and on: state kept, PCRs reset.
    public func restart() throws {
        stop()
        try launch()
    }
}

/// glibc's posix_spawn_file_actions_addclosefrom_np (2.34+), which Swift does not import (it needs _GNU_SOURCE).
func closeFrom3(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>) {
    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    guard let sym = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { return }
    _ = unsafeBitCast(sym, to: AddCloseFrom.self)(actions, 3)
}

/// What tests do to a TPM besides using it.
public enum TPMTestSupport {
    /// Extends a SHA-256 PCR with tpm2-tools (a boot that measured something else).
    public static func extend(_ tcti: String, pcr: Int) throws {
        var env = ProcessInfo.processInfo.environment
        env["TPM2TOOLS_TCTI"] = tcti
        let args = ["/usr/bin/tpm2_pcrextend", "\(pcr):sha256=" + String(repeating: "ab", count: 32)]
        var cargs = args.map { strdup($0) } + [nil]
        var cenv = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for a in cargs + cenv { free(a) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        closeFrom3(&actions)
        var child: pid_t = 0
        guard posix_spawn(&child, args[0], &actions, nil, &cargs, &cenv) == 0 else { throw POSIXError(.ECHILD) }
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        guard status == 0 else { throw POSIXError(.EIO) }
    }
}
