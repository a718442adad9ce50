#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import FoundationEssentials
import KeyshareCrypto

/// `keyshare doctor`: what an administrator (or a support request) needs to
/// know about this user's keyshare in one screen (issue 28): the store and
/// its permissions, the agent, the OpenSSL in use, p11-kit and browser
/// registration, the TPM and the card drivers. Each problem is one line with
/// its severity and the command that fixes it. It only looks: nothing is
/// created, started (an agent that is not running is reported, not started),
/// changed or sent over a network, and no secret is read or printed.
struct DoctorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check the store, the agent, OpenSSL, p11-kit, browsers, the TPM and card drivers; say how to fix each problem.",
        discussion: """
            One line per check, then one line per problem: its severity (error: keyshare cannot work as \
            configured; warning: something will not work or is weaker than it could be) and the exact \
            command that fixes it. Notes are facts, not problems. Nothing is changed, no agent is started \
            and nothing is sent over a network. Exit status: 0 when no problem was found, 1 when at least \
            one error or warning was.
            """)

    @Flag(help: "JSON output: {version, checks: [{check, status, summary, facts}], problems: [{check, severity, problem, fix}]}.")
    var json = false

    func run() throws {
        let report = DoctorReport.gather()
        if json {
            try Console.json(report)
        } else {
            for line in report.lines() { Console.out(line) }
        }
        if !report.problems.isEmpty { throw CLIExit(code: 1) }
    }
}

/// One finding that needs action.
struct DoctorProblem: Encodable {
    enum Severity: String, Encodable { case error, warning }
    var check: String
    var severity: Severity
    var problem: String
    /// A command to run as it stands (placeholders only where the value cannot be known offline).
    var fix: String
}

/// One check's outcome: `status` is ok, note (a fact worth knowing), warning or error.
struct DoctorCheck: Encodable {
    var check: String
    var status: String
    var summary: String
    var facts: [String: JSONField]
}

/// The whole report, in a fixed order of checks (the JSON's keys are sorted).
struct DoctorReport: Encodable {
    var version: String
    var checks: [DoctorCheck] = []
    var problems: [DoctorProblem] = []

    static func gather(now: Int = Int(time(nil))) -> DoctorReport {
        var r = DoctorReport(version: KeyshareVersion.string)
        let d = DoctorChecks(now: now)
        for run in [d.store, d.agent, d.openssl, d.p11kit, d.browsers, d.tpm, d.cards] {
            let before = d.problems.count
            var check = run()
            let raised = d.problems[before...]
            if raised.contains(where: { $0.severity == .error }) { check.status = "error" }
            else if !raised.isEmpty { check.status = "warning" }
            r.checks.append(check)
        }
        r.problems = d.problems
        return r
    }

    /// The text form: an aligned line per check, then the problems (or "no problems found").
    func lines() -> [String] {
        var out = ["keyshare doctor (keyshare \(version))"]
        for c in checks {
            out.append("  " + pad(c.check, 9) + pad(c.status, 8) + c.summary)
        }
        if problems.isEmpty {
            out.append("no problems found")
        } else {
            out.append("\(problems.count) problem\(problems.count == 1 ? "" : "s"):")
            for p in problems {
                out.append("\(p.severity.rawValue): \(p.check): \(p.problem). Fix: \(p.fix)")
            }
        }
        return out
    }

    private func pad(_ s: String, _ n: Int) -> String {
        s + String(repeating: " ", count: max(1, n - s.count))
    }
}
