import CLinux
import Foundation
import Testing
@testable import KeySharing

/// Issue 12, items 2, 3, 4 and 10, at the library level (the CLI and the real
/// attack programs are in Tests/integration/21-share-hardening.sh).

/// A private scratch directory, removed at the end.
private struct Scratch {
    let path: String
    init() throws {
        path = NSTemporaryDirectory() + "ks-hard-\(UUID().uuidString.prefix(8))"
        try SecureFile.makePrivateDirectory(path)
    }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
    func read(_ p: String) -> String? { try? String(contentsOfFile: p, encoding: .utf8) }
    func inode(_ p: String) -> UInt64? {
        var st = stat()
        return lstat(p, &st) == 0 ? UInt64(st.st_ino) : nil
    }
    func kind(_ p: String) -> mode_t? {
        var st = stat()
        return lstat(p, &st) == 0 ? st.st_mode & S_IFMT : nil
    }
    /// Names starting with `.keyshare-`: temporary files or trees left behind.
    var leftovers: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter { $0.hasPrefix(".keyshare-") }
    }
}

@Suite struct OutputFileTests {
    @Test func newFileIsPrivateAndExistingOneNeedsForce() throws {
        let s = try Scratch()
        defer { s.remove() }
        let out = s.path + "/out.p12"
        try OutputFile.write(Array("one".utf8), to: out, existing: .refuse)
        #expect(s.read(out) == "one")
        var st = stat()
        lstat(out, &st)
        #expect(st.st_mode & 0o777 == 0o600)
        #expect(throws: OutputFile.OutputError("\(out) already exists; add --force to replace it")) {
            try OutputFile.write(Array("two".utf8), to: out, existing: .refuse)
        }
        #expect(s.read(out) == "one")
        let before = s.inode(out)
        chmod(out, 0o644)
        try OutputFile.write(Array("three".utf8), to: out, existing: .replaceRegularFile)
        #expect(s.read(out) == "three")
        #expect(s.inode(out) != before, "replaced by rename, not rewritten in place")
        lstat(out, &st)
        #expect(st.st_mode & 0o777 == 0o600)
        #expect(s.leftovers.isEmpty)
    }

    /// A link, FIFO, directory or device is never written through or replaced, --force or not.
    @Test func onlyARegularFileIsEverReplaced() throws {
        let s = try Scratch()
        defer { s.remove() }
        let target = s.path + "/target", link = s.path + "/link", dangling = s.path + "/dangling"
        let fifo = s.path + "/fifo", dir = s.path + "/dir"
        try "precious".write(toFile: target, atomically: false, encoding: .utf8)
        symlink(target, link)
        symlink(s.path + "/nowhere", dangling)
        mkfifo(fifo, 0o600)
        mkdir(dir, 0o700)
        for existing in [OutputFile.Existing.refuse, .replaceRegularFile] {
            for (path, what) in [(link, "a symbolic link"), (dangling, "a symbolic link"), (fifo, "a FIFO"), (dir, "a directory")] {
                #expect(throws: OutputFile.OutputError(
                    "refusing to write \(path): it is \(what), not a regular file (never replaced, even with --force)")) {
                    try OutputFile.write(Array("x".utf8), to: path, existing: existing)
                }
            }
            // The real /dev/null is only looked at: check() never writes.
            #expect(throws: OutputFile.OutputError.self) { try OutputFile.check("/dev/null", existing: existing) }
        }
        #expect(s.kind(link) == S_IFLNK && s.kind(dangling) == S_IFLNK && s.kind(fifo) == S_IFIFO && s.kind(dir) == S_IFDIR)
        #expect(s.read(target) == "precious")
        #expect(s.kind(s.path + "/nowhere") == nil)
        #expect(s.leftovers.isEmpty)
        #expect(throws: OutputFile.OutputError.self) { try OutputFile.write([], to: s.path + "/missing/out", existing: .refuse) }
    }

    /// Something that appears at the path while the command works is not replaced.
    @Test func aFileThatAppearsMeanwhileIsKept() throws {
        let s = try Scratch()
        defer { s.remove() }
        let out = s.path + "/out"
        #expect(throws: OutputFile.OutputError("\(out) already exists; add --force to replace it")) {
            try OutputFile.produce(at: out, existing: .refuse) { tmp in
                try "mine".write(toFile: tmp, atomically: false, encoding: .utf8)
                try "theirs".write(toFile: out, atomically: false, encoding: .utf8)
            }
        }
        #expect(s.read(out) == "theirs")
        try FileManager.default.removeItem(atPath: out)
        symlink(s.path + "/elsewhere", out)
        #expect(throws: OutputFile.OutputError.self) {
            try OutputFile.produce(at: out, existing: .replaceRegularFile) { _ in }
        }
        #expect(s.kind(out) == S_IFLNK && s.kind(s.path + "/elsewhere") == nil)
        #expect(s.leftovers.isEmpty)
    }

    @Test func failedProducersLeaveNothing() throws {
        let s = try Scratch()
        defer { s.remove() }
        struct Boom: Error {}
        #expect(throws: Boom.self) { try OutputFile.produce(at: s.path + "/f", existing: .refuse) { _ in throw Boom() } }
        #expect(s.kind(s.path + "/f") == nil)
        let tree = s.path + "/tree"
        #expect(throws: Boom.self) {
            try OutputFile.produceDirectory(at: tree) { root in
                try OutputFile.write(Array("a".utf8), to: root + "/a.p12", existing: .refuse)
                try OutputFile.makeDirectory(root + "/PIV")
                throw Boom()
            }
        }
        #expect(s.kind(tree) == nil)
        #expect(s.leftovers.isEmpty)
        try OutputFile.produceDirectory(at: tree) { root in
            try OutputFile.write(Array("a".utf8), to: root + "/a.p12", existing: .refuse)
        }
        #expect(s.read(tree + "/a.p12") == "a")
        var st = stat()
        lstat(tree, &st)
        #expect(st.st_mode & 0o777 == 0o700)
        #expect(throws: OutputFile.OutputError("\(tree) exists and is not empty; export-tree writes a new directory")) {
            try OutputFile.produceDirectory(at: tree) { _ in }
        }
        mkdir(s.path + "/empty", 0o755)
        try OutputFile.produceDirectory(at: s.path + "/empty/") { root in
            try OutputFile.write(Array("b".utf8), to: root + "/b.p12", existing: .refuse)
        }
        #expect(s.read(s.path + "/empty/b.p12") == "b")
        #expect(s.leftovers.isEmpty)
    }
}

