/// Refusals of a flood, counted and logged once a second instead of one
/// line each (a program opening a thousand connections must not fill the log).
struct RefusalLog {
    private var counts: [String: Int] = [:]
    private var last = Agent.monotonic()

    mutating func note(_ why: String) { counts[why, default: 0] += 1 }

    mutating func flush(now: Double) {
        guard !counts.isEmpty, now - last >= 1 else { return }
        for (why, n) in counts.sorted(by: { $0.value > $1.value }).prefix(8) {
            AgentLog.line("refused \(n == 1 ? "a connection" : "\(n) connections"): \(why)")
        }
        if counts.count > 8 { AgentLog.line("refused connections for \(counts.count - 8) other reason(s)") }
        counts.removeAll()
        last = now
    }
}
