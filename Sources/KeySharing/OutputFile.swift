import FoundationEssentials
import Glibc

/// How every file the CLI writes is put in place (issue 12, item 3), and the
/// access policy too: one rule, one helper.
///
/// - Only a regular file may ever be replaced, and only when the caller says so
///   (`--force`). A symbolic link, device, FIFO, socket or directory at the
///   path is refused with one line, `--force` or not: as root, `--out
///   /dev/null` must not replace the real /dev/null, and a link planted at the
///   path must be neither followed nor replaced.
/// - The bytes go to a temporary file beside the destination, created with
///   O_EXCL | O_NOFOLLOW at 0600 (never through a link, never an existing
///   file), synced, then renamed within the same directory. A reader sees the
///   old file or the whole new one; a failure leaves nothing at the path.
/// - Without `--force` the rename is RENAME_NOREPLACE (or link + unlink where
///   the file system lacks it), so a file that appears at the path while the
///   command works is not replaced either.
public enum OutputFile {
    /// What may already be at the destination.
    public enum Existing: Sendable, Equatable {
        /// Nothing: the default for every output a user names.
        case refuse
        /// A regular file, replaced atomically (`--force`; the policy file).
        case replaceRegularFile
    }

    public struct OutputError: Error, CustomStringConvertible, Equatable {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// Checks the destination before any work is done (so a command refuses
    /// before it asks for a PIN or builds a file); `write` and `produce` check
    /// again when they commit.
    public static func check(_ path: String, existing: Existing) throws {
        guard !path.isEmpty else { throw OutputError("no output path given") }
        var st = stat()
        guard lstat(path, &st) == 0 else {
            let code = errno
            if code == ENOENT || code == ENOTDIR {
                let dir = directory(of: path)
                var dst = stat()
                guard stat(dir, &dst) == 0, (dst.st_mode & S_IFMT) == S_IFDIR else {
                    throw OutputError("cannot write \(path): \(dir) is not a directory")
                }
                if path.hasSuffix("/") { throw OutputError("cannot write \(path): the path names a directory") }
                return
            }
            throw OutputError("cannot write \(path): \(String(cString: strerror(code)))")
        }
        let kind = st.st_mode & S_IFMT
        if kind == S_IFREG {
            if existing == .refuse { throw OutputError("\(path) already exists; add --force to replace it") }
            return
        }
        throw OutputError("refusing to write \(path): it is \(describe(kind)), not a regular file (never replaced, even with --force)")
    }

    /// Writes `bytes` to `path` (mode `mode`, 0600 by default) under the rule above.
    public static func write(_ bytes: [UInt8], to path: String, existing: Existing, mode: mode_t = 0o600) throws {
        try check(path, existing: existing)
        let tmp = try createTemporary(beside: path, mode: mode)
        do {
            try fill(tmp.fd, with: bytes, path: path)
        } catch {
            close(tmp.fd)
            unlink(tmp.path)
            throw error
        }
        close(tmp.fd)
        try commit(tmp.path, to: path, existing: existing)
    }

    /// For a writer that needs a path of its own (the KeyShare library's wrap
    /// and unwrap stream into their own temporary file and rename it): `body`
    /// gets a fresh private path in the destination's directory, and what it
    /// leaves there is committed under the same rule. A failure leaves nothing.
    public static func produce(at path: String, existing: Existing, _ body: (String) throws -> Void) throws {
        try check(path, existing: existing)
        let tmp = try createTemporary(beside: path, mode: 0o600)
        close(tmp.fd)
        do {
            try body(tmp.path)
            var st = stat()
            guard lstat(tmp.path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
                throw OutputError("cannot write \(path): the output was not produced")
            }
        } catch {
            unlink(tmp.path)
            throw error
        }
        try commit(tmp.path, to: path, existing: existing)
    }

    /// A new directory tree written as a whole (`share export-tree`): `body`
    /// fills a private temporary directory beside `path`, which is renamed to
    /// `path` only when it is complete. `path` must not exist, or be an empty
    /// directory (replaced by the rename); a failure removes the temporary tree.
    public static func produceDirectory(at path: String, _ body: (String) throws -> Void) throws {
        let target = try checkNewDirectory(path)
        let dir = directory(of: target)
        var template = Array((dir + "/.keyshare-tree-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw OutputError("cannot write \(target): \(String(cString: strerror(errno)))")
        }
        let tmp = String(cString: made)
        do {
            try body(tmp)
            syncTree(tmp)
            // rename(2) replaces an empty directory atomically and fails (ENOTEMPTY,
            // ENOTDIR, EISDIR) on anything else that appeared meanwhile.
            guard rename(tmp, target) == 0 else {
                let code = errno
                throw OutputError(code == ENOTEMPTY || code == EEXIST
                    ? "\(target) exists and is not empty; export-tree writes a new directory"
                    : "cannot write \(target): \(String(cString: strerror(code)))")
            }
        } catch {
            removeTree(tmp)
            // Name the user's path, not the temporary one.
            if let e = error as? OutputError { throw OutputError(e.description.replacing(tmp, with: target)) }
            throw error
        }
        syncDirectory(dir)
    }

    /// Checks that `path` can become a new directory: absent, or an empty
    /// directory (not a link to one). Returns the path without a trailing slash.
    @discardableResult
    public static func checkNewDirectory(_ path: String) throws -> String {
        guard !path.isEmpty else { throw OutputError("no output directory given") }
        let target = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        var st = stat()
        if lstat(target, &st) == 0 {
            let kind = st.st_mode & S_IFMT
            guard kind == S_IFDIR else {
                throw OutputError("refusing to write \(target): it is \(describe(kind)), not a directory")
            }
            guard isEmptyDirectory(target) else {
                throw OutputError("\(target) exists and is not empty; export-tree writes a new directory")
            }
            return target
        }
        guard errno == ENOENT else { throw OutputError("cannot write \(target): \(String(cString: strerror(errno)))") }
        var dst = stat()
        let dir = directory(of: target)
        guard stat(dir, &dst) == 0, (dst.st_mode & S_IFMT) == S_IFDIR else {
            throw OutputError("cannot write \(target): \(dir) is not a directory")
        }
        return target
    }

    /// A private directory inside a tree being produced (no existing entry allowed).
    public static func makeDirectory(_ path: String) throws {
        guard mkdir(path, 0o700) == 0 else {
            throw OutputError("cannot create \(path): \(String(cString: strerror(errno)))")
        }
    }

    // MARK: - The steps

    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let dir = String(path[..<slash])
        return dir.isEmpty ? "/" : dir
    }

