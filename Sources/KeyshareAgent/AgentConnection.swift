#if canImport(Glibc)
import Glibc
#endif
import AgentProtocol
import CLinux
import CPKCS11
import CPKCS11ABI
import KeySharing
import Keychain
import KeyshareCrypto
import PKCS11

/// One accepted connection: the peer check, the hello, then calls until EOF.
struct AgentConnection {
    let agent: Agent
    let fd: Int32

    func run() {
        defer {
            close(fd)
            agent.connectionEnded()
        }
        var pid: pid_t = 0
        var uid: uid_t = 0
        // Another uid is refused before a byte is read (the directory's mode
        // already keeps other users out; this holds even if it were opened).
        guard keyshare_peer_cred(fd, &pid, &uid) == 0 else {
            AgentLog.line("refused a connection: no peer credentials")
            return
        }
        guard uid == getuid() else {
            AgentLog.line("refused pid \(pid): uid \(uid) is not the agent's uid \(getuid())")
            return
        }
        var buf = ksa_buf()
        ksa_buf_init(&buf)
        defer { ksa_buf_free(&buf) }
        guard ksa_read_frame(fd, &buf) == 0 else { return }
        // The CLI's control requests (ControlServer.swift) have a magic of their own.
        if ControlProtocol.isControl(buf) {
            ControlServer(agent: agent, fd: fd, pid: pid).serve(&buf)
            return
        }
        guard let (client, wantsRegion) = hello(&buf, pid: pid) else { return }
        defer { agent.detach(client) }
        // The shared region the client asked for (Sources/AgentProtocol/shm.c):
        // made here, sealed, its descriptor sent right after the hello reply
        // (or the byte alone: frames on the socket only).
        var shm: OpaquePointer?
        if wantsRegion {
            let regionFD = agent.sharedRegions ? ksa_shm_create() : -1
            if regionFD >= 0 { shm = ksa_shm_map(regionFD) }
            let sent = ksa_send_fd(fd, shm != nil ? regionFD : -1)
            if regionFD >= 0 { close(regionFD) }
            guard sent == 0 else {
                ksa_shm_unmap(shm)
                return
            }
        }
        serveCalls(client, &buf, shm)
    }

