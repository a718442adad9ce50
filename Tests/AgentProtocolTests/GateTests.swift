import AgentProtocol
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The agent's gate (Sources/AgentProtocol/gate.c, docs/agent.md
/// "Connections"): accepted connections wait there, read without blocking,
/// until their first frame is whole. A frame in many pieces comes out whole;
/// an impossible header, a foreign magic, too many connections, too many
/// bytes, a peer that closes or stays silent are refused with one reason;
/// the descriptor byte after a hello is left in the socket. The fuzzer
/// Tests/fuzz/gate_fuzz.c drives the same gate with hostile scripts.
@Suite struct GateTests {
    struct Event {
        let fd: Int32, pid: pid_t, kind: Int32
        let why: String?
        let data: [UInt8]
    }

    /// A connected pair: the client's end, and the agent's end given to the gate.
    func connect(_ g: OpaquePointer, pid: pid_t = 42) -> (client: Int32, agent: Int32, why: String?) {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0)
        var why: UnsafePointer<CChar>?
        if ksa_gate_add(g, fds[0], pid, &why) != 0 {
            close(fds[0])
            close(fds[1])
            return (-1, -1, why.map { String(cString: $0) } ?? "?")
        }
        return (fds[1], fds[0], nil)
    }

    /// One turn of the agent's loop: poll (no wait), service, take every event.
    func service(_ g: OpaquePointer) -> [Event] {
        var pfds = [pollfd](repeating: pollfd(), count: max(1, Int(ksa_gate_count(g))))
        let n = ksa_gate_pollfds(g, &pfds, Int32(pfds.count))
        if n > 0 { _ = poll(&pfds, nfds_t(n), 0) }
        ksa_gate_service(g, pfds, n)
        var out: [Event] = []
        var ev = ksa_gate_event()
        while ksa_gate_take(g, &ev) == 1 {
            let data = ev.data.map { Array(UnsafeBufferPointer(start: $0, count: ev.len)) } ?? []
            free(ev.data)
            out.append(Event(fd: ev.fd, pid: ev.pid, kind: ev.kind, why: ev.why.map { String(cString: $0) }, data: data))
        }
        return out
    }

    func send(_ fd: Int32, _ bytes: [UInt8]) {
        let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        #expect(n == bytes.count)
    }

    func frame(_ payload: [UInt8]) -> [UInt8] {
        let n = UInt32(payload.count)
        return [UInt8(n & 0xff), UInt8(n >> 8 & 0xff), UInt8(n >> 16 & 0xff), UInt8(n >> 24)] + payload
    }

    func header(_ len: UInt32, _ magic: UInt32) -> [UInt8] {
        (0..<4).map { UInt8(len >> (8 * $0) & 0xff) } + (0..<4).map { UInt8(magic >> (8 * $0) & 0xff) }
    }

    func helloPayload() -> [UInt8] {
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }
        ksa_hello_build(&b, UInt16(KSA_HELLO_LOG), [UInt8](repeating: 0, count: 16), "com.example.app")
        return Array(UnsafeBufferPointer(start: b.data, count: b.len))
    }

    func gate(pending: UInt32 = 8, perPid: UInt32 = 8, budget: Int = 1 << 20, deadlineMS: Int32 = 60_000) throws -> OpaquePointer {
        try #require(ksa_gate_new(pending, perPid, budget, deadlineMS))
    }

    @Test func aFrameInManySmallWritesComesOutWhole() throws {
        let g = try gate()
        defer { ksa_gate_free(g) }
        let c = connect(g)
        defer { close(c.client) }
        let payload = helloPayload()
        let bytes = frame(payload)
        for (i, byte) in bytes.enumerated() {
            send(c.client, [byte])
            let events = service(g)
            if i < bytes.count - 1 {
                #expect(events.isEmpty, "an event after \(i + 1) of \(bytes.count) bytes")
                #expect(ksa_gate_count(g) == 1)
            } else {
                #expect(events.count == 1)
                let ev = try #require(events.first)
                defer { close(ev.fd) }
                #expect(ev.kind == Int32(KSA_GATE_HELLO) && ev.why == nil && ev.pid == 42 && ev.fd == c.agent)
                #expect(ev.data == payload)
                #expect(fcntl(ev.fd, F_GETFL) & O_NONBLOCK == 0)   // blocking again for its thread
            }
        }
        #expect(ksa_gate_count(g) == 0 && ksa_gate_bytes(g) == 0)
        // A control request in 3-byte pieces.
        let d = connect(g, pid: 43)
        defer { close(d.client) }
        let control: [UInt8] = header(0, KSA_CONTROL_MAGIC)[4...] + [1, 0, 3, 0, 0, 0, 0, 0]
        let cb = frame(control)
        var got: [Event] = []
        for start in stride(from: 0, to: cb.count, by: 3) {
            send(d.client, Array(cb[start..<min(start + 3, cb.count)]))
            got += service(g)
        }
        #expect(got.count == 1 && got.first?.kind == Int32(KSA_GATE_CONTROL) && got.first?.data == control)
        got.forEach { close($0.fd) }
    }

    @Test func aHelloOver64KiBIsRefusedAtItsHeader() throws {
        let g = try gate()
        defer { ksa_gate_free(g) }
        let c = connect(g)
        defer { close(c.client) }
        send(c.client, header(KSA_HELLO_MAX_FRAME + 1, KSA_MAGIC))
        let events = service(g)
        #expect(events.count == 1 && events.first?.kind == 0 && events.first?.why == "a hello of an impossible length")
        #expect(ksa_gate_bytes(g) == 0)   // nothing was allocated for it
        events.forEach { close($0.fd) }
        // 64 KiB exactly is a possible hello: it waits for its bytes.
        let d = connect(g)
        defer { close(d.client) }
        send(d.client, header(KSA_HELLO_MAX_FRAME, KSA_MAGIC))
        #expect(service(g).isEmpty && ksa_gate_count(g) == 1)
        // Shorter than its own magic and version: impossible too, for both kinds.
        let e = connect(g)
        defer { close(e.client) }
        send(e.client, header(7, KSA_CONTROL_MAGIC))
        let short = service(g)
        #expect(short.count == 1 && short.first?.why == "a control request of an impossible length")
        short.forEach { close($0.fd) }
    }

    @Test func aForeignMagicIsRefused() throws {
        let g = try gate()
        defer { ksa_gate_free(g) }
        let c = connect(g)
        defer { close(c.client) }
        send(c.client, Array("GET / HTTP/1.1\r\n\r\n".utf8))
        let events = service(g)
        #expect(events.count == 1 && events.first?.kind == 0 && events.first?.why == "not a keyshare hello or control request")
        events.forEach { close($0.fd) }
    }

    @Test func perProcessLimitAndAFullGatePushesOutTheLongestWaiting() throws {
        let g = try gate(pending: 3, perPid: 2)
        defer { ksa_gate_free(g) }
        let a = connect(g, pid: 1)
        usleep(3000)   // a's deadline is the earliest
        let b = connect(g, pid: 1)
        #expect(a.why == nil && b.why == nil)
        let c = connect(g, pid: 1)
        #expect(c.why == "this process already has the most connections that may wait for their first frame")
        usleep(3000)
        let d = connect(g, pid: 2)
        #expect(d.why == nil && ksa_gate_count(g) == 3)
        usleep(3000)
        // The gate is full: a new connection takes the place of the one that waited longest.
        let e = connect(g, pid: 3)
        #expect(e.why == nil && ksa_gate_count(g) == 3)
        var ev = ksa_gate_event()
        #expect(ksa_gate_take(g, &ev) == 1)
        #expect(ev.fd == a.agent && ev.pid == 1 && ev.kind == 0
            && ev.why.map { String(cString: $0) } == "pushed out of the full gate by a newer connection (the longest waiting)")
        if ev.fd >= 0 { close(ev.fd) }
        #expect(ksa_gate_take(g, &ev) == 0)
        // One of pid 1 is gone: pid 1 may wait with another, which pushes out b, now the oldest.
        let f = connect(g, pid: 1)
        #expect(f.why == nil)
        #expect(ksa_gate_take(g, &ev) == 1 && ev.fd == b.agent && ev.pid == 1)
        if ev.fd >= 0 { close(ev.fd) }
        #expect(ksa_gate_take(g, &ev) == 0 && ksa_gate_count(g) == 3)
        for x in [a, b, d, e, f] where x.client >= 0 { close(x.client) }
        // A gate of no places refuses.
        let none = try gate(pending: 0)
        defer { ksa_gate_free(none) }
        #expect(connect(none).why == "too many connections are waiting for their first frame")
    }

    @Test func theByteBudgetIsShared() throws {
        let g = try gate(budget: 6000)
        defer { ksa_gate_free(g) }
        // A control request of 100,000 bytes: 4 KiB held at its header, no more.
        let big = connect(g)
        defer { close(big.client) }
        send(big.client, header(100_000, KSA_CONTROL_MAGIC))
        #expect(service(g).isEmpty && ksa_gate_bytes(g) == 4096)
        // Another connection's 4,000-byte hello does not fit beside it.
        let other = connect(g, pid: 7)
        defer { close(other.client) }
        send(other.client, header(4000, KSA_MAGIC))
        let refused = service(g)
        #expect(refused.count == 1 && refused.first?.pid == 7
            && refused.first?.why == "the agent holds its most bytes of unfinished first frames")
        refused.forEach { close($0.fd) }
        #expect(ksa_gate_bytes(g) == 4096)
        // The big one fills its 4 KiB; growing to 8 KiB would pass the budget.
        send(big.client, [UInt8](repeating: 0x41, count: 4092))
        let grown = service(g)
        #expect(grown.count == 1 && grown.first?.why == "the agent holds its most bytes of unfinished first frames")
        grown.forEach { close($0.fd) }
        #expect(ksa_gate_bytes(g) == 0 && ksa_gate_count(g) == 0)
    }

    @Test func aPeerClosingMidFrameIsRefusedAndBeforeAnyByteIsSilent() throws {
        let g = try gate()
        defer { ksa_gate_free(g) }
        let mid = connect(g, pid: 1)
        send(mid.client, Array(frame(helloPayload())[0..<20]))
        #expect(service(g).isEmpty)
        close(mid.client)
        let cut = service(g)
        #expect(cut.count == 1 && cut.first?.why == "the connection closed in the middle of its first frame")
        cut.forEach { close($0.fd) }
        let silent = connect(g, pid: 2)
        close(silent.client)
        let quiet = service(g)
        #expect(quiet.count == 1 && quiet.first?.kind == 0 && quiet.first?.why == "")
        quiet.forEach { close($0.fd) }
        #expect(ksa_gate_bytes(g) == 0)
    }

    @Test func theDescriptorByteAfterAHelloStaysInTheSocket() throws {
        let g = try gate()
        defer { ksa_gate_free(g) }
        let c = connect(g)
        defer { close(c.client) }
        var pipeFDs: [Int32] = [0, 0]
        #expect(pipe(&pipeFDs) == 0)
        defer { close(pipeFDs[0]); close(pipeFDs[1]) }
        // The hello and its descriptor byte in the socket before the gate reads a byte.
        send(c.client, frame(helloPayload()))
        #expect(ksa_send_fd(c.client, pipeFDs[1]) == 0)
        let events = service(g)
        let ev = try #require(events.first)
        defer { close(ev.fd) }
        #expect(events.count == 1 && ev.kind == Int32(KSA_GATE_HELLO) && ev.data == helloPayload())
        let passed = ksa_recv_fd(ev.fd)
        #expect(passed >= 0)
        if passed >= 0 {
            // The very pipe: what goes in one end comes out of the other.
            #expect(write(passed, "x", 1) == 1)
            var byte: UInt8 = 0
            #expect(read(pipeFDs[0], &byte, 1) == 1 && byte == 0x78)
            close(passed)
        }
    }

    @Test func deadlinesRefuseTheSilentAndTheSlow() throws {
        let g = try gate(deadlineMS: 0)
        defer { ksa_gate_free(g) }
        #expect(ksa_gate_timeout_ms(g) == -1)
        let silent = connect(g, pid: 1)
        defer { close(silent.client) }
        #expect(ksa_gate_timeout_ms(g) == 0)
        let first = service(g)
        #expect(first.count == 1 && first.first?.why == "it sent nothing in time")
        first.forEach { close($0.fd) }
        let slow = connect(g, pid: 2)
        defer { close(slow.client) }
        send(slow.client, [5, 0, 0])
        let second = service(g)
        #expect(second.count == 1 && second.first?.why == "its first frame did not arrive in time")
        second.forEach { close($0.fd) }
        // A frame already whole is served, deadline or not.
        let quick = connect(g, pid: 3)
        defer { close(quick.client) }
        send(quick.client, frame(helloPayload()))
        let third = service(g)
        #expect(third.count == 1 && third.first?.kind == Int32(KSA_GATE_HELLO))
        third.forEach { close($0.fd) }
        // With a real deadline, the wait is bounded by it.
        let h = try gate(deadlineMS: 5000)
        defer { ksa_gate_free(h) }
        let w = connect(h)
        defer { close(w.client) }
        let t = ksa_gate_timeout_ms(h)
        #expect(t > 2500 && t <= 5000)
        #expect(service(h).isEmpty)
    }
}
