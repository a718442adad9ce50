import AgentProtocol
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Bounded adaptive polling before a blocking read (Sources/AgentProtocol/spin.c,
/// docs/agent-transport.md "Round trips: bounded polling"): it never consumes a byte, a
/// budget of 0 never polls, an unanswered poll backs off, an answered one
/// resets the back-off, and a poll never outlasts its budget by much.
@Suite struct SpinTests {
    private func pair() -> (Int32, Int32) {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        return (fds[0], fds[1])
    }

    private func monotonicMicros() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) * 1e6 + Double(t.tv_nsec) / 1e3
    }

    @Test func zeroBudgetNeverPolls() {
        let (a, b) = pair()
        defer { close(a); close(b) }
        var s = ksa_spin()
        ksa_spin_init(&s, 0)
        s.flags = KSA_SPIN_ALWAYS
        let one: [UInt8] = [1]
        #expect(ksa_write_frame(a, one, 1) == 0)
        #expect(ksa_spin_wait(b, &s) == 0)
        #expect(s.spins_answered == 0 && s.spins_missed == 0 && s.skip == 0)
    }

    /// A pending frame is seen and left in the socket: the read that follows
    /// gets it whole (the poll only peeks).
    @Test func aPendingFrameIsSeenAndNotConsumed() {
        let (a, b) = pair()
        defer { close(a); close(b) }
        var s = ksa_spin()
        ksa_spin_init(&s, 1000)
        s.flags = KSA_SPIN_ALWAYS
        let payload: [UInt8] = (0..<300).map { UInt8(truncatingIfNeeded: $0) }
        #expect(ksa_write_frame(a, payload, payload.count) == 0)
        #expect(ksa_spin_wait(b, &s) == 1)
        #expect(s.spins_answered == 1 && s.misses == 0)
        var buf = ksa_buf()
        ksa_buf_init(&buf)
        defer { ksa_buf_free(&buf) }
        #expect(ksa_read_frame_next(b, &buf) == 0)
        #expect(Array(UnsafeBufferPointer(start: buf.data, count: buf.len)) == payload)
    }

    /// EOF (the agent died, the client went away) ends the poll at once: the
    /// read then sees it and the connection's usual handling follows.
    @Test func eofEndsThePoll() {
        let (a, b) = pair()
        defer { close(b) }
        close(a)
        var s = ksa_spin()
        ksa_spin_init(&s, 1000)
        s.flags = KSA_SPIN_ALWAYS
        let t0 = monotonicMicros()
        #expect(ksa_spin_wait(b, &s) == 1)
        #expect(monotonicMicros() - t0 < 500_000)
    }

    /// Nothing comes: the poll gives up after about its budget, and the next
    /// 2, then 4, ... waits (at most 64) block at once without polling; an
    /// answered poll resets the back-off.
    @Test func anUnansweredPollBacksOff() {
        let (a, b) = pair()
        defer { close(a); close(b) }
        var s = ksa_spin()
        ksa_spin_init(&s, 200)
        s.flags = KSA_SPIN_ALWAYS
        let t0 = monotonicMicros()
        #expect(ksa_spin_wait(b, &s) == 0)
        let took = monotonicMicros() - t0
        #expect(took >= 200)
        #expect(took < 200_000)  // bounded (a preempted test thread may overrun the 200 us a little)
        #expect(s.spins_missed == 1 && s.skip == 2)
        #expect(ksa_spin_wait(b, &s) == 0 && ksa_spin_wait(b, &s) == 0)
        #expect(s.spins_missed == 1 && s.skip == 0)  // skipped, not polled
        #expect(ksa_spin_wait(b, &s) == 0)
        #expect(s.spins_missed == 2 && s.skip == 4)
        for _ in 0..<20 { s.skip = 0; _ = ksa_spin_wait(b, &s) }
        #expect(s.skip == 64)  // capped
        s.skip = 0
        let one: [UInt8] = [1]
        #expect(ksa_write_frame(a, one, 1) == 0)
        #expect(ksa_spin_wait(b, &s) == 1)
        #expect(s.misses == 0 && s.skip == 0)
    }

    /// KEYSHARE_AGENT_SPIN_US: unset is the default, 0 is off, a larger value is capped at 1000.
    @Test func budgetFromTheEnvironment() {
        unsetenv("KEYSHARE_AGENT_SPIN_US")
        #expect(ksa_spin_budget_us() == KSA_SPIN_US_DEFAULT)
        setenv("KEYSHARE_AGENT_SPIN_US", "0", 1)
        #expect(ksa_spin_budget_us() == 0)
        setenv("KEYSHARE_AGENT_SPIN_US", "99999", 1)
        #expect(ksa_spin_budget_us() == 1000)
        setenv("KEYSHARE_AGENT_SPIN_US", "abc", 1)
        #expect(ksa_spin_budget_us() == KSA_SPIN_US_DEFAULT)
        unsetenv("KEYSHARE_AGENT_SPIN_US")
    }

    private func monotonicNanos() -> UInt64 {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
    }

    /// ksa_spin_done learns the peer's answer time: an answer within
    /// KSA_SPIN_LEARN_MAX_US sets the next budget to about 5/4 of it and clears
    /// the back-off a near miss set; a quicker answer lowers it by an eighth a
    /// call, not at once; an answer over the cap halves it; an answer within
    /// the base budget learns nothing. (The wait's start is set back by hand,
    /// so the figures do not depend on the scheduler.)
    @Test func theClientLearnsHowLongItsCallsTake() {
        let (a, b) = pair()
        defer { close(a); close(b) }
        var s = ksa_spin()
        ksa_spin_init(&s, 20)
        s.flags = KSA_SPIN_ALWAYS
        // A wait the 20 us budget misses (back-off set); the answer came 100 us after it began.
        #expect(ksa_spin_wait(b, &s) == 0)
        #expect(s.skip == 2)
        s.wait_start_ns = monotonicNanos() - 100_000
        ksa_spin_done(&s)
        #expect(s.learned_ns >= 125_000 && s.learned_ns < 180_000)
        #expect(s.skip == 0 && s.misses == 0)
        // The next wait polls for the learned time, not the 20 us base: unanswered,
        // it gives up after at least 125 us.
        let t0 = monotonicNanos()
        #expect(ksa_spin_wait(b, &s) == 0)
        #expect(monotonicNanos() - t0 >= 125_000)
        s.wait_start_ns = monotonicNanos() - 100_000  // and then the answer came (100 us)
        ksa_spin_done(&s)
        // A quick answer (10 us) lowers it by an eighth, not to the base.
        let learned = s.learned_ns
        s.wait_start_ns = monotonicNanos() - 10_000
        ksa_spin_done(&s)
        #expect(s.learned_ns == learned - learned / 8)
        // An answer over the cap (an RSA key generation, an idle peer) halves it.
        let before = s.learned_ns
        s.wait_start_ns = monotonicNanos() - UInt64(KSA_SPIN_LEARN_MAX_US) * 2000
        ksa_spin_done(&s)
        #expect(s.learned_ns == before / 2)
        // With nothing learned, an answer within the base budget learns nothing.
        var q = ksa_spin()
        ksa_spin_init(&q, 50)
        q.wait_start_ns = monotonicNanos() - 10_000
        ksa_spin_done(&q)
        #expect(q.learned_ns == 0)
    }
}
