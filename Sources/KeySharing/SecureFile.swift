import Foundation

/// Atomic, private file writes for what the key-sharing layer saves (shared
/// files, the access policy): a temp file in the same directory, created with
/// the final mode, synced, then renamed, so a reader sees the old file or the
/// whole new one and never a copy with looser permissions.
public enum SecureFile {
    public struct WriteError: Error, CustomStringConvertible {
        public let description: String
    }

    public static func write(_ bytes: [UInt8], to path: String, mode: mode_t = 0o600) throws {
        let dir = (path as NSString).deletingLastPathComponent
        let tmp = (dir.isEmpty ? "." : dir) + "/.keyshare-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).tmp"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
        guard fd >= 0 else { throw WriteError(description: "cannot write \(path): \(String(cString: strerror(errno)))") }
        var ok = fchmod(fd, mode) == 0
        var offset = 0
        while ok && offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n <= 0 { ok = false } else { offset += n }
        }
        ok = ok && fsync(fd) == 0
        close(fd)
        guard ok, rename(tmp, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(tmp)
            throw WriteError(description: "cannot write \(path): \(reason)")
        }
    }

    /// A private directory (0700), created if missing; an existing one must be ours.
    public static func makePrivateDirectory(_ path: String) throws {
        if mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw WriteError(description: "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else {
            throw WriteError(description: "\(path) is not a directory")
        }
        guard st.st_uid == getuid() else { throw WriteError(description: "\(path) belongs to another user") }
        if st.st_mode & 0o077 != 0 { chmod(path, 0o700) }
    }
}
