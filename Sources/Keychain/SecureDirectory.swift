#if canImport(Glibc)
import Glibc
#endif

/// Refuses directories and files that someone other than the caller could
/// have planted or could still change, the way OpenSSH's StrictModes refuses
/// an authorized_keys file in a writable directory. Checked before anything
/// is read from the store (and by the password service for its socket
/// directory), because a store another local user controls hands them
/// whatever root or the user imports into it next.
///
/// The rule (docs/reliability-findings.md, "A store that belongs to someone else"):
/// - the directory itself, symlinks resolved, must be owned by the caller's
///   effective uid or by root, and must not be group- or world-writable;
/// - every ancestor up to `/` must be owned by the caller or root and be
///   either not group- or world-writable, or sticky (like `/tmp`): in a
///   sticky directory nobody else can rename or remove the caller's entries.
///   OpenSSH stops at the home directory; keyshare walks to `/` because a
///   store may live anywhere (`KEYSHARE_HOME`);
/// - a file in it (`checkFile`) must be a regular file (not a symlink), owned
///   by the caller or root, and not group- or world-writable.
/// Root is trusted as OpenSSH trusts it; root itself accepts only its own
/// files: a store owned by another user is exactly the planted store.
public enum SecureDirectory {
    /// Throws `KeychainError.insecurePath` (one line: the path, its owner, its
    /// mode and the fix) unless `path` is a directory only the caller or root
    /// can change; other failures (missing path) are `KeychainError.storage`.
    public static func check(path: String) throws {
        guard let real = realpath(path, nil) else {
            throw KeychainError.storage("cannot resolve \(path): \(String(cString: strerror(errno)))")
        }
        let resolved = String(cString: real)
        free(real)
        var st = stat()
        guard stat(resolved, &st) == 0 else {
            throw KeychainError.storage("cannot examine \(resolved): \(String(cString: strerror(errno)))")
        }
        guard (st.st_mode & S_IFMT) == S_IFDIR else {
            throw KeychainError.insecurePath("refusing \(path): not a directory")
        }
        try verify(resolved, st, subject: path, ancestor: false)
        var dir = resolved
        while dir != "/" {
            dir = parent(of: dir)
            guard lstat(dir, &st) == 0 else {
                throw KeychainError.storage("cannot examine \(dir): \(String(cString: strerror(errno)))")
            }
            try verify(dir, st, subject: path, ancestor: true)
        }
    }

    /// Checks one file inside a checked directory. Returns its status, or nil
    /// when it does not exist.
    @discardableResult
    public static func checkFile(path: String) throws -> stat? {
        var st = stat()
        guard lstat(path, &st) == 0 else {
            if errno == ENOENT { return nil }
            throw KeychainError.storage("cannot examine \(path): \(String(cString: strerror(errno)))")
        }
        switch st.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFLNK:
            throw KeychainError.insecurePath("refusing \(path): a symbolic link (\(describe(st))); the store's files must be regular files: replace the link with the file it points to")
        default:
            throw KeychainError.insecurePath("refusing \(path): not a regular file (\(describe(st)))")
        }
        try verify(path, st, subject: path, ancestor: false)
        return st
    }

    /// `subject` is what the caller asked for; `path` the component examined
    /// (the subject itself with symlinks resolved, or one of its ancestors).
    private static func verify(_ path: String, _ st: stat, subject: String, ancestor: Bool) throws {
        let me = geteuid()
        let which = ancestor ? "\(subject): its parent \(path) is" : "\(subject):"
        if st.st_uid != me && st.st_uid != 0 {
            throw KeychainError.insecurePath(
                "refusing \(which) owned by \(user(st.st_uid)) with mode \(mode(st)), not by this process's \(user(me))\(me == 0 ? "" : " or root"); "
                    + "another user could have planted or could swap these files: use a directory of your own (KEYSHARE_HOME), "
                    + "or chown \(me) \(path) after checking its contents")
        }
        let writable = st.st_mode & 0o022
        let sticky = ancestor && (st.st_mode & S_IFMT) == S_IFDIR && st.st_mode & mode_t(S_ISVTX) != 0
        if writable != 0 && !sticky {
            let who = writable == 0o022 ? "group- and world-writable" : writable == 0o020 ? "group-writable" : "world-writable"
            throw KeychainError.insecurePath(
                "refusing \(which) \(who) (mode \(mode(st)), owner \(user(st.st_uid))); other users could plant or swap "
                    + "these files: chmod go-w \(path) after checking its contents")
        }
    }

    static func describe(_ st: stat) -> String { "mode \(mode(st)), owner \(user(st.st_uid))" }

    static func mode(_ st: stat) -> String {
        let s = String(st.st_mode & 0o7777, radix: 8)
        return String(repeating: "0", count: max(0, 4 - s.count)) + s
    }

    /// "uid 1000 (alice)"; the name is looked up reentrantly (this runs inside host programs).
    static func user(_ uid: uid_t) -> String {
        var pw = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 1024)
        let rc = getpwuid_r(uid, &pw, &buffer, buffer.count, &result)
        if rc == 0, result != nil, let name = pw.pw_name {
            return "uid \(uid) (\(String(cString: name)))"
        }
        return "uid \(uid)"
    }

    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }
}
