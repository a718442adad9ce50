import FoundationEssentials
import Glibc

/// Private files and directories of the key-sharing layer's own (the access
/// policy, the socket directory). Writes go through `OutputFile`, the one
/// rule for every file keyshare puts on disk.
public enum SecureFile {
    public struct WriteError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Replaces the file at `path` atomically (temp file, fsync, rename); only a
    /// regular file may be there: a link, device or directory is refused.
    public static func write(_ bytes: [UInt8], to path: String, mode: mode_t = 0o600) throws {
        try OutputFile.write(bytes, to: path, existing: .replaceRegularFile, mode: mode)
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
