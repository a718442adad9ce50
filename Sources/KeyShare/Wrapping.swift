#if canImport(Glibc)
import Glibc
#endif
import Keychain
import KeyshareCrypto

/// Secure file wrapping for a shared group (the AppConnect model): a file is
/// sealed under its group's key, kept in the keychain as a secret key item
/// of that access group, so only members of the group can unwrap it.
///
/// Format, version 1 (all integers big-endian):
/// ```
/// "KSWRAP" 0x00 0x01                       magic + format version
/// u16 length of the header fields below
///   u16 + UTF-8 group ID, u16 + UTF-8 original file name,
///   u32 segment size, 16-byte salt, 7-byte nonce prefix
/// segments: AES-256-GCM(ciphertext || 16-byte tag), each `segment size`
///   bytes of plaintext except the last (possibly empty), which is marked final
/// ```
/// The file key is HMAC-SHA256(group key, "keyshare-wrap-v1" || salt), so no
/// two files share a key even though the group key is long-lived. Segment i's
/// nonce is prefix || u32 i || final flag, and its AAD is SHA-256(header) ||
/// u64 i || final flag: reordering, dropping, truncating at a segment
/// boundary, appending or editing the header all fail authentication. Memory
/// use is two segments, whatever the file size (the STREAM construction).
public enum FileWrapping {
    public static let version: UInt8 = 1
    public static let magic: [UInt8] = Array("KSWRAP".utf8) + [0x00, version]
    public static let defaultSegmentSize = 64 * 1024
    static let tagSize = 16

    public struct Header: Sendable, Equatable {
        public var group: String
        public var fileName: String
        public var segmentSize: Int
        var salt: [UInt8]
        var noncePrefix: [UInt8]

        func encoded() -> [UInt8] {
            var f: [UInt8] = []
            func u16(_ v: Int) { f += [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
            let g = Array(group.utf8), n = Array(fileName.utf8)
            u16(g.count); f += g
            u16(n.count); f += n
            f += [UInt8(segmentSize >> 24 & 0xFF), UInt8(segmentSize >> 16 & 0xFF), UInt8(segmentSize >> 8 & 0xFF), UInt8(segmentSize & 0xFF)]
            f += salt + noncePrefix
            return FileWrapping.magic + [UInt8(f.count >> 8), UInt8(f.count & 0xFF)] + f
        }
    }

    /// Reads the header; `notWrapped` when the magic is absent (the file is a
    /// plain file to use as is), `wrappedFileDamaged` when it is malformed.
    static func readHeader(_ r: FileReader) throws -> (Header, bytes: [UInt8]) {
        let start = try r.readFull(magic.count + 2)
        guard start.count >= 6, Array(start.prefix(6)) == Array(magic.prefix(6)) else { throw KeyShareError.notWrapped }
        guard start.count == magic.count + 2 else { throw KeyShareError.wrappedFileDamaged("truncated header") }
        guard start[6] == 0, start[7] == version else {
            throw KeyShareError.unsupported("wrapped-file format version \(start[7]) (this keyshare reads version \(version))")
        }
        let len = Int(start[8]) << 8 | Int(start[9])
        let f = try r.readFull(len)
        guard f.count == len else { throw KeyShareError.wrappedFileDamaged("truncated header") }
        var i = 0
        func take(_ n: Int) throws -> [UInt8] {
            guard i + n <= f.count else { throw KeyShareError.wrappedFileDamaged("malformed header") }
            defer { i += n }
            return Array(f[i..<(i + n)])
        }
        func u16() throws -> Int { let b = try take(2); return Int(b[0]) << 8 | Int(b[1]) }
        let group = String(decoding: try take(try u16()), as: UTF8.self)
        let name = String(decoding: try take(try u16()), as: UTF8.self)
        let s = try take(4)
        let seg = Int(s[0]) << 24 | Int(s[1]) << 16 | Int(s[2]) << 8 | Int(s[3])
        let h = Header(group: group, fileName: name, segmentSize: seg, salt: try take(16), noncePrefix: try take(7))
        guard i == f.count, (1...(16 << 20)).contains(seg) else { throw KeyShareError.wrappedFileDamaged("malformed header") }
        return (h, start + f)
    }

    static func fileKey(_ groupKey: [UInt8], _ h: Header) throws -> [UInt8] {
        try HMAC.mac(.sha256, key: groupKey, data: Array("keyshare-wrap-v1".utf8) + h.salt)
    }

    static func nonceAndAAD(_ h: Header, _ headerDigest: [UInt8], index: UInt32, final: Bool) -> ([UInt8], [UInt8]) {
        let f: UInt8 = final ? 1 : 0
        let i = [UInt8(index >> 24 & 0xFF), UInt8(index >> 16 & 0xFF), UInt8(index >> 8 & 0xFF), UInt8(index & 0xFF)]
        return (h.noncePrefix + i + [f], headerDigest + [0, 0, 0, 0] + i + [f])
    }

    /// Seals `input` into `output` segment by segment.
    static func seal(_ input: FileReader, _ output: FileWriter, header h: Header, groupKey: [UInt8]) throws {
        var key = try fileKey(groupKey, h)
        defer { for i in key.indices { key[i] = 0 } }
        let headerBytes = h.encoded()
        let digest = DigestAlgorithm.sha256.hash(headerBytes)
        try output.write(headerBytes)
        var index: UInt32 = 0
        var current = try input.readFull(h.segmentSize)
        while true {
            let next = current.count == h.segmentSize ? try input.readFull(h.segmentSize) : []
            let final = next.isEmpty
            let (nonce, aad) = nonceAndAAD(h, digest, index: index, final: final)
            let (ct, tag) = try AESGCM.encrypt(key: key, iv: nonce, plaintext: current, aad: aad)
            try output.write(ct + tag)
            if final { return }
            guard index < UInt32.max else { throw KeyShareError.invalidParameter("file too large to wrap") }
            index += 1
            current = next
        }
    }

    /// Opens segments after the header was read; nothing is trusted until its tag checks.
    static func open(_ input: FileReader, _ output: FileWriter, header h: Header, headerBytes: [UInt8], groupKey: [UInt8]) throws {
        var key = try fileKey(groupKey, h)
        defer { for i in key.indices { key[i] = 0 } }
        let digest = DigestAlgorithm.sha256.hash(headerBytes)
        let n = h.segmentSize + tagSize
        var index: UInt32 = 0
        var current = try input.readFull(n)
        while true {
            guard current.count >= tagSize else { throw KeyShareError.wrappedFileDamaged("truncated") }
            let next = current.count == n ? try input.readFull(n) : []
            let final = next.isEmpty
            let (nonce, aad) = nonceAndAAD(h, digest, index: index, final: final)
            let plain: [UInt8]
            do {
                plain = try AESGCM.decrypt(key: key, iv: nonce, ciphertext: Array(current.dropLast(tagSize)),
                                           tag: Array(current.suffix(tagSize)), aad: aad)
            } catch {
                throw KeyShareError.wrappedFileDamaged(final ? "segment \(index) does not authenticate (truncated or altered)"
                                                             : "segment \(index) does not authenticate (altered)")
            }
            try output.write(plain)
            if final { return }
            guard index < UInt32.max else { throw KeyShareError.wrappedFileDamaged("too many segments") }
            index += 1
            current = next
        }
    }
}

/// Buffered-free POSIX reading: the caller's segment buffer is the only one.
final class FileReader {
    let fd: Int32
    init(path: String) throws {
        fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw KeyShareError.invalidParameter("cannot read \(path): \(String(cString: strerror(errno)))") }
    }
    deinit { close(fd) }

