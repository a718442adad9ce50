import FoundationEssentials
import Glibc

/// Binds a password request to the process that made the connection (issue
/// 12, item 2).
///
/// SO_PEERCRED records the connecting pid at connect(). An executable rule
/// needs more: which program that pid ran *at connect time*. Reading
/// /proc/PID/exe later is not enough: the connecting program can fork a child
/// that keeps the socket and exec an allowed program under the same pid before
/// the service looks (a busy service accepts late). Linux records no exec count
/// a server can read, so the check rests on what an exec does to descriptors:
///
/// 1. Read /proc/PID/exe and open it: the program to judge, by what it is
///    (ProgramIdentity: the file's device and inode, and its content's
///    SHA-256), whatever the process's mount namespace makes its path say.
/// 2. Open /proc/PID/auxv. The kernel opens it under the process's
///    exec_update_lock (mm_access), which an exec holds for writing from the
///    moment the new program becomes visible until its close-on-exec
///    descriptors are closed: the open waits out an exec in progress.
/// 3. Find this connection's client socket (its inode is our socket's peer,
///    from sock_diag, asked in the socket's own network namespace:
///    UnixSocketDiag) among /proc/PID/fd, open *close-on-exec*.
/// 4. With SO_PEERPIDFD (Linux 6.5+), the pidfd of the connecting process is
///    not readable yet: the process has not exited, so /proc/PID was it all along.
///
/// A close-on-exec descriptor cannot outlive an exec. If PID holds this
/// connection close-on-exec after (2), no exec completed between the connect
/// and (2); and one that had begun by (1) completed before (2). So the program
/// read in (1) is the one that connected. A socket without close-on-exec may
/// have outlived an exec and is refused (SOCK_CLOEXEC is the default of
/// Python, Go, Rust, Java, Swift's Foundation and keyshare's own client). What
/// this cannot see: a program that, after an exec, sets close-on-exec on a
/// descriptor it inherited or receives the socket from another process (the
/// allowed program would have to do that itself), and a process of the same
/// user that ptraces an allowed one (see docs/password-service.md).
///
/// When step 3 cannot be made (the connection lives in a network namespace
/// this process cannot enter: one root made, for an agent that is not root),
/// the caller is still served, known by SO_PEERCRED and, where the kernel has
/// it, SO_PEERPIDFD (step 4: the pid is still the process that connected), and
/// `Caller.unverified` says that the exec race was not ruled out, and why.
///
/// One view of a process (steps 1-3) serves every request that process has
/// waiting in one poll round, so a process with thousands of descriptors and
/// connections costs one directory scan per round, not one per request.
public struct CallerCheck {
    /// Why a caller is refused; the text goes to the reply and the log.
    public struct Refusal: Error {
        public let reason: String
    }

    /// A process's state, read in the order the argument above needs.
    private struct ProcessView {
        var program: ProgramIdentity
        /// Socket inode -> the descriptors holding it.
        var sockets: [UInt64: [Int32]]
    }

    /// More descriptors than this in the caller and it is refused: the scan is
    /// bounded work for the service.
    static let maxDescriptorsScanned = 65536
    private var views: [Int32: Result<ProcessView, Refusal>] = [:]

    /// The verified caller.
    public struct Caller: Sendable {
        public let program: ProgramIdentity
        /// nil: checked race-free. Else why the connect-then-exec race could
        /// not be ruled out (the caller is known by its credentials only): one log line.
        public let unverified: String?
    }

    public init() {}

    /// The program of the process that connected on `connection` (our
    /// accepted socket), if that process still holds the connection and has
    /// not exec'd since it connected; otherwise why not.
    public mutating func verify(connection: Int32, pid: Int32) -> Result<Caller, Refusal> {
        let view: ProcessView
        switch views[pid] ?? Self.look(at: pid) {
        case .failure(let refusal):
            views[pid] = .failure(refusal)
            return .failure(refusal)
        case .success(let v):
            views[pid] = .success(v)
            view = v
        }
        let peer: UInt64
        switch UnixSocketDiag.peer(of: connection, pid: pid) {
        case .inode(let p): peer = p
        case .unknown(let why):
            return .failure(Refusal(reason: "the caller's end of the connection cannot be identified (sock_diag: \(why))"))
        case .unreachable(let why):
            switch Self.peerHasExited(connection) {
            case true?: return .failure(Refusal(reason: "pid \(pid) has exited"))
            case false?:
                return .success(Caller(program: view.program, unverified: "exec race not ruled out: \(why); known by SO_PEERCRED and SO_PEERPIDFD only"))
            case nil:
                return .success(Caller(program: view.program, unverified: "exec race not ruled out: \(why); known by SO_PEERCRED only (no SO_PEERPIDFD before Linux 6.5)"))
            }
        }
        let holders = view.sockets[peer] ?? []
        guard !holders.isEmpty else {
            return .failure(Refusal(reason: "pid \(pid) no longer holds the connection it made (exec'd, passed it on or exited)"))
        }
        guard holders.contains(where: { Self.isCloseOnExec(pid: pid, fd: $0, inode: peer) }) else {
            return .failure(Refusal(reason: "pid \(pid) holds the connection without close-on-exec, so it may have outlived an exec (open the socket with SOCK_CLOEXEC)"))
        }
        if let exited = Self.peerHasExited(connection), exited {
            return .failure(Refusal(reason: "pid \(pid) has exited"))
        }
        return .success(Caller(program: view.program, unverified: nil))
    }

