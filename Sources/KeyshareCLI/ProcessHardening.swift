#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// Keeps the CLI's secrets out of core dumps and out of reach of other
/// programs of the same user (issue 12, "core dumps").
///
/// The CLI decrypts private keys (export, key sign, wrap), holds PINs and the
/// shared export password in memory. A core file of it, or a same-uid program
/// reading /proc/PID/mem, would carry them. So at start the process:
/// - sets RLIMIT_CORE to 0 (no core file, also with a piped core_pattern such
///   as systemd-coredump, which honours the limit), and
/// - marks itself non-dumpable (PR_SET_DUMPABLE 0): the kernel then refuses
///   ptrace and /proc/PID/mem, environ and maps to other processes of the
///   same user (only CAP_SYS_PTRACE passes).
///
/// One exception: `keyshare password fetch` stays dumpable. The password
/// service identifies its clients by /proc/PID/exe, which the kernel hides
/// for a non-dumpable process; that command holds only the password it is
/// about to print to its caller. The limit on core files still applies to it.
///
/// The PKCS #11 module does NOT do this to its host: dumpability is a
/// process-wide setting that the host owns (it changes who may read the
/// host's /proc files, breaks the host's own debugging and crash reporting,
/// and survives until exec). docs/reliability.md records the decision; the
/// per-user agent (issue 16) is where keys leave application processes.
enum ProcessHardening {
    static func apply(arguments: [String]) {
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
        if isPasswordFetch(arguments) { return }
        _ = keyshare_set_dumpable(0)
    }

    /// `keyshare password fetch ...` (options may come before the subcommands).
    static func isPasswordFetch(_ arguments: [String]) -> Bool {
        let words = arguments.dropFirst().filter { !$0.hasPrefix("-") }
        guard let i = words.firstIndex(of: "password") else { return false }
        return words[words.index(after: i)...].first == "fetch"
    }
}