@Suite struct ServiceSocketTests {
    static func server(_ path: String, maxConnections: Int = PasswordServer.maxConnections,
                       policy: AccessPolicy? = nil) throws -> (PasswordServer, Thread) {
        let server = try PasswordServer(socketPath: path, password: "pw-\(UUID().uuidString.prefix(6))",
                                        policy: { policy }, log: { _ in }, maxConnections: maxConnections)
        let thread = Thread { server.run() }
        thread.start()
        return (server, thread)
    }

    static func stop(_ server: PasswordServer, _ thread: Thread) {
        server.stop()
        while !thread.isFinished { usleep(5_000) }
    }

    /// Item 4: what is at --socket and is not a stale socket stays as it is.
    @Test func refusesWhatItDidNotCreate() throws {
        let s = try Scratch()
        defer { s.remove() }
        let path = s.path + "/password.sock"
        try "not a socket".write(toFile: path, atomically: false, encoding: .utf8)
        #expect(throws: PasswordServer.ServerError.self) {
            _ = try PasswordServer(socketPath: path, password: "x", policy: { nil }, log: { _ in })
        }
        #expect(s.read(path) == "not a socket")
        try FileManager.default.removeItem(atPath: path)
        symlink(s.path + "/elsewhere", path)
        #expect(throws: PasswordServer.ServerError.self) {
            _ = try PasswordServer(socketPath: path, password: "x", policy: { nil }, log: { _ in })
        }
        #expect(s.kind(path) == S_IFLNK)
        try FileManager.default.removeItem(atPath: path)
        // A stale socket (bound, nobody listening) is replaced.
        let stale = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var addr = UnixAddress(path)
        #expect(addr.withSockaddr { bind(stale, $0, $1) } == 0)
        close(stale)
        let (server, thread) = try Self.server(path)
        #expect(s.kind(path) == S_IFSOCK)
        let reply = try PasswordClient.exchange(socketPath: path, request: PasswordProtocol.encode(PasswordProtocol.Request()))
        #expect(String(decoding: reply, as: UTF8.self).contains("not-enabled"), "the new service answers")
        // Replaced while serving: stopping leaves the newcomer alone.
        rename(path, s.path + "/moved.sock")
        try "someone else's".write(toFile: path, atomically: false, encoding: .utf8)
        server.stop()
        while !thread.isFinished { usleep(5_000) }
        #expect(s.read(path) == "someone else's")
        #expect(s.kind(s.path + "/moved.sock") == S_IFSOCK)
        // Its own socket it removes.
        try FileManager.default.removeItem(atPath: path)
        let server2 = try PasswordServer(socketPath: path, password: "x", policy: { nil }, log: { _ in })
        server2.stop()
        #expect(server2.run() == .removed)
        #expect(s.kind(path) == nil)
    }

    /// Item 10: a full service displaces its oldest connection, so idle ones
    /// cannot keep a real client in the listen queue.
    @Test func idleConnectionsDoNotStarveARealClient() throws {
        let s = try Scratch()
        defer { s.remove() }
        let path = s.path + "/password.sock"
        let exe = try #require(CallerCheck.readLink("/proc/self/exe"))
        let (server, thread) = try Self.server(path, maxConnections: 8, policy: AccessPolicy(allow: [.init(exe: exe)]))
        defer { Self.stop(server, thread) }
        var idle: [Int32] = []
        defer { idle.forEach { close($0) } }
        for _ in 0..<40 { idle.append(try PasswordClient.connect(path, timeoutSeconds: 5)) }
        let started = Date()
        #expect(try PasswordClient.fetchPassword(socketPath: path, timeoutSeconds: 3).hasPrefix("pw-"))
        #expect(Date().timeIntervalSince(started) < 1.5)
        var buf = [UInt8](repeating: 0, count: 512)
        let n = read(idle[0], &buf, buf.count)
        #expect(n > 0 && String(decoding: buf[0..<max(n, 0)], as: UTF8.self).contains("at capacity"))
    }

    /// Item 10: the client says its own time limit passed, not "closed without a reply".
    @Test func clientTimeoutIsNamed() throws {
        let s = try Scratch()
        defer { s.remove() }
        let path = s.path + "/silent.sock"
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = UnixAddress(path)
        #expect(addr.withSockaddr { bind(fd, $0, $1) } == 0 && listen(fd, 8) == 0)  // never accepts
        #expect(throws: PasswordClient.ClientError.timedOut(path: path, seconds: 1)) {
            try PasswordClient.fetchPassword(socketPath: path, timeoutSeconds: 1)
        }
        #expect(PasswordClient.ClientError.timedOut(path: path, seconds: 1).description.contains("did not answer within 1 s"))
    }
}

