import AgentProtocol
import ArgumentParser
import FoundationEssentials
import Glibc

/// `keyshare log`: the agent's audit records of key use (docs/agent.md,
/// "Audit records"), read back from the systemd journal (journalctl with the
/// project's fields), or from the agent's log where no journal runs.
struct LogCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log",
        abstract: "Show which programs used which keys (the agent's audit records).",
        discussion: """
            Each record: when, the program and its pid, what it did (sign, decrypt, derive, unwrap, decapsulate)
            with which key of which token, the mechanism and the result. The agent writes one record when a program
            first uses a key for an operation, then at most one a minute with the count, and a last count when the
            program ends. Read from the systemd journal (SYSLOG_IDENTIFIER=keyshare-agent KEYSHARE_EVENT=key-use),
            else from the agent's log. See keyshare-pkcs11(7), "The agent".
            """)

    @Option(help: "Only records since this time (journalctl's --since forms: \"2026-11-29 10:00\", \"1h ago\", today).")
    var since: String?

    @Flag(help: "JSON output: one object per record with the journal's field names.") var json = false

    func run() throws {
        let records = try Self.journalRecords(since: since) ?? Self.logRecords()
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            Console.out(String(decoding: try encoder.encode(records), as: UTF8.self))
            return
        }
        guard !records.isEmpty else {
            Console.out("no key use recorded\(since.map { " since \($0)" } ?? "")")
            return
        }
        for r in records {
            let t = (r["__REALTIME_TIMESTAMP"]).flatMap(Double.init).map { Self.localTime(Int($0 / 1e6)) } ?? "?"
            Console.out("\(t)  \(r["MESSAGE"] ?? "")")
        }
    }

    /// From journalctl; nil when no journal runs here.
    static func journalRecords(since: String?) throws -> [[String: String]]? {
        guard FileManager.default.fileExists(atPath: "/run/systemd/journal/socket"),
              let journalctl = ["/usr/bin/journalctl", "/bin/journalctl"].first(where: { FileManager.default.isExecutableFile(atPath: $0) })
        else { return nil }
        var args = ["--no-pager", "-o", "json", "SYSLOG_IDENTIFIER=keyshare-agent", "KEYSHARE_EVENT=key-use",
                    "KEYSHARE_UID=\(getuid())"]
        if let since { args += ["--since", since] }
        let run: Subprocess.Result
        do { run = try Subprocess.run(journalctl, args, timeout: 60) } catch { throw CLIError("journalctl: \(error)") }
        guard run.status == 0 else {
            let errText = String(decoding: run.errors, as: UTF8.self)
            throw CLIError("journalctl failed: \(errText.split(separator: "\n").first ?? "exit \(run.status)")")
        }
        return parse(lines: String(decoding: run.output, as: UTF8.self).split(separator: "\n").map(String.init))
    }

    /// The "audit: {...}" lines of this store's agent log (no journal).
    static func logRecords() -> [[String: String]] {
        var buf = [CChar](repeating: 0, count: 512)
        guard ksa_agent_dir(&buf, buf.count) == 0 else { return [] }
        let dir = String(decoding: buf.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let text = try? String(contentsOfFile: dir + "/agent.log", encoding: .utf8) else { return [] }
        return parse(lines: text.split(separator: "\n").compactMap { line in
            line.firstRange(of: ": audit: ").map { String(line[$0.upperBound...]) }
        })
    }

    static func parse(lines: [String]) -> [[String: String]] {
        lines.compactMap { line in
            guard let obj = (try? JSONValue.parse(Array(line.utf8)))?.object else { return nil }
            var r: [String: String] = [:]
            for (k, v) in obj where k.hasPrefix("KEYSHARE_") || ["MESSAGE", "__REALTIME_TIMESTAMP", "_PID", "PRIORITY"].contains(k) {
                if let s = v.string { r[k] = s }
            }
            return r["KEYSHARE_EVENT"] == "key-use" ? r : nil
        }
    }

    /// "yyyy-MM-dd HH:mm:ss" in local time.
    static func localTime(_ unix: Int) -> String {
        var t = time_t(unix)
        var parts = tm()
        guard localtime_r(&t, &parts) != nil else { return "?" }
        return "\(zeroPadded(parts.tm_year + 1900, 4))-\(zeroPadded(parts.tm_mon + 1, 2))-\(zeroPadded(parts.tm_mday, 2)) "
            + "\(zeroPadded(parts.tm_hour, 2)):\(zeroPadded(parts.tm_min, 2)):\(zeroPadded(parts.tm_sec, 2))"
    }
}
