#if canImport(Glibc)
import Glibc
#endif
import CSystemd
import Keychain
import KeyshareCrypto
import PKCS11

/// The agent's audit trail (docs/agent.md, "Audit records"; issue 27): every
/// use of a private or secret key goes to the systemd journal with structured
/// fields, which `keyshare log` reads back (journalctl). Nothing secret: the
/// program, its pid and uid, the token, the key's label and persistent
/// reference, the mechanism, the operation and its result.
///
/// One record per program, key, operation and mechanism when first used,
/// then at most one a minute with the count since (a TLS server signs a
/// thousand times a second: the journal must not take that), and a last one
/// with the count when the program goes.
///
/// Where no journal runs (a container), the records go to the agent's log
/// (DIR/agent.log, or stderr under a manager), said once.
final class Audit: @unchecked Sendable {
    static let messageID = "6b1d2f4e8c7a4f0f9a3e5d2c1b0a9e8f"
    static let shared = Audit()

    private let lock = Lock()
    /// (pid, key ref, operation, mechanism) -> (last record time, uses since).
    private var seen: [String: (last: Double, since: Int)] = [:]
    private var fellBack = false

    struct Use {
        var program: String
        var pid: pid_t
        var use: KeyUse
    }

    /// Records one use (rate-limited per program, key, operation, mechanism).
    func record(_ u: Use) {
        let key = "\(u.pid)|\(u.use.keyReference)|\(u.use.operation)|\(u.use.mechanism)"
        let now = Agent.monotonic()
        let (write, count) = lock.withLock { () -> (Bool, Int) in
            var entry = seen[key] ?? (last: -1e9, since: 0)
            entry.since += 1
            if now - entry.last >= 60 || u.use.result != 0 {
                let n = entry.since
                entry = (now, 0)
                seen[key] = entry
                return (true, n)
            }
            seen[key] = entry
            return (false, 0)
        }
        if write { send(u, count: count, final: false) }
    }

    /// A program is gone: the last count of each of its keys' uses.
    func programGone(pid: pid_t, program: String) {
        let pending = lock.withLock { () -> [(String, Int)] in
            let mine = seen.filter { $0.key.hasPrefix("\(pid)|") }
            for k in mine.keys { seen[k] = nil }
            return mine.filter { $0.value.since > 0 }.map { ($0.key, $0.value.since) }
        }
        for (k, n) in pending {
            let parts = k.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 4 else { continue }
            let use = KeyUse(tokenID: "", tokenLabel: "", keyLabel: "", keyReference: parts[1], operation: parts[2],
                             mechanism: parts[3], result: 0)
            send(Use(program: program, pid: pid, use: use), count: n, final: true)
        }
    }

    private func send(_ u: Use, count: Int, final: Bool) {
        let verb = u.use.operation
        let what = u.use.keyLabel.isEmpty ? u.use.keyReference : "\(u.use.keyLabel) (\(u.use.keyReference))"
        let token = u.use.tokenLabel.isEmpty ? u.use.tokenID : "\(u.use.tokenLabel) \(u.use.tokenID)"
        let result = u.use.result == 0 ? "CKR_OK" : ReturnValue.name(u.use.result)
        let message: String
        if final {
            message = "keyshare: \(u.program) (pid \(u.pid)) used key \(what) to \(verb) \(count) more time\(count == 1 ? "" : "s") before it ended"
        } else {
            message = "keyshare: \(u.program) (pid \(u.pid)) used key \(what) of token \(token) to \(verb)"
                + (u.use.mechanism.isEmpty ? "" : " with \(u.use.mechanism)") + ": \(result)"
                + (count > 1 ? " (\(count) uses since the last record)" : "")
        }
        var fields = [
            "MESSAGE=\(message)", "MESSAGE_ID=\(Self.messageID)", "PRIORITY=6", "SYSLOG_IDENTIFIER=keyshare-agent",
            "KEYSHARE_EVENT=key-use", "KEYSHARE_PROGRAM=\(u.program)", "KEYSHARE_PID=\(u.pid)", "KEYSHARE_UID=\(getuid())",
            "KEYSHARE_KEY_REF=\(u.use.keyReference)", "KEYSHARE_OPERATION=\(verb)", "KEYSHARE_MECHANISM=\(u.use.mechanism)",
            "KEYSHARE_COUNT=\(count)",
        ]
        if !final {
            fields += ["KEYSHARE_TOKEN_ID=\(u.use.tokenID)", "KEYSHARE_TOKEN_LABEL=\(u.use.tokenLabel)",
                       "KEYSHARE_KEY_LABEL=\(u.use.keyLabel)", "KEYSHARE_RESULT=\(result)"]
        }
        fields.removeAll { $0.hasSuffix("=") }   // a field with no value (no mechanism known) says nothing
        if Self.journal(fields) { return }
        let note = lock.withLock { () -> Bool in
            defer { fellBack = true }
            return !fellBack
        }
        if note {
            AgentLog.line("no systemd journal is running: key-use records go to this log, as lines starting \"audit:\" (keyshare log reads them)")
        }
        // One JSON object a line, the journal's field names (keyshare log reads both).
        var json = "{\"__REALTIME_TIMESTAMP\":\"\(Self.realtimeMicroseconds())\""
        for f in fields {
            guard let eq = f.firstIndex(of: "=") else { continue }
            json += ",\"\(f[..<eq])\":\"\(Self.jsonEscaped(String(f[f.index(after: eq)...])))\""
        }
        AgentLog.line("audit: " + json + "}")
    }

    static func realtimeMicroseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
    }

    static func jsonEscaped(_ s: String) -> String {
        var out = ""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where u.value < 0x20:
                let hex = String(u.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(u)
            }
        }
        return out
    }

    /// sd_journal_sendv; false when no journal takes it.
    static func journal(_ fields: [String]) -> Bool {
        var socket = stat()
        guard stat("/run/systemd/journal/socket", &socket) == 0 else { return false }
        let bytes = fields.map { Array($0.utf8) }
        var iov = [iovec](repeating: iovec(), count: bytes.count)
        let rc: Int32 = bytes.withUnsafeBufferPointers { ptrs in
            for (i, p) in ptrs.enumerated() {
                iov[i] = iovec(iov_base: UnsafeMutableRawPointer(mutating: p.baseAddress), iov_len: p.count)
            }
            return sd_journal_sendv(&iov, Int32(iov.count))
        }
        return rc >= 0
    }
}

extension Array where Element == [UInt8] {
    /// Every element's buffer pointer at once (for an iovec array).
    fileprivate func withUnsafeBufferPointers<R>(_ body: ([UnsafeBufferPointer<UInt8>]) -> R) -> R {
        var ptrs: [UnsafeBufferPointer<UInt8>] = []
        func go(_ i: Int) -> R {
            if i == count { return body(ptrs) }
            return self[i].withUnsafeBufferPointer { p in
                ptrs.append(p)
                return go(i + 1)
            }
        }
        return go(0)
    }
}
