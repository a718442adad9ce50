#if canImport(Glibc)
import Glibc
#endif

/// Where the store lives and how its files are protected: the keychain is
/// readable by its owner only, enforced at every open (a copied or restored
/// file with loose modes is tightened, not trusted).
enum StoreLocation {
    static func env(_ name: String) -> String? {
        guard let v = getenv(name) else { return nil }
        let s = String(cString: v)
        return s.isEmpty ? nil : s
    }

    static func defaultHome() -> String {
        if let h = env("KEYSHARE_HOME") { return h }
        if let x = env("XDG_DATA_HOME") { return x + "/keyshare" }
        if let home = env("HOME") { return home + "/.local/share/keyshare" }
        if let pw = getpwuid(getuid()), let dir = pw.pointee.pw_dir {
            return String(cString: dir) + "/.local/share/keyshare"
        }
        return "/tmp/keyshare-\(getuid())"
    }

    /// mkdir -p; the leaf directory is 0700 and tightened if it already exists.
    static func prepareDirectory(_ path: String) throws {
        var prefix = path.hasPrefix("/") ? "" : "."
        for comp in path.split(separator: "/") {
            prefix += "/" + comp
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw KeychainError.storage("cannot create \(prefix): \(String(cString: strerror(errno)))")
            }
        }
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else {
            throw KeychainError.storage("\(path) is not a directory")
        }
        if st.st_mode & 0o077 != 0, st.st_uid == getuid() {
            chmod(path, 0o700)
        }
    }

    /// Creates the database file 0600 before SQLite sees it; SQLite gives the
    /// -wal and -shm files the database file's mode, so they follow. Done with
    /// an explicit mode rather than umask because umask is process-wide and
    /// this code runs inside other programs (the PKCS #11 module).
    static func prepareFile(_ path: String) throws {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw KeychainError.storage("cannot open \(path): \(String(cString: strerror(errno)))")
        }
        close(fd)
        tighten(path)
    }

    static func tighten(_ path: String) {
        var st = stat()
        if stat(path, &st) == 0, st.st_mode & 0o077 != 0, st.st_uid == getuid() {
            chmod(path, 0o600)
        }
    }
}
