#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials

/// Small helpers of `keyshare doctor`: the store's path rule as problems with
/// their fix (SecureDirectory's rule, restated so each finding names its own
/// command), shell quoting for those commands, and bounded file reads.
enum Doctor {
    /// A directory and every ancestor up to `/`, by SecureDirectory's rule:
    /// owned by this user or root, and not group- or world-writable unless it
    /// is a sticky ancestor (like /tmp). `leaf`: `path` is the store's own
    /// directory (an ancestor's fix is to move the store, not to chmod it).
    static func pathProblems(_ path: String, leaf: Bool) -> [(String, String)] {
        guard let real = realpath(path, nil) else { return [] }
        var dir = String(cString: real)
        free(real)
        var out: [(String, String)] = []
        var st = stat()
        var ancestor = !leaf
        while true {
            if lstat(dir, &st) == 0 { out += problems(dir, st, ancestor: ancestor) }
            if dir == "/" { break }
            dir = parent(dir)
            ancestor = true
        }
        return out
    }

    private static func problems(_ path: String, _ st: stat, ancestor: Bool) -> [(String, String)] {
        let me = geteuid()
        let isDir = st.st_mode & S_IFMT == S_IFDIR
        var out: [(String, String)] = []
        if st.st_uid != me && st.st_uid != 0 {
            out.append(("\(path) is owned by uid \(st.st_uid), not by this user (uid \(me)) or root: another user could swap the store's files",
                        ancestor ? "export KEYSHARE_HOME=$HOME/.local/share/keyshare (a directory of your own)"
                            : "sudo chown \(me) \(quote(path))"))
        }
        let writable = st.st_mode & 0o022
        let sticky = ancestor && isDir && st.st_mode & mode_t(S_ISVTX) != 0
        if writable != 0 && !sticky {
            let who = writable == 0o022 ? "group- and world-writable" : writable == 0o020 ? "group-writable" : "world-writable"
            out.append(("\(path) is \(who) (mode \(mode(st))): other users could plant or swap the store's files",
                        "chmod go-w \(quote(path))"))
        }
        return out
    }

    /// keychain.db (or a companion) by SecureDirectory.checkFile's rule, plus
    /// what an open would tighten (readable by others) and an emptied store.
    static func fileProblems(_ path: String, _ st: stat, mustHaveData: Bool) -> [(DoctorProblem.Severity, String, String)] {
        let q = quote(path)
        switch st.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFLNK:
            return [(.error, "\(path) is a symbolic link; the store's files must be regular files",
                     "cp --remove-destination \"$(readlink -f \(q))\" \(q)")]
        default:
            return [(.error, "\(path) is not a regular file", "mv \(q) \(quote(path + ".not-a-store"))")]
        }
        let me = geteuid()
        if st.st_uid != me && st.st_uid != 0 {
            return [(.error, "\(path) is owned by uid \(st.st_uid), not by this user (uid \(me))", "sudo chown \(me) \(q)")]
        }
        if st.st_mode & 0o022 != 0 {
            return [(.error, "\(path) is writable by other users (mode \(mode(st)))", "chmod 600 \(q)")]
        }
        var out: [(DoctorProblem.Severity, String, String)] = []
        if st.st_mode & 0o044 != 0 {
            out.append((.warning, "\(path) is readable by other users (mode \(mode(st)))", "chmod 600 \(q)"))
        }
        if mustHaveData && st.st_size == 0 {
            out.append((.error, "\(path) is empty (0 bytes): the store was truncated",
                        "mv \(q) \(quote(path + ".empty")) (then restore keychain.db from a backup)"))
        }
        return out
    }

    static func mode(_ st: stat) -> String {
        let s = String(st.st_mode & 0o7777, radix: 8)
        return String(repeating: "0", count: max(0, 4 - s.count)) + s
    }

    static func parent(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }

    /// A word as a POSIX shell reads it back: as is when it is plain, else in single quotes.
    static func quote(_ s: String) -> String {
        let plain = !s.isEmpty && s.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || Array("_/.:=@%+,-".utf8).contains(c)
        }
        return plain ? s : "'" + s.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }

    /// A small text file (configuration), nil when absent, unreadable or over 1 MiB.
    static func read(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_size <= 1 << 20,
              let data = FileManager.default.contents(atPath: path) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    enum NSSState: String { case registered, notRegistered = "not registered", missingLibrary = "registered module missing" }

    /// keyshare's block in an NSS database directory's pkcs11.txt; nil when there is no database.
    static func nssRegistration(_ directory: String) -> NSSState? {
        guard let text = read(directory + "/pkcs11.txt") else { return nil }
        let ours = NSSModuleDatabase.blocks(text).filter(NSSModuleDatabase.isKeyshare)
        guard !ours.isEmpty else { return .notRegistered }
        let libraries = ours.compactMap { NSSModuleDatabase.value("library", in: $0) }
        return libraries.contains { access($0, R_OK) == 0 } ? .registered : .missingLibrary
    }
}
