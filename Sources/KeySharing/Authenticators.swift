#if canImport(Glibc)
import Glibc
#endif
import KeyshareCrypto

/// Programs that authenticate a person with the token (issue 27, "Unlocks
/// that are scoped"): a PAM stack (login, sshd, a display manager, sudo, su,
/// polkit's helper, pamtester), a disk unlocker (cryptsetup,
/// systemd-cryptsetup, systemd-homework) or a screen locker. For them "the
/// token is usable" is "the person is here": were `keyshare unlock` to reach
/// them, pam_p11 would accept any PIN (it skips C_Login when the token needs
/// no login) and systemd-cryptsetup would open a disk without one. So no
/// unlock reaches them, even one that names them (docs/agent.md, "Unlock
/// across processes").
///
/// Recognised by executable, as the policy recognises programs: the name the
/// client's executable has (a false hit only costs that program the unlock,
/// so a name is enough), or the same file or content as one of these names
/// installed in the usual directories of the agent's mount namespace (a
/// renamed copy of sudo is sudo). A client that has libpam or libcryptsetup
/// loaded says so in its hello (KSA_HELLO_AUTHENTICATOR), which catches a PAM
/// stack or disk tool this list does not name; an authenticator that neither
/// is on this list nor loads either library is not caught: that is why an
/// unlock names its programs (`--program`, or policy `unlock` rules), never
/// "every program".
public enum Authenticators {
    /// Executable names (the last path component).
    public static let names: Set<String> = [
        // PAM stacks: logins, remote logins, privilege changes, password checks.
        "login", "sshd", "sshd-session", "su", "sudo", "doas", "pkexec", "polkit-agent-helper-1", "unix_chkpwd",
        "passwd", "chsh", "chfn", "newgrp", "vlock", "pamtester",
        // Display managers.
        "gdm", "gdm3", "gdm-session-worker", "lightdm", "sddm", "sddm-helper", "greetd", "lxdm", "xdm",
        // Disks and home directories.
        "cryptsetup", "systemd-cryptsetup", "systemd-cryptenroll", "systemd-homework", "systemd-homed",
        // Screen lockers.
        "xscreensaver", "xscreensaver-auth", "i3lock", "swaylock", "gnome-screensaver", "gnome-screensaver-dialog",
        "light-locker", "kscreenlocker_greet", "xsecurelock", "slock", "xlock", "physlock", "hyprlock", "gtklock", "waylock",
    ]

    /// Where those names are installed (Debian, Fedora, Arch, merged /usr or not).
    static let directories = [
        "/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/bin", "/usr/local/sbin", "/usr/libexec",
        "/usr/lib/systemd", "/usr/lib/polkit-1", "/usr/libexec/polkit-1", "/usr/lib/x86_64-linux-gnu/libexec",
        "/usr/lib/aarch64-linux-gnu/libexec", "/usr/libexec/xscreensaver",
    ]

    /// The last component of a path as /proc/PID/exe shows it (" (deleted)" dropped).
    static func name(of path: String) -> String {
        var p = Substring(path)
        if p.hasSuffix(" (deleted)") { p = p.dropLast(10) }
        return String(p.split(separator: "/").last ?? "")
    }

    /// Why the program a client runs authenticates a person (one phrase for
    /// the log and the CLI); nil: not one this list knows.
    public static func reason(for program: ProgramIdentity) -> String? {
        reason(path: program.path) {
            $0.names(program)
        }
    }

    /// The same, for a program named by path (`keyshare unlock --program`).
    public static func reason(for program: NamedProgram) -> String? {
        reason(path: program.path) { $0.sameProgram(as: program) }
    }

    private static func reason(path: String, matches: (NamedProgram) -> Bool) -> String? {
        let n = name(of: path)
        if names.contains(n) { return "its executable is \(n), a program that authenticates a person (built-in list)" }
        if let hit = installed().first(where: matches) {
            return "it is \(hit.path) (same file or content), a program that authenticates a person (built-in list)"
        }
        return nil
    }

    private final class Cache: @unchecked Sendable {
        let lock = Lock()
        var found: [NamedProgram] = []
        var at = -Double.infinity
    }
    private static let cache = Cache()

    /// The listed names installed now, one entry per file (found again after
    /// a minute: a package installed later is seen; digests are cached by ProgramDigests).
    static func installed() -> [NamedProgram] {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let now = Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
        return cache.lock.withLock {
            if now - cache.at < 60 { return cache.found }
            var found: [NamedProgram] = []
            for dir in directories {
                for n in names.sorted() {
                    let path = dir + "/" + n
                    guard let id = FileIdentity(path: path), !found.contains(where: { $0.file == id }),
                          let p = NamedProgram(path: path) else { continue }
                    found.append(p)
                }
            }
            cache.found = found
            cache.at = now
            return found
        }
    }
}
