#if canImport(Glibc)
import Glibc
#endif
import CSQLite
import KeyshareCrypto

/// Where the store lives and how its files are protected: the keychain is
/// readable by its owner only, enforced at every open (a copied or restored
/// file with loose read modes is tightened, not trusted), and a directory or
/// file someone else could have planted is refused (SecureDirectory).
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

    /// The store's files besides keychain.db that SQLite reads if present: a
    /// planted WAL or rollback journal would be replayed into the store.
    static let companionSuffixes = ["-wal", "-shm", "-journal"]

    /// mkdir -p (new directories 0700), then the ownership and mode checks of
    /// SecureDirectory; a leaf readable by others is tightened to 0700.
    /// Returns the directory with symlinks resolved: the store is opened
    /// through that path, so a link swapped after the check changes nothing.
    static func prepareDirectory(_ path: String) throws -> String {
        var prefix = path.hasPrefix("/") ? "" : "."
        for comp in path.split(separator: "/") {
            prefix += "/" + comp
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw KeychainError.storage("cannot create \(prefix): \(String(cString: strerror(errno)))")
            }
        }
        try SecureDirectory.check(path: path)
        guard let real = realpath(path, nil) else {
            throw KeychainError.storage("cannot resolve \(path): \(String(cString: strerror(errno)))")
        }
        let resolved = String(cString: real)
        free(real)
        var st = stat()
        if stat(resolved, &st) == 0, st.st_mode & 0o077 != 0, st.st_uid == geteuid() {
            chmod(resolved, 0o700)
        }
        return resolved
    }

    /// keychain.db and its companions must be regular files of the caller
    /// (or root) that nobody else may write (SecureDirectory.checkFile).
    static func checkFiles(_ path: String) throws {
        for suffix in [""] + companionSuffixes {
            try SecureDirectory.checkFile(path: path + suffix)
        }
    }

    /// Makes sure `path` holds a store. Only a missing file means a new
    /// store; it is built complete under a temporary name and linked into
    /// place, so keychain.db is never an empty or half-made file. An
    /// existing empty file is an error: a truncated store must not silently
    /// become an empty one ("no tokens").
    static func ensureStore(_ path: String) throws {
        var st = stat()
        if stat(path, &st) == 0 {
            if st.st_size == 0 {
                // An older keyshare (or plain SQLite) creates the file first and
                // writes its header a moment later: look once more.
                usleep(50_000)
                if stat(path, &st) == 0 && st.st_size == 0 {
                    throw KeychainError.storage(
                        "\(path) is empty (0 bytes): the store was truncated or emptied; restore it from a backup, "
                            + "or move it away to start a new store")
                }
            }
            return
        }
        guard errno == ENOENT else {
            throw KeychainError.storage("cannot examine \(path): \(String(cString: strerror(errno)))")
        }
        // A WAL without its database is someone's lost store, not a new one:
        // SQLite would replay it into the new file. (Unless another process
        // has just created the store and written to it: look again.)
        if let wal = StoreOpening.fileSize(path + "-wal"), wal > 0 {
            if stat(path, &st) == 0 { return try ensureStore(path) }
            throw KeychainError.storage(
                "\(path) is missing but its write-ahead log \(path)-wal (\(wal) bytes) is there: restore \(path), "
                    + "or move the -wal and -shm files away to start a new store")
        }
        try createStore(path)
    }

    /// Builds a new, fully migrated store beside `path` and links it into
    /// place (link(2) fails if another process got there first: its store is
    /// then used and this one discarded). fsyncs the file and the directory.
    private static func createStore(_ path: String) throws {
        let dir = SecureDirectory.parent(of: path)
        let temp = dir + "/.keychain.db.new-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw creationError(path, errno)
        }
        close(fd)
        defer {
            unlink(temp)
            for suffix in companionSuffixes { unlink(temp + suffix) }
        }
        do {
            let db = try SQLiteConnection(name: temp, file: temp, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX)
            try db.exec("PRAGMA synchronous=FULL")
            try Schema.migrate(db)
            // Switching to WAL writes the header; the file is complete and
            // has no WAL of its own (nothing is written after the switch).
            _ = try db.query("PRAGMA journal_mode=WAL") { $0.text(0) }
        } catch let e as KeychainError {
            throw e.isWriteImpossible ? e.naming(path) : KeychainError.storage("cannot create the store \(path): \(e)")
        }
        let file = open(temp, O_RDONLY | O_CLOEXEC)
        if file >= 0 {
            fsync(file)
            close(file)
        }
        if link(temp, path) != 0 && errno != EEXIST {
            // A file system without hard links: rename, unless a racing
            // process has created the store meanwhile.
            let code = errno
            guard code == EPERM || code == EOPNOTSUPP, access(path, F_OK) != 0 else { throw creationError(path, code) }
            guard rename(temp, path) == 0 else { throw creationError(path, errno) }
        }
        let d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if d >= 0 {
            fsync(d)
            close(d)
        }
    }

    private static func creationError(_ path: String, _ code: Int32) -> KeychainError {
        let reason = String(cString: strerror(code))
        switch code {
        case ENOSPC, EDQUOT: return .storeFull("cannot create the store \(path): \(reason)")
        case EROFS: return .readOnlyStore("cannot create the store \(path): \(reason)")
        default: return .storage("cannot create the store \(path): \(reason)")
        }
    }

    static func tighten(_ path: String) {
        var st = stat()
        if stat(path, &st) == 0, st.st_mode & 0o077 != 0, st.st_uid == geteuid() {
            chmod(path, 0o600)
        }
    }
}