    /// Steps 1-3 for one process.
    private static func look(at pid: Int32) -> Result<ProcessView, Refusal> {
        let base = "/proc/\(pid)"
        guard let exe = readLink(base + "/exe") else {
            return .failure(Refusal(reason: "cannot read \(base)/exe: \(String(cString: strerror(errno)))"))
        }
        // The file itself (the magic link leads to it from any mount
        // namespace); opened to be hashed below, or only stat'ed when it
        // cannot be read (an execute-only program).
        let exeFD = open(base + "/exe", O_RDONLY | O_CLOEXEC | O_NOCTTY)
        defer { if exeFD >= 0 { close(exeFD) } }
        var st = stat()
        guard (exeFD >= 0 ? fstat(exeFD, &st) : stat(base + "/exe", &st)) == 0 else {
            return .failure(Refusal(reason: "cannot stat \(base)/exe: \(String(cString: strerror(errno)))"))
        }
        // The exec barrier: opening auxv waits for an exec in progress to finish.
        let barrier = open(base + "/auxv", O_RDONLY | O_CLOEXEC)
        guard barrier >= 0 else {
            return .failure(Refusal(reason: "cannot read \(base)/auxv: \(String(cString: strerror(errno)))"))
        }
        close(barrier)
        guard let dir = opendir(base + "/fd") else {
            return .failure(Refusal(reason: "cannot read \(base)/fd: \(String(cString: strerror(errno)))"))
        }
        defer { closedir(dir) }
        let dirFD = dirfd(dir)
        var sockets: [UInt64: [Int32]] = [:]
        var scanned = 0
        var buf = [CChar](repeating: 0, count: 64)
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            guard let fd = Int32(name) else { continue }
            scanned += 1
            if scanned > maxDescriptorsScanned {
                return .failure(Refusal(reason: "pid \(pid) has more than \(maxDescriptorsScanned) descriptors open"))
            }
            let n = readlinkat(dirFD, name, &buf, buf.count - 1)
            guard n > 9 else { continue }
            let target = String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard target.hasPrefix("socket:["), target.hasSuffix("]"),
                  let inode = UInt64(target.dropFirst(8).dropLast()) else { continue }
            sockets[inode, default: []].append(fd)
        }
        let digest = exeFD >= 0 ? ProgramDigests.digest(fd: exeFD) : nil
        return .success(ProcessView(program: ProgramIdentity(path: exe, file: FileIdentity(st), digest: digest), sockets: sockets))
    }

    /// /proc/PID/fdinfo/FD: still this socket (the descriptor number may have
    /// been reused since the scan), and open close-on-exec.
    private static func isCloseOnExec(pid: Int32, fd: Int32, inode: UInt64) -> Bool {
        guard let info = try? String(contentsOfFile: "/proc/\(pid)/fdinfo/\(fd)", encoding: .utf8) else { return false }
        var flags: UInt64?
        var ino: UInt64?
        for line in info.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1).map(\.withoutBlanks)
            guard parts.count == 2 else { continue }
            if parts[0] == "flags" { flags = UInt64(parts[1], radix: 8) }
            if parts[0] == "ino" { ino = UInt64(parts[1]) }
        }
        guard let flags, flags & UInt64(O_CLOEXEC) != 0 else { return false }
        if let ino { return ino == inode }
        // Kernels before 5.14 print no "ino:" line: the link, read after the flags, names the socket.
        return readLink("/proc/\(pid)/fd/\(fd)") == "socket:[\(inode)]"
    }

    /// Through SO_PEERPIDFD: true when the connecting process has exited, false
    /// when it is alive, nil when the kernel offers no pidfd (before 6.5).
    static func peerHasExited(_ connection: Int32) -> Bool? {
        let soPeerPidfd: Int32 = 77  // SO_PEERPIDFD (asm-generic/socket.h, Linux 6.5)
        var pidfd: Int32 = -1
        var len = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(connection, SOL_SOCKET, soPeerPidfd, &pidfd, &len) == 0, pidfd >= 0 else {
            return errno == ENOPROTOOPT ? nil : true
        }
        defer { close(pidfd) }
        // A pidfd is readable once its process has exited.
        var p = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) != 0
    }

    static func readLink(_ path: String) -> String? {
        var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink(path, &buf, Int(PATH_MAX))
        return n > 0 ? String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs, as /proc's "key:\tvalue" lines need.
    fileprivate var withoutBlanks: String {
        let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isBlank($0) }), let last = lastIndex(where: { !isBlank($0) }) else { return "" }
        return String(self[first...last])
    }
}
