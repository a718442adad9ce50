import Foundation
import Testing
@testable import KeySharing

/// Spec §6 on Linux: the decision states, the wire protocol and a live server.
@Suite struct PasswordServiceTests {
    static let me = getuid()
    static let peer = PeerCredentials(pid: 42, uid: getuid(), gid: getgid(), exe: "/usr/bin/consumer")

    @Test func decisions() {
        #expect(AccessPolicy.decide(nil, peer: Self.peer, serviceUID: Self.me).state == .notEnabled)
        #expect(AccessPolicy.decide(AccessPolicy(), peer: Self.peer, serviceUID: Self.me).state == .notEnabled)
        let byExe = AccessPolicy(allow: [.init(exe: "/usr/bin/consumer")])
        #expect(AccessPolicy.decide(byExe, peer: Self.peer, serviceUID: Self.me).state == .notBlocked)
        var other = Self.peer
        other.exe = "/usr/bin/other"
        #expect(AccessPolicy.decide(byExe, peer: other, serviceUID: Self.me).state == .blocked)
        other.exe = nil
        #expect(AccessPolicy.decide(byExe, peer: other, serviceUID: Self.me).state == .blocked)
        let byUID = AccessPolicy(allow: [.init(uid: Self.me)], deny: [.init(exe: "/usr/bin/consumer")])
        #expect(AccessPolicy.decide(byUID, peer: other, serviceUID: Self.me).state == .notBlocked)
        #expect(AccessPolicy.decide(byUID, peer: Self.peer, serviceUID: Self.me).state == .blocked)
    }

    /// An exe rule names a program by what it is (issue 28): a caller whose
    /// /proc/PID/exe shows the allowed path but runs another file (bind-mounted
    /// over it in its own mount namespace) is not allowed; the file at the
    /// rule's path, or a copy of it, is. A deny rule also matches by path.
    @Test func exeRulesNameProgramsByIdentity() throws {
        let allowed = "/bin/sh", other = "/bin/cat"
        let sh = try #require(ProgramDigests.file(at: allowed)), cat = try #require(ProgramDigests.file(at: other))
        var peer = Self.peer
        peer.exe = allowed
        peer.program = ProgramIdentity(path: allowed, file: cat.file, digest: cat.digest)
        let policy = AccessPolicy(allow: [.init(exe: allowed)])
        #expect(AccessPolicy.decide(policy, peer: peer, serviceUID: Self.me).state == .blocked)
        peer.program = ProgramIdentity(path: allowed, file: sh.file, digest: sh.digest)
        #expect(AccessPolicy.decide(policy, peer: peer, serviceUID: Self.me).state == .notBlocked)
        peer.exe = "/tmp/copy-of-sh"
        peer.program = ProgramIdentity(path: "/tmp/copy-of-sh", file: FileIdentity(device: 1, inode: 1), digest: sh.digest)
        #expect(AccessPolicy.decide(policy, peer: peer, serviceUID: Self.me).state == .notBlocked)
        peer.exe = allowed
        peer.program = ProgramIdentity(path: allowed, file: cat.file, digest: cat.digest)
        let denied = AccessPolicy(allow: [.init(uid: Self.me)], deny: [.init(exe: allowed)])
        #expect(AccessPolicy.decide(denied, peer: peer, serviceUID: Self.me).state == .blocked)
    }

    /// Another user's process is refused even when the policy names it.
    @Test func anotherUserIsAlwaysRefused() {
        let stranger = PeerCredentials(pid: 7, uid: Self.me &+ 1000, gid: 0, exe: "/usr/bin/consumer")
        let policy = AccessPolicy(allow: [.init(exe: "/usr/bin/consumer"), .init(uid: Self.me &+ 1000)])
        let d = AccessPolicy.decide(policy, peer: stranger, serviceUID: Self.me)
        #expect(d.state == .blocked && d.reason.contains("another user"))
    }

    @Test func requestValidation() {
        let good = PasswordProtocol.encode(PasswordProtocol.Request()).dropLast()
        #expect((try? PasswordProtocol.validate(Array(good)).get()) != nil)
        for bad in [#"{"v":2,"service":"red.hound.KeySharingPassword-v1.0.0","call":"fetchPassword"}"#,
                    #"{"v":1,"service":"other","call":"fetchPassword"}"#,
                    #"{"v":1,"service":"red.hound.KeySharingPassword-v1.0.0","call":"other"}"#,
                    "[]", "", "{", "\u{0}\u{1}"] {
            #expect((try? PasswordProtocol.validate(Array(bad.utf8)).get()) == nil, "\(bad)")
        }
    }

