import CZlib
import FoundationEssentials
import Glibc

/// The zip archives of the share tree (spec §3): one stored (uncompressed)
/// entry per identity. PKCS #12 files are encrypted, so deflate would only
/// cost time. No password file goes inside: the password comes from the service.
///
/// Written and read here over zlib (crc32, raw inflate) rather than through a zip
/// library: the format keyshare needs is a few fixed records (APPNOTE 4.3), and a
/// Swift zip library pulls Foundation and ICU (some 50 MB) into the CLI (issue 28).
/// The records are those ZIPFoundation wrote before: UTF-8 names (flag bit 11),
/// made by Unix 2.1, mode 0600 in the external attributes, UTC DOS times.
public enum ShareZip {
    /// Bounds for reading a zip from someone else: a share zip holds a handful
    /// of small PKCS #12 files, so anything far larger is refused, not inflated.
    public static let maxEntries = 4096
    public static let maxEntrySize = 1 << 20

    public enum ZipError: Error, CustomStringConvertible {
        case notZip
        case tooLarge(String)
        case unreadable(String)

        public var description: String {
            switch self {
            case .notZip: "not a zip archive"
            case .tooLarge(let what): "the zip archive is too large to be a share (\(what))"
            case .unreadable(let why): "the zip archive cannot be read (\(why))"
            }
        }
    }

    static let localHeaderSignature: UInt32 = 0x0403_4B50
    static let centralHeaderSignature: UInt32 = 0x0201_4B50
    static let endSignature: UInt32 = 0x0605_4B50
    static let utf8NamesFlag: UInt16 = 1 << 11
    static let versionMadeBy: UInt16 = 0x0315  // Unix, 2.1 (as ZIPFoundation wrote)
    static let versionNeeded: UInt16 = 20
    static let endRecordSize = 22

    /// Builds a zip in memory; `date` is the entries' modification time.
    public static func build(_ entries: [(name: String, bytes: [UInt8])], date: Date) throws -> [UInt8] {
        guard entries.count < 0xFFFF else { throw ZipError.tooLarge("more than 65534 entries") }
        let (dosDate, dosTime) = dosDateTime(date)
        var out: [UInt8] = []
        var central: [UInt8] = []
        for entry in entries {
            let name = Array(entry.name.utf8)
            guard name.count <= 0xFFFF, entry.bytes.count < 0xFFFF_FFFF, out.count < 0xFFFF_FFFF - entry.bytes.count
            else { throw ZipError.tooLarge("\(entry.name) needs zip64") }
            let offset = UInt32(out.count)
            let crc = checksum(entry.bytes)
            let size = UInt32(entry.bytes.count)
            out.le32(localHeaderSignature)
            out.le16(versionNeeded); out.le16(utf8NamesFlag); out.le16(0)  // stored
            out.le16(dosTime); out.le16(dosDate)
            out.le32(crc); out.le32(size); out.le32(size)
            out.le16(UInt16(name.count)); out.le16(0)
            out += name
            out += entry.bytes

            central.le32(centralHeaderSignature)
            central.le16(versionMadeBy); central.le16(versionNeeded); central.le16(utf8NamesFlag); central.le16(0)
            central.le16(dosTime); central.le16(dosDate)
            central.le32(crc); central.le32(size); central.le32(size)
            central.le16(UInt16(name.count)); central.le16(0); central.le16(0)  // extra, comment
            central.le16(0); central.le16(0)  // disk, internal attributes
            central.le32(UInt32(S_IFREG | 0o600) << 16)
            central.le32(offset)
            central += name
        }
        guard out.count < 0xFFFF_FFFF - central.count else { throw ZipError.tooLarge("the archive needs zip64") }
        let centralOffset = UInt32(out.count)
        out += central
        out.le32(endSignature)
        out.le16(0); out.le16(0)
        out.le16(UInt16(entries.count)); out.le16(UInt16(entries.count))
        out.le32(UInt32(central.count)); out.le32(centralOffset)
        out.le16(0)  // comment
        return out
    }