    static func describe(_ kind: mode_t) -> String {
        switch kind {
        case S_IFLNK: "a symbolic link"
        case S_IFDIR: "a directory"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFIFO: "a FIFO"
        case S_IFSOCK: "a socket"
        case S_IFREG: "a regular file"
        default: "not a regular file"
        }
    }

    private static func createTemporary(beside path: String, mode: mode_t) throws -> (path: String, fd: Int32) {
        let dir = directory(of: path)
        for _ in 0..<16 {
            let tmp = dir + "/.keyshare-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).tmp"
            let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd >= 0 {
                guard fchmod(fd, mode) == 0 else {
                    let reason = String(cString: strerror(errno))
                    close(fd)
                    unlink(tmp)
                    throw OutputError("cannot write \(path): \(reason)")
                }
                return (tmp, fd)
            }
            if errno != EEXIST { break }
        }
        throw OutputError("cannot write \(path): \(String(cString: strerror(errno)))")
    }

    private static func fill(_ fd: Int32, with bytes: [UInt8], path: String) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw OutputError("cannot write \(path): \(String(cString: strerror(errno)))") }
            offset += n
        }
        guard fsync(fd) == 0 else { throw OutputError("cannot write \(path): \(String(cString: strerror(errno)))") }
    }

    /// Puts the finished temporary file at `path`; on failure removes it.
    private static func commit(_ tmp: String, to path: String, existing: Existing) throws {
        var failure: OutputError?
        switch existing {
        case .refuse:
            if renameNoReplace(tmp, path) != 0 {
                let code = errno
                if code == EEXIST {
                    // Something appeared at the path while the command worked: name it.
                    do {
                        try check(path, existing: .refuse)
                        failure = OutputError("\(path) already exists; add --force to replace it")
                    } catch {
                        failure = error as? OutputError ?? OutputError("\(path) already exists")
                    }
                } else {
                    failure = OutputError("cannot write \(path): \(String(cString: strerror(code)))")
                }
            }
        case .replaceRegularFile:
            // Checked again just before the rename, which replaces only the name:
            // it never writes through a link that appeared in between.
            do {
                try check(path, existing: .replaceRegularFile)
                if rename(tmp, path) != 0 {
                    failure = OutputError("cannot write \(path): \(String(cString: strerror(errno)))")
                }
            } catch let e as OutputError {
                failure = e
            }
        }
        if let failure {
            unlink(tmp)
            throw failure
        }
        syncDirectory(directory(of: path))
    }

    private typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
    /// glibc's renameat2 (2.28+), looked up at run time: the Swift Glibc module does not declare it.
    private static let renameat2: RenameAt2? = dlsym(nil, "renameat2").map { unsafeBitCast($0, to: RenameAt2.self) }

    /// rename without replacing: RENAME_NOREPLACE, else link + unlink (both
    /// fail with EEXIST when anything, even a dangling link, is at `to`).
    private static func renameNoReplace(_ from: String, _ to: String) -> Int32 {
        let renameNoReplaceFlag: UInt32 = 1  // RENAME_NOREPLACE (linux/fs.h)
        if let renameat2 {
            if renameat2(AT_FDCWD, from, AT_FDCWD, to, renameNoReplaceFlag) == 0 { return 0 }
            if errno != EINVAL && errno != ENOSYS { return -1 }
        }
        guard link(from, to) == 0 else { return -1 }
        unlink(from)
        return 0
    }

    private static func syncDirectory(_ dir: String) {
        let fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 {
            _ = fsync(fd)
            close(fd)
        }
    }

    private static func isEmptyDirectory(_ path: String) -> Bool {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: path) else { return false }
        return entries.isEmpty
    }

    private static func syncTree(_ root: String) {
        if let names = try? FileManager.default.subpathsOfDirectory(atPath: root) {
            for name in names {
                let fd = open(root + "/" + name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
                if fd >= 0 {
                    _ = fsync(fd)
                    close(fd)
                }
            }
        }
        syncDirectory(root)
    }

    private static func removeTree(_ root: String) {
        try? FileManager.default.removeItem(atPath: root)
    }
}
