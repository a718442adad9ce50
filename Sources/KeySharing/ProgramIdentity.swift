#if canImport(Glibc)
import Glibc
#endif
import CLinux
import KeyshareCrypto

/// A file by what it is: its device and inode, whatever path names it.
public struct FileIdentity: Sendable, Hashable, CustomStringConvertible {
    public let device: UInt64
    public let inode: UInt64

    public init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }

    init(_ st: stat) {
        self.init(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    /// The file at `path` in this process's mount namespace (symbolic links followed), or nil.
    public init?(path: String) {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        self.init(st)
    }

    /// "dev MAJOR:MINOR ino N" (glibc's dev_t encoding).
    public var description: String {
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~0xfff)
        let minor = (device & 0xff) | ((device >> 12) & ~0xff)
        return "dev \(major):\(minor) ino \(inode)"
    }
}

/// The program a process runs, by what it is (issue 26, defect 7): the
/// executable file (device and inode through /proc/PID/exe, which leads to the
/// file itself whatever mount namespace the process is in) and the SHA-256 of
/// its content. Not the path /proc/PID/exe shows: that is the path in the
/// process's own mount namespace, where it can bind-mount anything over
/// /usr/bin/pkcs11-tool without privilege (`unshare -Urm`). The path is kept
/// only to be shown, "as the client names it".
public struct ProgramIdentity: Sendable, Equatable, CustomStringConvertible {
    public let path: String
    public let file: FileIdentity
    /// nil: not readable (an execute-only file), larger than
    /// ProgramDigests.maxBytes, or on FUSE (see ProgramDigests).
    public let digest: [UInt8]?

    public init(path: String, file: FileIdentity, digest: [UInt8]?) {
        self.path = path
        self.file = file
        self.digest = digest
    }

    /// What the agent's log names a client by: the path as the client names
    /// it, then the file and the start of its digest.
    public var description: String {
        "\(path) (as the client names it; \(file), sha256 \(digest.map { ProgramDigests.hex($0).prefix(16) + "…" } ?? "none"))"
    }
}

/// SHA-256 of executables, cached by file identity, size and change times,
/// so a busy agent hashes a program once (and again only once it changes:
/// any write moves the ctime, which no one can set back).
///
/// A file on FUSE gets no digest: its server answers each read as it likes,
/// so the bytes the agent reads need not be the bytes the process ran. Other
/// file systems read through the same page cache the exec mapped (and a file
/// being run cannot be written: ETXTBSY).
public enum ProgramDigests {
    /// Larger files get no digest (they are matched by file identity only).
    public static let maxBytes = 256 << 20
    static let capacity = 256
    static let fuseMagic = 0x6573_5546  // FUSE_SUPER_MAGIC (linux/magic.h)

    private struct Key: Hashable {
        let file: FileIdentity
        let size: Int64
        let mtime: [Int]
        let ctime: [Int]

        init(_ st: stat) {
            file = FileIdentity(st)
            size = Int64(st.st_size)
            mtime = [st.st_mtim.tv_sec, st.st_mtim.tv_nsec]
            ctime = [st.st_ctim.tv_sec, st.st_ctim.tv_nsec]
        }
    }

    private final class Cache: @unchecked Sendable {
        let lock = Lock()
        var digests: [Key: [UInt8]] = [:]
    }
    private static let cache = Cache()

    /// The digest of the open file `fd` (read with pread from its start; the
    /// file offset is left alone), nil when it is not a regular file, too
    /// large, on FUSE, unreadable, or changed while being read.
    public static func digest(fd: Int32) -> [UInt8]? {
        var before = stat()
        guard fstat(fd, &before) == 0, (before.st_mode & S_IFMT) == S_IFREG,
              before.st_size >= 0, before.st_size <= maxBytes else { return nil }
        let fsType = keyshare_fs_type(fd)
        guard fsType >= 0, fsType != fuseMagic else { return nil }
        let key = Key(before)
        if let known = cache.lock.withLock({ cache.digests[key] }) { return known }
        guard let ctx = try? DigestContext(.sha256) else { return nil }
        var buf = [UInt8](repeating: 0, count: 1 << 20)
        var offset: Int64 = 0
        while true {
            let n = buf.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(offset)) }
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { break }
            offset += Int64(n)
            guard offset <= Int64(maxBytes), (try? ctx.update(Array(buf[0..<n]))) != nil else { return nil }
        }
        var after = stat()
        guard offset == Int64(before.st_size), fstat(fd, &after) == 0, Key(after) == key,
              let digest = try? ctx.finish() else { return nil }
        cache.lock.withLock {
            if cache.digests.count >= capacity, let any = cache.digests.keys.first { cache.digests[any] = nil }
            cache.digests[key] = digest
        }
        return digest
    }

    /// The file at `path` in this process's mount namespace: its identity and
    /// digest (nil: as for digest(fd:)); nil when it cannot be opened.
    public static func file(at path: String) -> (file: FileIdentity, digest: [UInt8]?)? {
        // O_NONBLOCK: a FIFO put where a program was must not hang the open.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else {
            return FileIdentity(path: path).map { ($0, nil) }
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        return (FileIdentity(st), digest(fd: fd))
    }

    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for b in bytes { out += [digits[Int(b >> 4)], digits[Int(b & 15)]] }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of a 64-digit lower- or upper-case hex SHA-256, or nil.
    public static func unhex(_ s: String) -> [UInt8]? {
        let chars = Array(s.utf8)
        guard chars.count == 64 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        for i in stride(from: 0, to: 64, by: 2) {
            guard let hi = nibble(chars[i]), let lo = nibble(chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
        }
        return out
    }
}
