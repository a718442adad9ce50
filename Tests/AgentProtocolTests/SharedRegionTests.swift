import AgentProtocol
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Frames through the shared region beside the socket (Sources/AgentProtocol/shm.c,
/// docs/agent-transport.md "Round trips: shared memory"): a polling receiver gets frames
/// through the region, a sleeping one on the socket, a frame too big for the
/// region goes on the socket, and the agent's side refuses a region a hostile
/// client has scribbled on. The two sides map the same memfd twice, as the
/// agent and the client do.
@Suite struct SharedRegionTests {
    private struct Pair {
        let agentFD: Int32, clientFD: Int32
        let agentMap: OpaquePointer, clientMap: OpaquePointer
        /// The agent's and the client's ends of the connection (no polling).
        func channels() -> (agent: ksa_chan, client: ksa_chan) {
            var agent = ksa_chan(), client = ksa_chan()
            ksa_chan_init(&agent, agentFD, agentMap, 1, 0)
            ksa_chan_init(&client, clientFD, clientMap, 0, 0)
            return (agent, client)
        }
        func close() {
            ksa_shm_unmap(agentMap)
            ksa_shm_unmap(clientMap)
            Glibc.close(agentFD)
            Glibc.close(clientFD)
        }
    }

    private func pair() throws -> Pair {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        let region = ksa_shm_create()
        #expect(region >= 0)
        let a = try #require(ksa_shm_map(region))
        let c = try #require(ksa_shm_map(region))
        Glibc.close(region)
        return Pair(agentFD: fds[0], clientFD: fds[1], agentMap: a, clientMap: c)
    }

    private func bytes(_ b: ksa_buf) -> [UInt8] { Array(UnsafeBufferPointer(start: b.data, count: b.len)) }

    /// Both sides polling (budget 1 ms, whatever the load): calls and replies
    /// come through the region, each one whole, none lost or mixed up.
    @Test func framesGoThroughTheRegionWhenTheReceiverPolls() throws {
        let p = try pair()
        defer { p.close() }
        let rounds = 300
        let agentFD = p.agentFD, agentMap = Int(bitPattern: p.agentMap)
        let done = DispatchSemaphore(value: 0)
        let server = Thread {
            var ch = ksa_chan()
            ksa_chan_init(&ch, agentFD, OpaquePointer(bitPattern: agentMap), 1, 1000)
            ch.spin.flags = KSA_SPIN_ALWAYS
            var b = ksa_buf()
            ksa_buf_init(&b)
            for _ in 0..<rounds {
                guard ksa_chan_recv(&ch, &b) == 0 else { break }
                let reply = Array(UnsafeBufferPointer(start: b.data, count: b.len).reversed())
                guard ksa_chan_send(&ch, reply, reply.count) == 0 else { break }
            }
            ksa_buf_free(&b)
            done.signal()
        }
        server.start()
        var ch = ksa_chan()
        ksa_chan_init(&ch, p.clientFD, p.clientMap, 0, 1000)
        ch.spin.flags = KSA_SPIN_ALWAYS
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }
        var good = 0
        for i in 0..<rounds {
            let call = (0..<(1 + i * 37 % 3000)).map { UInt8(truncatingIfNeeded: $0 &+ i) }
            guard ksa_chan_send(&ch, call, call.count) == 0, ksa_chan_recv(&ch, &b) == 0 else { break }
            if bytes(b) == call.reversed() { good += 1 }
        }
        done.wait()
        #expect(good == rounds)
        #expect(ch.shm_out + ch.sock_out == UInt64(rounds) && ch.shm_in + ch.sock_in == UInt64(rounds))
        // Polling on both sides: frames go through the region. On an idle machine
        // most do; the suite runs its tests in parallel on 2 CPUs, where a preempted
        // thread misses its 1 ms budget and the socket carries that frame (seen:
        // under half once, with a build running beside the suite). At least a tenth
        // each way still shows the region carries frames both ways.
        #expect(ch.shm_out > UInt64(rounds / 10) && ch.shm_in > UInt64(rounds / 10))
    }

    /// A receiver that does not poll (budget 0) sleeps in recv: the frame must
    /// come on the socket, and a sender that finds SLEEPING sends it there
    /// without writing the region.
    @Test func aSleepingReceiverGetsTheFrameOnTheSocket() throws {
        let p = try pair()
        defer { p.close() }
        var (agent, client) = p.channels()
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }
        // The receiver is asleep (as ksa_chan_recv leaves it before its recv).
        ksa_shm_state(p.agentMap, 1).pointee = UInt32(KSA_SHM_SLEEPING)
        let call: [UInt8] = [1, 2, 3, 4, 5]
        #expect(ksa_chan_send(&client, call, call.count) == 0)
        #expect(client.sock_out == 1 && client.shm_out == 0)
        #expect(ksa_shm_len(p.agentMap, 1).pointee == 0)  // the region was not written
        #expect(ksa_read_frame_next(p.agentFD, &b) == 0 && bytes(b) == call)
        // And the receiver's side: with nothing in the region and no poll, it
        // reads the socket and leaves the state EMPTY for the next frame.
        ksa_shm_state(p.agentMap, 1).pointee = UInt32(KSA_SHM_EMPTY)
        #expect(ksa_write_frame(p.clientFD, call, call.count) == 0)
        #expect(ksa_chan_recv(&agent, &b) == 0 && bytes(b) == call)
        #expect(agent.sock_in == 1 && ksa_shm_state(p.agentMap, 1).pointee == UInt32(KSA_SHM_EMPTY))
        // A frame sent before the receiver waits is left in the region (FULL)
        // and taken from there, wiped after the copy.
        #expect(ksa_chan_send(&client, call, call.count) == 0)
        #expect(client.shm_out == 1 && ksa_shm_state(p.agentMap, 1).pointee == UInt32(KSA_SHM_FULL))
        #expect(ksa_chan_recv(&agent, &b) == 0 && bytes(b) == call)
        #expect(agent.shm_in == 1 && ksa_shm_state(p.agentMap, 1).pointee == UInt32(KSA_SHM_EMPTY))
        let left = Array(UnsafeBufferPointer(start: ksa_shm_data(p.agentMap, 1), count: call.count))
        #expect(left == [0, 0, 0, 0, 0])
    }

    /// Futex parking (issue 30, docs/agent-transport.md "Round trips: futex parking"): a
    /// receiver that does not poll sleeps on its state word (PARKED); the
    /// sender writes the frame into the region and wakes it: no socket either
    /// way, and the wake comes at once, not at the park's deadline.
    @Test func aParkedReceiverIsWokenThroughTheRegion() throws {
        let p = try pair()
        defer { p.close() }
        var client = p.channels().client
        let agentFD = p.agentFD, agentMap = Int(bitPattern: p.agentMap)
        let got = LockedBox<[UInt8]>([])
        let counts = LockedBox<(UInt64, UInt64, UInt64)>((0, 0, 0))
        let done = DispatchSemaphore(value: 0)
        let reader = Thread {
            var ch = ksa_chan()
            ksa_chan_init(&ch, agentFD, OpaquePointer(bitPattern: agentMap), 1, 0)
            ch.park_ns = 10_000_000_000  // 10 s: only the wake can end it in time
            var rb = ksa_buf()
            ksa_buf_init(&rb)
            if ksa_chan_recv(&ch, &rb) == 0 { got.set(Array(UnsafeBufferPointer(start: rb.data, count: rb.len))) }
            counts.set((ch.shm_in, ch.sock_in, ch.parked_in))
            ksa_buf_free(&rb)
            done.signal()
        }
        reader.start()
        // Wait (bounded) until the reader is parked on its state word.
        for _ in 0..<500 where ksa_shm_state(p.clientMap, 1).pointee != UInt32(KSA_SHM_PARKED) { usleep(2000) }
        #expect(ksa_shm_state(p.clientMap, 1).pointee == UInt32(KSA_SHM_PARKED))
        let began = ksa_mono_ns()
        let call: [UInt8] = [7, 6, 5, 4]
        #expect(ksa_chan_send(&client, call, call.count) == 0)
        #expect(client.shm_out == 1 && client.sock_out == 0 && client.wakes_out == 1)
        #expect(done.wait(timeout: .now() + 5) == .success)
        #expect(ksa_mono_ns() - began < 2_000_000_000)
        #expect(got.get() == call)
        let (viaRegion, viaSocket, parked) = counts.get()
        #expect(viaRegion == 1 && viaSocket == 0 && parked == 1)
        #expect(ksa_shm_state(p.agentMap, 1).pointee == UInt32(KSA_SHM_EMPTY))
    }

    /// A park ends at its deadline (a dead or idle peer): the receiver goes
    /// SLEEPING and reads the socket, where a frame sent after that comes, and
    /// where a dead peer's EOF ends the wait.
    @Test func aParkEndsAtItsDeadlineAndTheSocketTakesOver() throws {
        let p = try pair()
        defer { p.close() }
        var (agent, client) = p.channels()
        agent.park_ns = 20_000_000
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }
        let clientFD = p.clientFD, clientMap = Int(bitPattern: p.clientMap)
        let sender = Thread {
            // Well after the park's 20 ms: the receiver is asleep in recv by then.
            usleep(300_000)
            var ch = ksa_chan()
            ksa_chan_init(&ch, clientFD, OpaquePointer(bitPattern: clientMap), 0, 0)
            _ = ksa_chan_send(&ch, [1, 2, 3], 3)
        }
        sender.start()
        #expect(ksa_chan_recv(&agent, &b) == 0 && bytes(b) == [1, 2, 3])
        #expect(agent.sock_in == 1 && agent.shm_in == 0 && agent.parked_in == 0)
        #expect(ksa_shm_state(p.agentMap, 1).pointee == UInt32(KSA_SHM_EMPTY))
        // The peer dies (its socket closes) while the receiver is parked: EOF within the park.
        client.park_ns = 20_000_000
        Glibc.shutdown(p.agentFD, Int32(SHUT_WR))
        let began = ksa_mono_ns()
        #expect(ksa_chan_recv(&client, &b) == -1)
        #expect(ksa_mono_ns() - began < 2_000_000_000)
    }

    /// A frame larger than the region (64 KiB a direction) goes on the socket,
    /// announced by SOCKET so a polling receiver reads the socket.
    @Test func aFrameTooBigForTheRegionGoesOnTheSocket() throws {
        let p = try pair()
        defer { p.close() }
        var client = p.channels().client
        let big = (0..<(Int(KSA_SHM_DATA) + 1)).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let agentFD = p.agentFD, agentMap = Int(bitPattern: p.agentMap)
        let got = LockedBox<[UInt8]>([])
        let done = DispatchSemaphore(value: 0)
        let reader = Thread {
            var ch = ksa_chan()
            ksa_chan_init(&ch, agentFD, OpaquePointer(bitPattern: agentMap), 1, 0)
            var rb = ksa_buf()
            ksa_buf_init(&rb)
            if ksa_chan_recv(&ch, &rb) == 0 { got.set(Array(UnsafeBufferPointer(start: rb.data, count: rb.len))) }
            ksa_buf_free(&rb)
            done.signal()
        }
        #expect(ksa_chan_send(&client, big, big.count) == 0)
        #expect(client.sock_out == 1 && client.shm_out == 0)
        #expect(ksa_shm_state(p.clientMap, 1).pointee == UInt32(KSA_SHM_SOCKET))
        reader.start()
        done.wait()
        #expect(got.get() == big)
        #expect(ksa_shm_state(p.agentMap, 1).pointee == UInt32(KSA_SHM_EMPTY))
    }

    /// The agent's side never trusts the client's half of the region: an
    /// unknown state, a length past the region, a reply slot the client
    /// claims is full: each is a broken connection (-1), nothing read past
    /// the region, nothing written where the client pointed.
    @Test func theAgentRefusesAHostileRegion() throws {
        let p = try pair()
        defer { p.close() }
        var agent = ksa_chan()
        ksa_chan_init(&agent, p.agentFD, p.agentMap, 1, 1000)
        agent.spin.flags = KSA_SPIN_ALWAYS
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }
        let client = p.clientMap
        ksa_shm_state(client, 1).pointee = 7
        #expect(ksa_chan_recv(&agent, &b) == -1)
        // PARKED is the receiver's own state: written by the client, it is garbage.
        ksa_shm_state(client, 1).pointee = UInt32(KSA_SHM_PARKED)
        #expect(ksa_chan_recv(&agent, &b) == -1)
        ksa_shm_state(client, 1).pointee = UInt32(KSA_SHM_FULL)
        ksa_shm_len(client, 1).pointee = KSA_SHM_DATA + 1
        #expect(ksa_chan_recv(&agent, &b) == -1)
        ksa_shm_len(client, 1).pointee = UInt32.max
        #expect(ksa_chan_recv(&agent, &b) == -1)
        // A well-formed frame the client left there is taken (bounded, copied).
        ksa_shm_len(client, 1).pointee = KSA_SHM_DATA
        #expect(ksa_chan_recv(&agent, &b) == 0 && b.len == Int(KSA_SHM_DATA))
        // The reply slot: FULL, SOCKET or garbage where EMPTY, SPINNING or SLEEPING belong.
        let reply: [UInt8] = [9, 9, 9]
        for bad in [UInt32(KSA_SHM_FULL), UInt32(KSA_SHM_SOCKET), 42] {
            ksa_shm_state(client, 0).pointee = bad
            #expect(ksa_chan_send(&agent, reply, reply.count) == -1)
        }
    }

    /// The region is the agent's: sealed against shrinking (a client's
    /// ftruncate would make the agent's next access fault) and growing;
    /// mapping checks the size and the kind of file.
    @Test func theRegionIsSealedAndChecked() throws {
        let fd = ksa_shm_create()
        #expect(fd >= 0)
        defer { close(fd) }
        #expect(ftruncate(fd, 0) == -1 && errno == EPERM)
        #expect(ftruncate(fd, off_t(ksa_shm_size() * 2)) == -1 && errno == EPERM)
        let m = try #require(ksa_shm_map(fd))
        ksa_shm_unmap(m)
        var name = Array("/tmp/keyshare-shm-test.XXXXXX".utf8CString)
        let small = mkstemp(&name)
        #expect(small >= 0)
        unlink(name)
        defer { close(small) }
        #expect(ftruncate(small, 4096) == 0)
        #expect(ksa_shm_map(small) == nil)
        let null = open("/dev/null", O_RDWR)
        defer { close(null) }
        #expect(ksa_shm_map(null) == nil)
        #expect(ksa_shm_map(-1) == nil)
    }

    /// KEYSHARE_AGENT_SHM=0 turns the region off (either side); anything else leaves it on.
    @Test func theRegionCanBeTurnedOff() {
        unsetenv("KEYSHARE_AGENT_SHM")
        #expect(ksa_shm_wanted() == 1)
        setenv("KEYSHARE_AGENT_SHM", "0", 1)
        #expect(ksa_shm_wanted() == 0)
        setenv("KEYSHARE_AGENT_SHM", "1", 1)
        #expect(ksa_shm_wanted() == 1)
        unsetenv("KEYSHARE_AGENT_SHM")
    }
}

/// A value shared with a thread, under a lock.
private final class LockedBox<T>: @unchecked Sendable {
    private var value: T
    private let lock = NSLock()
    init(_ v: T) { value = v }
    func set(_ v: T) { lock.lock(); value = v; lock.unlock() }
    func get() -> T { lock.lock(); defer { lock.unlock() }; return value }
}