@Suite struct CallerCheckTests {
    /// A connected pair through a listening socket: (client, accepted server end).
    static func connection(_ dir: String, cloexec: Bool = true) throws -> (client: Int32, server: Int32, listener: Int32) {
        let path = dir + "/l-\(UUID().uuidString.prefix(6)).sock"
        let l = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var addr = UnixAddress(path)
        guard addr.withSockaddr({ bind(l, $0, $1) }) == 0, listen(l, 4) == 0 else { throw POSIXError(.EIO) }
        let c = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | (cloexec ? Int32(SOCK_CLOEXEC.rawValue) : 0), 0)
        guard addr.withSockaddr({ connect(c, $0, $1) }) == 0 else { throw POSIXError(.EIO) }
        let a = accept(l, nil, nil)
        return (c, a, l)
    }

    @Test func sockDiagNamesThePeer() {
        var pair: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[0]); close(pair[1]) }
        var st = stat()
        fstat(pair[1], &st)
        #expect(UnixSocketDiag.peerInode(ofSocket: pair[0]) == UInt64(st.st_ino))
    }

    @Test func theConnectingProcessHoldingItCloseOnExecIsJudged() throws {
        let s = try Scratch()
        defer { s.remove() }
        let (c, a, l) = try Self.connection(s.path)
        defer { close(a); close(l) }
        var check = CallerCheck()
        let me = try #require(CallerCheck.readLink("/proc/self/exe"))
        let caller = try check.verify(connection: a, pid: getpid()).get()
        #expect(caller.program.path == me && caller.unverified == nil)
        // The program by what it is: the file /proc/self/exe leads to, and its content.
        var st = stat()
        #expect(stat("/proc/self/exe", &st) == 0)
        #expect(caller.program.file == FileIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino)))
        #expect(caller.program.digest == ProgramDigests.file(at: me)?.digest && caller.program.digest?.count == 32)
        #expect(CallerCheck.peerHasExited(a) != true)
        // Not held any more (closed, or close-on-exec and exec'd): refused.
        close(c)
        var fresh = CallerCheck()
        guard case .failure(let r) = fresh.verify(connection: a, pid: getpid()) else {
            Issue.record("a connection nobody holds was accepted")
            return
        }
        #expect(r.reason.contains("no longer holds"))
    }

    @Test func aSocketWithoutCloseOnExecIsRefused() throws {
        let s = try Scratch()
        defer { s.remove() }
        let (c, a, l) = try Self.connection(s.path, cloexec: false)
        defer { close(c); close(a); close(l) }
        var check = CallerCheck()
        guard case .failure(let r) = check.verify(connection: a, pid: getpid()) else {
            Issue.record("a socket that may have outlived an exec was accepted")
            return
        }
        #expect(r.reason.contains("close-on-exec"))
    }

    /// A program's digest is its content's SHA-256; a changed file is hashed again.
    @Test func programDigestIsTheContentsSHA256() throws {
        let s = try Scratch()
        defer { s.remove() }
        let path = s.path + "/prog"
        #expect(FileManager.default.createFile(atPath: path, contents: Data("abc".utf8)))
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  // FIPS 180-2 B.1
        #expect(ProgramDigests.file(at: path).flatMap { $0.digest }.map(ProgramDigests.hex) == abc)
        #expect(ProgramDigests.unhex(abc).map(ProgramDigests.hex) == abc)
        #expect(ProgramDigests.unhex(String(abc.dropLast())) == nil && ProgramDigests.unhex("x" + abc.dropFirst()) == nil)
        let fd = open(path, O_WRONLY | O_APPEND)
        #expect(fd >= 0 && write(fd, "d", 1) == 1)
        close(fd)
        let abcd = "88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589"
        #expect(ProgramDigests.file(at: path).flatMap { $0.digest }.map(ProgramDigests.hex) == abcd)
    }

    /// The netlink socket made in a network namespace through a child
    /// (keyshare_sock_diag_in_netns): in our own, root gets one that answers;
    /// anyone else may not enter even their own (EPERM), which the agent
    /// never asks (its own namespace is asked directly).
    @Test func aSockDiagSocketMadeInANamespaceAnswers() throws {
        let ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)
        #expect(ns >= 0)
        defer { close(ns) }
        let nl = keyshare_sock_diag_in_netns(ns, 2000)
        guard getuid() == 0 else {
            #expect(nl == -EPERM)
            return
        }
        #expect(nl >= 0)
        defer { close(nl) }
        #expect(fcntl(nl, F_GETFD) & FD_CLOEXEC != 0)
        var pair: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[0]); close(pair[1]) }
        var a = stat(), b = stat()
        fstat(pair[0], &a)
        fstat(pair[1], &b)
        guard case .peer(let peer) = UnixSocketDiag.query(nl, inode: UInt32(truncatingIfNeeded: a.st_ino), seq: 7) else {
            Issue.record("no answer from the namespace's sock_diag")
            return
        }
        #expect(peer == UInt64(b.st_ino))
    }

    /// Another process (same user) that does not hold the connection is not its caller.
    @Test func anotherPidIsNotTheCaller() throws {
        let s = try Scratch()
        defer { s.remove() }
        let (c, a, l) = try Self.connection(s.path)
        defer { close(c); close(a); close(l) }
        var sleeper: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("sleep"), strdup("30"), nil]
        defer { argv.forEach { free($0) } }
        #expect(posix_spawn(&sleeper, "/bin/sleep", nil, nil, argv, nil) == 0)
        defer {
            kill(sleeper, SIGKILL)
            var status: Int32 = 0
            waitpid(sleeper, &status, 0)
        }
        var check = CallerCheck()
        guard case .failure(let r) = check.verify(connection: a, pid: sleeper) else {
            Issue.record("a pid that does not hold the socket was accepted")
            return
        }
        #expect(r.reason.contains("no longer holds"))
    }
}
