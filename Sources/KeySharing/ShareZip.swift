import Foundation
import ZIPFoundation

/// The zip archives of the share tree (spec §3): one stored (uncompressed)
/// entry per identity. PKCS #12 files are encrypted, so deflate would only
/// cost time. No password file goes inside: the password comes from the service.
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

    /// Builds a zip in memory; `date` is the entries' modification time.
    public static func build(_ entries: [(name: String, bytes: [UInt8])], date: Date) throws -> [UInt8] {
        let archive = try Archive(data: Data(), accessMode: .create)
        for entry in entries {
            let data = Data(entry.bytes)
            try archive.addEntry(
                with: entry.name, type: .file, uncompressedSize: Int64(data.count), modificationDate: date,
                permissions: 0o600, compressionMethod: .none
            ) { position, size in
                data.subdata(in: Int(position)..<Int(position) + size)
            }
        }
        return [UInt8](archive.data ?? Data())
    }

    /// A quick look at the magic: local file header or an empty archive's end record.
    public static func looksLikeZip(_ bytes: [UInt8]) -> Bool {
        bytes.count >= 4 && bytes[0] == 0x50 && bytes[1] == 0x4B
            && ((bytes[2] == 3 && bytes[3] == 4) || (bytes[2] == 5 && bytes[3] == 6))
    }

    /// The regular-file entries of a zip, in archive order (directories skipped).
    public static func entries(of bytes: [UInt8]) throws -> [(name: String, bytes: [UInt8])] {
        let archive: Archive
        do {
            archive = try Archive(data: Data(bytes), accessMode: .read)
        } catch {
            throw ZipError.notZip
        }
        var out: [(name: String, bytes: [UInt8])] = []
        for entry in archive where entry.type == .file {
            guard out.count < maxEntries else { throw ZipError.tooLarge("more than \(maxEntries) entries") }
            guard entry.uncompressedSize <= Int64(maxEntrySize) else {
                throw ZipError.tooLarge("\(entry.path) is over \(maxEntrySize) bytes")
            }
            var data = Data()
            do {
                _ = try archive.extract(entry) { chunk in
                    data.append(chunk)
                    if data.count > maxEntrySize { throw ZipError.tooLarge("\(entry.path) inflates past its size") }
                }
            } catch let e as ZipError {
                throw e
            } catch {
                throw ZipError.unreadable("\(entry.path): \(error)")
            }
            out.append((entry.path, [UInt8](data)))
        }
        return out
    }
}