    /// A quick look at the magic: local file header or an empty archive's end record.
    public static func looksLikeZip(_ bytes: [UInt8]) -> Bool {
        bytes.count >= 4 && bytes[0] == 0x50 && bytes[1] == 0x4B
            && ((bytes[2] == 3 && bytes[3] == 4) || (bytes[2] == 5 && bytes[3] == 6))
    }

    /// The regular-file entries of a zip, in archive order (directories and links skipped).
    /// Stored and deflated entries are read (what zip(1) and keyshare write); every size,
    /// offset and CRC is checked against the bytes, and nothing inflates past `maxEntrySize`.
    public static func entries(of bytes: [UInt8]) throws -> [(name: String, bytes: [UInt8])] {
        guard let end = endRecordOffset(bytes) else { throw ZipError.notZip }
        let count = Int(bytes.u16(end + 10))
        let centralSize = Int(bytes.u32(end + 12))
        let centralOffset = Int(bytes.u32(end + 16))
        guard count != 0xFFFF, centralSize != 0xFFFF_FFFF, centralOffset != 0xFFFF_FFFF else {
            throw ZipError.unreadable("zip64 archives are not shares")
        }
        guard centralOffset <= end, centralSize <= end - centralOffset else { throw ZipError.notZip }
        var out: [(name: String, bytes: [UInt8])] = []
        var at = centralOffset
        for _ in 0..<count {
            guard at + 46 <= centralOffset + centralSize, bytes.u32(at) == centralHeaderSignature else {
                throw ZipError.unreadable("broken central directory")
            }
            let madeBy = bytes.u16(at + 4)
            let flags = bytes.u16(at + 8)
            let method = bytes.u16(at + 10)
            let crc = bytes.u32(at + 16)
            let compressedSize = Int(bytes.u32(at + 20))
            let size = Int(bytes.u32(at + 24))
            let nameLength = Int(bytes.u16(at + 28))
            let skip = nameLength + Int(bytes.u16(at + 30)) + Int(bytes.u16(at + 32))
            let external = bytes.u32(at + 38)
            let localOffset = Int(bytes.u32(at + 42))
            guard at + 46 + skip <= centralOffset + centralSize else { throw ZipError.unreadable("broken central directory") }
            let name = String(decoding: bytes[(at + 46)..<(at + 46 + nameLength)], as: UTF8.self)
            at += 46 + skip

            let unixMode = madeBy >> 8 == 3 ? (external >> 16) & UInt32(S_IFMT) : 0
            if name.hasSuffix("/") || (unixMode != 0 && unixMode != UInt32(S_IFREG)) { continue }
            guard out.count < maxEntries else { throw ZipError.tooLarge("more than \(maxEntries) entries") }
            guard size <= maxEntrySize else { throw ZipError.tooLarge("\(name) is over \(maxEntrySize) bytes") }
            guard flags & 1 == 0 else { throw ZipError.unreadable("\(name): encrypted entries are not supported") }
            guard localOffset + 30 <= centralOffset, bytes.u32(localOffset) == localHeaderSignature else {
                throw ZipError.unreadable("\(name): no local header")
            }
            let dataStart = localOffset + 30 + Int(bytes.u16(localOffset + 26)) + Int(bytes.u16(localOffset + 28))
            guard dataStart <= centralOffset, compressedSize <= centralOffset - dataStart else {
                throw ZipError.unreadable("\(name): data past the end")
            }
            let stored = bytes[dataStart..<(dataStart + compressedSize)]
            let data: [UInt8]
            switch method {
            case 0:
                guard compressedSize == size else { throw ZipError.unreadable("\(name): sizes differ") }
                data = Array(stored)
            case 8:
                data = try inflate(Array(stored), name: name)
            default:
                throw ZipError.unreadable("\(name): compression method \(method) is not supported")
            }
            guard data.count == size else { throw ZipError.unreadable("\(name): size mismatch") }
            guard checksum(data) == crc else { throw ZipError.unreadable("\(name): CRC mismatch") }
            out.append((name, data))
        }
        return out
    }

