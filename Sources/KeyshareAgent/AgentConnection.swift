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

/// One connection past the gate (Agent.serve): its first frame is in (a
/// hello or a control request); the hello, then calls until EOF.
struct AgentConnection {
    let agent: Agent
    let fd: Int32
    let pid: pid_t

    func run(kind: Int32, first buf: inout ksa_buf) {
        defer {
            ksa_buf_free(&buf)
            close(fd)
            agent.connectionEnded(pid: pid)
        }
        // The CLI's control requests (ControlServer.swift) have a magic of their own.
        if kind == Int32(KSA_GATE_CONTROL) {
            ksa_set_timeout(fd, Int32(KSA_FRAME_TIMEOUT_MS))
            ControlServer(agent: agent, fd: fd, pid: pid).serve(&buf)
            return
        }
        // A reply that cannot be written within the frame deadline (a client
        // that stopped reading) ends the connection.
        var tv = timeval(tv_sec: Int(KSA_FRAME_TIMEOUT_MS) / 1000, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        guard let (client, wantsRegion, sendsEpoch) = hello(&buf) else { return }
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
        // The epoch page (Sources/AgentProtocol/epoch.c): read-only for the client,
        // whose cached C_VerifyInit answers hold while it does not move.
        if sendsEpoch, ksa_send_fd(fd, ksa_epoch_fd()) != 0 {
            ksa_shm_unmap(shm)
            return
        }
        serveCalls(client, &buf, shm)
    }

    /// Decodes the hello (hello.c), makes or finds the client, replies. Nil:
    /// refused (replied with the reason, which is also logged); else the
    /// client, whether it asked for a shared region, and whether the epoch
    /// page's descriptor follows (asked for, and the agent has one).
    private func hello(_ buf: inout ksa_buf) -> (AgentClient, Bool, Bool)? {
        var h = ksa_hello()
        let parsed = ksa_hello_parse(buf.data, buf.len, &h)
        guard parsed != -1, let tokenPtr = h.token else {
            AgentLog.line("refused pid \(pid): not a keyshare agent hello")
            return nil
        }
        let token = Array(UnsafeBufferPointer(start: tokenPtr, count: Int(KSA_TOKEN_LEN)))
        guard parsed == 0 else {
            refuse(1, token, "protocol version \(h.version), this agent speaks \(KSA_VERSION)")
            return nil
        }
        let wantsRegion = h.flags & UInt16(KSA_HELLO_SHM) != 0
        // The store's directory watched (epoch.c): only then is the page given.
        let sendsEpoch = h.flags & UInt16(KSA_HELLO_EPOCH) != 0 && ksa_epoch_watch(agent.storeHome) == 0
        let okReason: String? = sendsEpoch ? "epoch" : nil
        if token.contains(where: { $0 != 0 }) {
            let (found, why) = agent.attach(token: token, pid: pid)
            guard let c = found else {
                refuse(why.hasPrefix("unknown") ? 2 : 6, token, why)
                return nil
            }
            reply(status: 0, token: token, reason: okReason)
            return (c, wantsRegion, sendsEpoch)
        }
        let groupsField: String? = h.groups.map { String(decoding: UnsafeBufferPointer(start: $0, count: Int(h.groups_len)), as: UTF8.self) }
        let display = Self.display(of: h)
        // The client's debug log (docs/agent.md, "Debug log"): the descriptor
        // the client sent right after the hello, written to with the client's pid.
        var logFD: Int32 = -1
        if h.flags & UInt16(KSA_HELLO_LOG) != 0 {
            logFD = ksa_recv_fd(fd)
            guard logFD != -2 else { return nil }
            // Written to without ever blocking (a pipe nobody reads, a stopped terminal).
            if logFD >= 0 { logFD = ksa_log_fd_nonblocking(logFD) }
        }
        // The process, as a pidfd taken before the caller check: the check
        // confirms this pid holds the connection, so the pidfd is the client's
        // (not a reused pid), and the agent's loop finalises the client when
        // it exits, whatever its threads are blocked in.
        let pidfd = keyshare_peer_pidfd(fd, pid)
        func fail(_ status: UInt16, _ why: String) -> (AgentClient, Bool, Bool)? {
            if logFD >= 0 { close(logFD) }
            if pidfd >= 0 { close(pidfd) }
            refuse(status, token, why)
            return nil
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
        case .failure(let refusal): return fail(3, refusal.reason)
        }
        // The program by what it is (AgentPolicy.bound(to:)); its name in the log and the policy.
        let exe = program.description
        // The policy of the agent's store (docs/agent.md, "Policy"); a store or
        // policy that cannot be read safely refuses the client (fail closed), with
        // the answer the in-process module gives for that store: CKR_DEVICE_ERROR
        // at C_Initialize (issue 12 item 6), not "no token".
        let policy: AgentPolicy
        do { policy = try agent.policy().bound(to: program) } catch {
            return fail(UInt16(KSA_HELLO_STORE_UNSAFE), "exe \(exe): the policy of store \(agent.storeHome) cannot be read: \(error)")
        }
        if let why = policy.refusal(exe: exe) { return fail(3, "exe \(exe): \(why)") }
        guard let groups = Self.accessGroups(groupsField, allowed: policy.groups(exe: exe)) else {
            return fail(3, "exe \(exe): KEYSHARE_ACCESS_GROUPS names none of the groups the policy allows it")
        }
        var newToken = [UInt8](repeating: 0, count: Int(KSA_TOKEN_LEN))
        do { newToken = try SecureRandom.bytes(Int(KSA_TOKEN_LEN)) } catch { return fail(4, "no random bytes") }
        // Handles start at a random base per client, so a handle from a
        // previous agent (or client) names nothing here.
        let base = CK_ULONG(UInt32.random(in: 1..<2048)) << 20 | 1
        let hiddenFor = exe
        let agent = self.agent
        // The agent's own prompt on this client's display (AgentPrompt.swift).
        let prompt = AgentPrompt(agent: agent, settings: agent.pinentry, display: display, pidfd: pidfd, program: program, pid: pid,
                                 policy: policy)
        let module = Module(home: agent.storeHome, accessGroups: groups, handleBase: base,
                            hidden: { [policy] token in !policy.allows(exe: hiddenFor, token: token) },
                            storeCheck: { store in try agent.verify(store) }, prompt: prompt.clientPrompt)
        // An authenticator (libpam or libcryptsetup in the client, hello.c's
        // flag) is never reached by an unlock (UnlockScope.swift, issue 27).
        let authenticator = h.flags & UInt16(KSA_HELLO_AUTHENTICATOR) != 0
        let client = AgentClient(token: newToken, pid: pid, exe: exe, module: module, policy: policy, logFD: logFD, pidfd: pidfd,
                                 display: display,
                                 unlockBarrier: UnlockBarrier(program: program, helloSaysAuthenticator: authenticator))
        agent.register(client)
        let hiddenNote = Self.hiddenNote(policy, exe: exe)
        AgentLog.line("client pid \(pid) exe \(exe): allowed (store \(agent.storeHome), groups \(Self.describe(groups))\(hiddenNote)\(authenticator ? ", authenticates a person: no unlock reaches it" : "")\(pidfd >= 0 ? "" : ", no pidfd: cleaned up when its connections close"))")
        reply(status: 0, token: newToken, reason: okReason)
        return (client, wantsRegion, sendsEpoch)
    }

    /// Where the client's person can be asked (hello fields 2 and 3): its display
    /// variables (checked names, hello.c) and its terminal, as gpg-agent takes
    /// them from each client, never from whoever started the agent.
    static func display(of h: ksa_hello) -> ClientDisplay {
        var out = ClientDisplay()
        withUnsafeBytes(of: h.display) { raw in
            let spans = raw.bindMemory(to: ksa_span.self)
            for i in 0..<min(Int(h.display_count), spans.count) {
                guard let p = spans[i].p else { continue }
                let entry = String(decoding: UnsafeBufferPointer(start: p, count: Int(spans[i].len)), as: UTF8.self)
                guard let eq = entry.firstIndex(of: "=") else { continue }
                out.variables[String(entry[..<eq])] = String(entry[entry.index(after: eq)...])
            }
        }
        if let p = h.tty.p {
            out.tty = String(decoding: UnsafeBufferPointer(start: p, count: Int(h.tty.len)), as: UTF8.self)
        }
        return out
    }

    /// A refusal: one line in the agent's log, and the same reason in the
    /// reply, which the client prints in its debug log (KEYSHARE_DEBUG).
    private func refuse(_ status: UInt16, _ token: [UInt8], _ why: String) {
        AgentLog.line("refused pid \(pid): \(why)")
        reply(status: status, token: token, reason: why)
    }

    private func reply(status: UInt16, token: [UInt8], reason: String? = nil) {
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }
        token.withUnsafeBufferPointer { t in
            ksa_hello_reply_build(&b, status, t.baseAddress, reason)
        }
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
            // How the frames went (docs/agent-transport.md, "Round trips: shared memory"): a
            // line per connection, so a user (and 79-agent-spin) can see the region work.
            if chan.shm_in + chan.sock_in > 0 {
                AgentLog.line("pid \(client.pid): connection closed after \(chan.shm_in + chan.sock_in) calls: \(chan.shm_in) calls and \(chan.shm_out) replies through shared memory\(shm == nil ? " (none: sockets only)" : ", \(chan.parked_in) of the calls met the agent parked")")
            }
            ksa_chan_close_shm(&chan)
        }
        // Calls and replies alternate from here: one recv per call (frame.c).
        while ksa_chan_recv(&chan, &buf) == 0 {
            // A call in progress: the agent's other connections park rather than poll meanwhile (spin.c).
            ksa_spin_active(1)
            defer { ksa_spin_active(-1) }
            ksa_buf_reset(&out)
            // `keyshare unlock` (docs/agent.md): the client's shared logins follow the agent's table.
            agent.applyUnlocks(to: client)
            let status = Module.withCurrent(client.module) {
                Log.withDestination(fd: client.logFD, pid: client.pid) { ksa_serve(table, buf.data, buf.len, &out) }
            }
            // The request may hold a PIN: wiped before the next read.
            ksa_buf_reset(&buf)
            if status != 0 { AgentLog.line("pid \(client.pid): malformed call refused") }
            guard out.failed == 0, ksa_chan_send(&chan, out.data, out.len) == 0 else { return }
        }
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