    /// Up to `n` bytes; fewer only at end of file.
    func readFull(_ n: Int) throws -> [UInt8] {
        var buf = [UInt8](repeating: 0, count: n)
        var got = 0
        while got < n {
            let r = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, n - got) }
            if r < 0 { if errno == EINTR { continue }; throw KeyShareError.invalidParameter("read error: \(String(cString: strerror(errno)))") }
            if r == 0 { break }
            got += r
        }
        if got < n { buf.removeLast(n - got) }
        return buf
    }
}

/// Writes to a temporary file beside the destination and renames it into
/// place only on success, so a failed unwrap never leaves partial plaintext.
final class FileWriter {
    let path: String, tmp: String
    private(set) var fd: Int32
    init(path: String) throws {
        self.path = path
        let slash = path.lastIndex(of: "/")
        let dir = slash.map { String(path[..<$0]) } ?? "."
        tmp = (dir.isEmpty ? "/" : dir) + "/.keyshare-wrap-\(getpid())-\(try SecureRandom.uniform(below: .max)).tmp"
        fd = Glibc.open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw KeyShareError.invalidParameter("cannot write \(path): \(String(cString: strerror(errno)))") }
    }
    deinit { if fd >= 0 { close(fd); unlink(tmp) } }

    func write(_ bytes: [UInt8]) throws {
        var off = 0
        while off < bytes.count {
            let w = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + off, bytes.count - off) }
            if w < 0 { if errno == EINTR { continue }; throw KeyShareError.invalidParameter("write error: \(String(cString: strerror(errno)))") }
            off += w
        }
    }

    func commit() throws {
        guard fsync(fd) == 0, close(fd) == 0 else { throw KeyShareError.invalidParameter("cannot write \(path)") }
        fd = -1
        guard rename(tmp, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(tmp)
            throw KeyShareError.invalidParameter("cannot write \(path): \(reason)")
        }
    }
}