    @Test func policyFileRoundTripAndPermissions() throws {
        let home = NSTemporaryDirectory() + "ks-policy-\(UUID().uuidString)"
        try SecureFile.makePrivateDirectory(home)
        defer { try? FileManager.default.removeItem(atPath: home) }
        #expect(try AccessPolicyFile.load(home: home) == nil)
        let policy = AccessPolicy(allow: [.init(exe: "/bin/true")])
        try AccessPolicyFile.save(policy, home: home)
        #expect(try AccessPolicyFile.load(home: home) == policy)
        chmod(AccessPolicyFile.path(home: home), 0o644)
        #expect(throws: AccessPolicyFile.PolicyError.self) { try AccessPolicyFile.load(home: home) }
    }

    /// A live server: allowed, refused, bad requests, concurrency, clean stop.
    @Test func liveServer() throws {
        let dir = NSTemporaryDirectory() + "ks-sock-\(UUID().uuidString.prefix(8))"
        try SecureFile.makePrivateDirectory(dir)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/password.sock"
        let exe = try #require(readSelfExe())
        let policyBox = PolicyBox()
        let server = try PasswordServer(socketPath: path, password: "s3cret!/pw", policy: { policyBox.value }, log: { _ in })
        let thread = Thread { server.run() }
        thread.start()

        #expect(throws: PasswordClient.ClientError.refused(state: "not-enabled", reason: "sharing is not enabled: no program is allowed (keyshare share allow)")) {
            try PasswordClient.fetchPassword(socketPath: path)
        }
        policyBox.value = AccessPolicy(allow: [.init(exe: "/nonexistent")])
        #expect(throws: PasswordClient.ClientError.self) { try PasswordClient.fetchPassword(socketPath: path) }
        policyBox.value = AccessPolicy(allow: [.init(exe: exe)])
        #expect(try PasswordClient.fetchPassword(socketPath: path) == "s3cret!/pw")

        for bad in [Array("garbage\n".utf8), Array(repeating: UInt8(ascii: "x"), count: 5000)] {
            let reply = String(decoding: try PasswordClient.exchange(socketPath: path, request: bad), as: UTF8.self)
            #expect(reply.contains("\"state\":\"no-request\""))
        }
        // Slow clients (a partial request, then silence) hold connections open
        // while good clients come and go: every good one is answered at once.
        var slow: [Int32] = []
        for _ in 0..<100 {
            let fd = try PasswordClient.connect(path, timeoutSeconds: 5)
            _ = send(fd, "{\"v\":1", 6, Int32(MSG_NOSIGNAL))
            slow.append(fd)
        }
        let answered = Counter()
        DispatchQueue.concurrentPerform(iterations: 100) { _ in
            if (try? PasswordClient.fetchPassword(socketPath: path)) == "s3cret!/pw" { answered.add() }
        }
        #expect(answered.value == 100)
        // No wall-clock bound here (it failed under load: 2.1-2.3 s on a busy
        // 2-core machine); speed is for `make bench`. 21-share-hardening.sh
        // checks that idle connections do not starve a real client.
        // The slow ones get a timeout reply, not a hang.
        var buf = [UInt8](repeating: 0, count: 512)
        let n = read(slow[0], &buf, buf.count)
        #expect(n > 0 && String(decoding: buf[0..<max(n, 0)], as: UTF8.self).contains("timeout"))
        slow.forEach { close($0) }
        #expect(throws: PasswordServer.ServerError.self) {
            _ = try PasswordServer(socketPath: path, password: "x", policy: { nil }, log: { _ in })
        }
        server.stop()
        while thread.isExecuting || !thread.isFinished { usleep(10_000) }
        #expect(access(path, F_OK) != 0)
        #expect(throws: PasswordClient.ClientError.self) { try PasswordClient.fetchPassword(socketPath: path) }
    }

    private func readSelfExe() -> String? {
        var buf = [CChar](repeating: 0, count: 4097)
        let n = readlink("/proc/self/exe", &buf, 4096)
        return n > 0 ? String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
    }
}

final class PolicyBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: AccessPolicy?
    var value: AccessPolicy? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private(set) var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}