    /// Decodes the hello, makes or finds the client, replies. Nil: refused
    /// (replied or dropped); else the client and whether it asked for a shared region.
    private func hello(_ buf: inout ksa_buf, pid: pid_t) -> (AgentClient, Bool)? {
        var r = ksa_rd(p: buf.data, left: buf.len, failed: 0)
        let magic = ksa_get_u32(&r)
        let version = ksa_get_u16(&r)
        let flags = ksa_get_u16(&r)
        guard let tokenPtr = ksa_get_raw(&r, Int(KSA_TOKEN_LEN)), r.failed == 0, magic == KSA_MAGIC else {
            AgentLog.line("refused pid \(pid): not a keyshare agent hello")
            return nil
        }
        let token = Array(UnsafeBufferPointer(start: tokenPtr, count: Int(KSA_TOKEN_LEN)))
        let wantsRegion = flags & UInt16(KSA_HELLO_SHM) != 0
        guard version == KSA_VERSION else {
            AgentLog.line("refused pid \(pid): protocol version \(version), this agent speaks \(KSA_VERSION)")
            reply(status: 1, token: token)
            return nil
        }
        if token.contains(where: { $0 != 0 }) {
            guard let c = agent.attach(token: token, pid: pid) else {
                AgentLog.line("refused pid \(pid): unknown client token")
                reply(status: 2, token: token)
                return nil
            }
            reply(status: 0, token: token)
            return (c, wantsRegion)
        }
        var fields: [String?] = []
        for _ in 0..<4 {
            let present = ksa_get_u8(&r)
            let n = Int(ksa_get_u32(&r))
            guard r.failed == 0, n <= 4096, let p = ksa_get_raw(&r, n) else {
                AgentLog.line("refused pid \(pid): malformed hello")
                return nil
            }
            fields.append(present == 1 ? String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self) : nil)
        }
        // The client's debug log (docs/agent.md, "Debug log"): the descriptor
        // the client sent right after the hello, written to with the client's pid.
        var logFD: Int32 = -1
        if flags & UInt16(KSA_HELLO_LOG) != 0 {
            logFD = ksa_recv_fd(fd)
            guard logFD != -2 else { return nil }
        }
        // Who connected, judged race-free (KeySharing.CallerCheck: the
        // connecting process still holds this socket close-on-exec, so it has
        // not exec'd since connect).
        var check = CallerCheck()
        let program: ProgramIdentity
        switch check.verify(connection: fd, pid: pid) {
        case .success(let caller):
            program = caller.program
            if let why = caller.unverified { AgentLog.line("pid \(pid) exe \(program): \(why)") }
        case .failure(let refusal):
            if logFD >= 0 { close(logFD) }
            AgentLog.line("refused pid \(pid): \(refusal.reason)")
            reply(status: 3, token: token)
            return nil
        }
        // The program by what it is (AgentPolicy.bound(to:)); its name in the log and the policy.
        let exe = program.description
        let home = Self.storeHome(keyshareHome: fields[0], xdgDataHome: fields[1], home: fields[2])
        // The policy of the client's store (docs/agent.md, "Policy"); a store or
        // policy that cannot be read safely refuses the client (fail closed), with
        // the answer the in-process module gives for that store: CKR_DEVICE_ERROR
        // at C_Initialize (issue 12 item 6), not "no token".
        let policy: AgentPolicy
        do { policy = try agent.policy(home: home).bound(to: program) } catch {
            if logFD >= 0 { close(logFD) }
            AgentLog.line("refused pid \(pid) exe \(exe): the policy of store \(home ?? "default") cannot be read: \(error)")
            reply(status: UInt16(KSA_HELLO_STORE_UNSAFE), token: token)
            return nil
        }
        if let why = policy.refusal(exe: exe) {
            if logFD >= 0 { close(logFD) }
            AgentLog.line("refused pid \(pid) exe \(exe): \(why)")
            reply(status: 3, token: token)
            return nil
        }
        guard let groups = Self.accessGroups(fields[3], allowed: policy.groups(exe: exe)) else {
            if logFD >= 0 { close(logFD) }
            AgentLog.line("refused pid \(pid) exe \(exe): KEYSHARE_ACCESS_GROUPS names none of the groups the policy allows it")
            reply(status: 3, token: token)
            return nil
        }
        var newToken = [UInt8](repeating: 0, count: Int(KSA_TOKEN_LEN))
        do { newToken = try SecureRandom.bytes(Int(KSA_TOKEN_LEN)) } catch {
            if logFD >= 0 { close(logFD) }
            reply(status: 4, token: token)
            return nil
        }
        // Handles start at a random base per client, so a handle from a
        // previous agent (or client) names nothing here.
        let base = CK_ULONG(UInt32.random(in: 1..<2048)) << 20 | 1
        let hiddenFor = exe
        let module = Module(home: home, accessGroups: groups, handleBase: base,
                            hidden: { [policy] token in !policy.allows(exe: hiddenFor, token: token) })
        let client = AgentClient(token: newToken, pid: pid, exe: exe, module: module,
                                 home: Agent.resolvedHome(home), policy: policy, logFD: logFD)
        agent.register(client)
        let hiddenNote = Self.hiddenNote(policy, exe: exe)
        AgentLog.line("client pid \(pid) exe \(exe): allowed (store \(home ?? "default"), groups \(Self.describe(groups))\(hiddenNote))")
        reply(status: 0, token: newToken)
        return (client, wantsRegion)
    }

    private func reply(status: UInt16, token: [UInt8]) {
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }
        ksa_put_u32(&b, KSA_MAGIC)
        ksa_put_u16(&b, UInt16(KSA_VERSION))
        ksa_put_u16(&b, status)
        token.withUnsafeBytes { ksa_put_raw(&b, $0.baseAddress, $0.count) }
        _ = ksa_write_frame(fd, b.data, b.len)
    }

    private func serveCalls(_ client: AgentClient, _ buf: inout ksa_buf, _ shm: OpaquePointer?) {
        var out = ksa_buf()
        ksa_buf_init(&out)
        defer { ksa_buf_free(&out) }
        let table = ks_function_list_3_0()
        // After a reply, poll a little for the client's next call before
        // blocking (Sources/AgentProtocol/spin.c: bounded, adaptive, off with
        // KEYSHARE_AGENT_SPIN_US=0 in the agent's environment); a call that
        // comes while polling comes through the shared region, copied into
        // `buf` before anything reads it (shm.c: the region is the client's
        // to scribble on).
        var chan = ksa_chan()
        ksa_chan_init(&chan, fd, shm, 1, agent.spinMicroseconds)
        defer {
            // How the frames went (docs/agent.md, "Round trips: shared memory"): a
            // line per connection, so a user (and 79-agent-spin) can see the region work.
            if chan.shm_in + chan.sock_in > 0 {
                AgentLog.line("pid \(client.pid): connection closed after \(chan.shm_in + chan.sock_in) calls: \(chan.shm_in) calls and \(chan.shm_out) replies through shared memory\(shm == nil ? " (none: sockets only)" : "")")
            }
            ksa_chan_close_shm(&chan)
        }
        // Calls and replies alternate from here: one recv per call (frame.c).
        while ksa_chan_recv(&chan, &buf) == 0 {
            ksa_buf_reset(&out)
            // `keyshare unlock` (docs/agent.md): the client's shared logins follow the agent's table.
            client.module.applySharedUnlocks(agent.sharedUnlocks(for: client))
            let status = Module.withCurrent(client.module) {
                Log.withDestination(fd: client.logFD, pid: client.pid) { ksa_serve(table, buf.data, buf.len, &out) }
            }
            // The request may hold a PIN: wiped before the next read.
            ksa_buf_reset(&buf)
            if status != 0 { AgentLog.line("pid \(client.pid): malformed call refused") }
            guard out.failed == 0, ksa_chan_send(&chan, out.data, out.len) == 0 else { return }
        }
    }

    /// The client's store, by the rule of Keychain's StoreLocation applied to the client's environment.
    static func storeHome(keyshareHome: String?, xdgDataHome: String?, home: String?) -> String? {
        if let h = keyshareHome, !h.isEmpty { return h }
        if let x = xdgDataHome, !x.isEmpty { return x + "/keyshare" }
        if let h = home, !h.isEmpty { return h + "/.local/share/keyshare" }
        return nil
    }

    /// KEYSHARE_ACCESS_GROUPS narrows what the client sees; it cannot widen
    /// what the policy gives (`allowed`, nil: every group). Groups the client
    /// names outside the policy's are dropped; nil when none is left (the
    /// client asked for groups it may not have: refused, not widened).
    static func accessGroups(_ raw: String?, allowed: Set<String>? = nil) -> AccessGroupChoice? {
        let asked = (raw ?? "").split(separator: ",").map { String($0).trimmingCharacters() }.filter { !$0.isEmpty }
        guard let allowed else {
            guard let first = asked.first else { return .all }
            return .groups(Set(asked), newItems: first)
        }
        if asked.isEmpty {
            guard let first = allowed.sorted().first else { return nil }
            return .groups(allowed, newItems: first)
        }
        let kept = asked.filter { allowed.contains($0) }
        guard let first = kept.first else { return nil }
        return .groups(Set(kept), newItems: first)
    }

    /// The log's note on what the policy hides from this client.
    static func hiddenNote(_ policy: AgentPolicy, exe: String) -> String {
        if policy.rules.isEmpty { return ", no policy: allow all" }
        var ids = Set<String>()
        for r in policy.rules {
            guard let t = r.tokenID, !policy.allows(exe: exe, token: t) else { continue }
            ids.insert(t.description)
        }
        return ids.isEmpty ? "" : ", hidden tokens " + ids.sorted().joined(separator: ",")
    }

    static func describe(_ g: AccessGroupChoice) -> String {
        switch g {
        case .all, .process: return "all"
        case .groups(let s, _): return s.sorted().joined(separator: ",")
        }
    }
}

extension String {
    fileprivate func trimmingCharacters() -> String {
        var s = Substring(self)
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
}