    /// The end-of-central-directory record, searched from the end over the longest comment.
    static func endRecordOffset(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= endRecordSize else { return nil }
        var at = bytes.count - endRecordSize
        let lowest = max(0, at - 0xFFFF)
        while at >= lowest {
            if bytes.u32(at) == endSignature, at + endRecordSize + Int(bytes.u16(at + 20)) == bytes.count {
                return at
            }
            at -= 1
        }
        return nil
    }

    /// Raw deflate (no zlib header), bounded by `maxEntrySize`.
    static func inflate(_ input: [UInt8], name: String) throws -> [UInt8] {
        var stream = z_stream()
        guard keyshare_inflate_init_raw(&stream) == Z_OK else { throw ZipError.unreadable("\(name): zlib") }
        defer { inflateEnd(&stream) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var input = input
        let status: Int32 = input.withUnsafeMutableBufferPointer { inBuf in
            stream.next_in = inBuf.baseAddress
            stream.avail_in = uInt(inBuf.count)
            while true {
                let rc = chunk.withUnsafeMutableBufferPointer { outBuf -> Int32 in
                    stream.next_out = outBuf.baseAddress
                    stream.avail_out = uInt(outBuf.count)
                    return CZlib.inflate(&stream, Z_NO_FLUSH)
                }
                let produced = chunk.count - Int(stream.avail_out)
                out += chunk[0..<produced]
                if out.count > maxEntrySize { return Z_MEM_ERROR }
                if rc == Z_STREAM_END { return Z_OK }
                if rc != Z_OK || (produced == 0 && stream.avail_in == 0) { return rc == Z_OK ? Z_DATA_ERROR : rc }
            }
        }
        if status == Z_MEM_ERROR && out.count > maxEntrySize {
            throw ZipError.tooLarge("\(name) inflates past its size")
        }
        guard status == Z_OK else { throw ZipError.unreadable("\(name): bad deflate data") }
        return out
    }

    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBufferPointer { UInt32(crc32(0, $0.baseAddress, uInt($0.count))) }
    }

    /// MS-DOS date and time in UTC (years clamped to 1980-2099).
    static func dosDateTime(_ date: Date) -> (date: UInt16, time: UInt16) {
        var seconds = time_t(date.timeIntervalSince1970)
        var t = tm()
        guard gmtime_r(&seconds, &t) != nil else { return (0, 0) }
        let year = min(max(Int(t.tm_year) + 1900, 1980), 2099)
        let dosDate = Int(t.tm_mday) + (Int(t.tm_mon) + 1) * 32 + (year - 1980) * 512
        let dosTime = Int(t.tm_sec) / 2 + Int(t.tm_min) * 32 + Int(t.tm_hour) * 2048
        return (UInt16(dosDate), UInt16(dosTime))
    }
}

extension [UInt8] {
    fileprivate mutating func le16(_ v: UInt16) { append(UInt8(v & 0xFF)); append(UInt8(v >> 8)) }
    fileprivate mutating func le32(_ v: UInt32) { le16(UInt16(v & 0xFFFF)); le16(UInt16(v >> 16)) }
    /// Little-endian reads; 0 past the end, so a truncated record fails its signature check.
    fileprivate func u16(_ at: Int) -> UInt16 {
        guard at >= 0, at + 2 <= count else { return 0 }
        return UInt16(self[at]) | UInt16(self[at + 1]) << 8
    }
    fileprivate func u32(_ at: Int) -> UInt32 {
        UInt32(u16(at)) | UInt32(u16(at + 2)) << 16
    }
}
