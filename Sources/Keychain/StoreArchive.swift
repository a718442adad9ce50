import KeyshareCrypto

/// The file format of `keyshare backup` (docs/backup.md): named entries (the
/// store's database, the share policy) sealed as ONE AES-256-GCM message
/// under a key derived from the archive's own passphrase by scrypt with a
/// per-archive salt. The header is the AEAD's associated data, so any changed
/// byte, in the header or anywhere after it, fails the one tag check, and
/// nothing of a damaged or tampered archive is ever used: it is refused whole
/// before anything is written.
///
/// Layout (version 1, integers big-endian):
///
///     0   8  magic "KSBACKUP"
///     8   1  format version (1)
///     9   1  KDF (1: scrypt)
///     10  1  scrypt log2(N)     11  1  r     12  1  p
///     13 16  salt
///     29  1  AEAD (1: AES-256-GCM)
///     30 12  nonce
///     42 16  passphrase check: HKDF-SHA256(K, "keyshare backup v1 check"), 16 bytes
///     58  8  ciphertext length
///     66  …  ciphertext, then the 16-byte tag
///
/// K = scrypt(passphrase, salt, N, r, p), 32 bytes; the AEAD key is
/// HKDF-SHA256(K, "keyshare backup v1 key"). The check tells a wrong
/// passphrase from a changed archive; it lets a guesser test a passphrase no
/// faster than the tag would. The plaintext is a list of entries: a 2-byte
/// name length, the name (UTF-8), an 8-byte length, the bytes.
public enum StoreArchive {
    public static let magic: [UInt8] = Array("KSBACKUP".utf8)
    public static let version: UInt8 = 1
    static let kdfScrypt: UInt8 = 1
    static let aeadAESGCM: UInt8 = 1
    static let saltSize = 16
    static let checkSize = 16
    static let headerSize = 66
    /// The shortest passphrase `keyshare backup` accepts: the archive leaves
    /// the machine, so offline guessing is its threat (docs/backup.md).
    public static let minimumPassphraseLength = 10
    /// scrypt cost of a new archive: 2^17 (128 MiB, about 0.3 s), at least
    /// the store's configured cost. Opening accepts 2^10 to 2^20, so a
    /// changed header cannot ask for more memory than that.
    public static let defaultLog2N = 17
    static let log2NRange = 10...20
    /// The largest archive read: far above any store (a store with 10,000
    /// items is a few MiB), small enough to hold in memory while it is checked.
    public static let maximumSize = 1 << 30

    /// One named file of the archive.
    public struct Entry: Sendable, Equatable {
        public var name: String
        public var bytes: [UInt8]
        public init(name: String, bytes: [UInt8]) {
            self.name = name
            self.bytes = bytes
        }
    }

    /// Why an archive was refused; one line each, never a secret.
    public enum Failure: Error, Equatable, CustomStringConvertible, Sendable {
        case notAnArchive
        case unsupported(String)
        case truncated
        case wrongPassphrase
        case tampered
        case malformed(String)

        public var description: String {
            switch self {
            case .notAnArchive: "not a keyshare backup (no KSBACKUP header)"
            case .unsupported(let what): "this keyshare cannot read this backup: \(what)"
            case .truncated: "the backup is truncated or has bytes appended (damaged in transfer?): nothing was restored"
            case .wrongPassphrase: "wrong passphrase for this backup (or its header was changed): nothing was restored"
            case .tampered:
                "the backup was changed after it was written (damaged or tampered with; its integrity check fails): nothing was restored"
            case .malformed(let what): "the backup's contents are malformed (\(what)): nothing was restored"
            }
        }
    }

    /// The archive of `entries` under `passphrase`.
    public static func seal(_ entries: [Entry], passphrase: [UInt8], log2N: Int? = nil) throws -> [UInt8] {
        var plaintext: [UInt8] = []
        defer { wipe(&plaintext) }
        for e in entries {
            let name = Array(e.name.utf8)
            guard !name.isEmpty, name.count <= 255 else { throw KeychainError.invalidArgument("archive entry name \(e.name)") }
            plaintext += be(UInt64(name.count), 2) + name + be(UInt64(e.bytes.count), 8) + e.bytes
        }
        let cost = max(log2N ?? max(defaultLog2N, PINKDFParameters.configuredLog2N()), log2NRange.lowerBound)
        let kdf = PINKDFParameters(log2N: min(cost, log2NRange.upperBound), salt: try SecureRandom.bytes(saltSize))
        var keys = try derive(passphrase, kdf)
        defer { wipe(&keys.aead) }
        let nonce = try SecureRandom.bytes(AESGCM.nonceSize)
        var header = magic + [version, kdfScrypt, UInt8(kdf.log2N), UInt8(kdf.r), UInt8(kdf.p)] + kdf.salt
        header += [aeadAESGCM] + nonce + keys.check + be(UInt64(plaintext.count), 8)
        let (ciphertext, tag) = try AESGCM.encrypt(key: keys.aead, iv: nonce, plaintext: plaintext, aad: header)
        return header + ciphertext + tag
    }

    /// Checks the header's form without the passphrase (so a wrong file is
    /// refused before anyone is asked for one).
    public static func checkHeader(_ archive: [UInt8]) throws {
        _ = try parseHeader(archive)
    }

    /// The entries of an archive; throws `Failure` for anything but an intact
    /// archive opened with its passphrase.
    public static func open(_ archive: [UInt8], passphrase: [UInt8]) throws -> [Entry] {
        let h = try parseHeader(archive)
        var keys = try derive(passphrase, h.kdf)
        defer { wipe(&keys.aead) }
        guard constantTimeEqual(keys.check, h.check) else { throw Failure.wrongPassphrase }
        let body = archive[headerSize...]
        let ciphertext = Array(body.dropLast(AESGCM.tagSize))
        let tag = Array(body.suffix(AESGCM.tagSize))
        var plaintext: [UInt8]
        do {
            plaintext = try AESGCM.decrypt(key: keys.aead, iv: h.nonce, ciphertext: ciphertext, tag: tag,
                                           aad: Array(archive[0..<headerSize]))
        } catch {
            throw Failure.tampered
        }
        defer { wipe(&plaintext) }
        return try entries(plaintext)
    }

    // MARK: - the parts

    struct Header {
        var kdf: PINKDFParameters
        var nonce: [UInt8]
        var check: [UInt8]
    }

    static func parseHeader(_ a: [UInt8]) throws -> Header {
        guard a.count >= magic.count, Array(a[0..<magic.count]) == magic else { throw Failure.notAnArchive }
        guard a.count >= headerSize else { throw Failure.truncated }
        guard a[8] == version else { throw Failure.unsupported("format version \(a[8]) (this keyshare reads version \(version))") }
        guard a[9] == kdfScrypt, a[29] == aeadAESGCM else { throw Failure.unsupported("unknown KDF or cipher") }
        let log2N = Int(a[10]), r = Int(a[11]), p = Int(a[12])
        // scrypt's r and p as keyshare writes them: other values would only
        // let a changed header ask for more time or memory.
        guard log2NRange.contains(log2N), r == 8, p == 1 else { throw Failure.unsupported("scrypt cost 2^\(log2N), r \(r), p \(p)") }
        let length = a[58..<66].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard a.count >= headerSize + AESGCM.tagSize, length == UInt64(a.count - headerSize - AESGCM.tagSize) else {
            throw Failure.truncated
        }
        return Header(kdf: PINKDFParameters(log2N: log2N, r: r, p: p, salt: Array(a[13..<29])),
                      nonce: Array(a[30..<42]), check: Array(a[42..<58]))
    }

    static func derive(_ passphrase: [UInt8], _ kdf: PINKDFParameters) throws -> (aead: [UInt8], check: [UInt8]) {
        var master = try PINKDF.deriveKey(pin: passphrase, parameters: kdf, length: 32)
        defer { wipe(&master) }
        let aead = try KDF.hkdfExpand(.sha256, prk: master, info: Array("keyshare backup v1 key".utf8), length: AESGCM.keySize)
        let check = try KDF.hkdfExpand(.sha256, prk: master, info: Array("keyshare backup v1 check".utf8), length: checkSize)
        return (aead, check)
    }

    static func entries(_ p: [UInt8]) throws -> [Entry] {
        var out: [Entry] = []
        var i = 0
        func take(_ n: Int) throws -> ArraySlice<UInt8> {
            guard n >= 0, n <= p.count - i else { throw Failure.malformed("an entry runs past the end") }
            defer { i += n }
            return p[i..<(i + n)]
        }
        while i < p.count {
            let nameLength = Int(try take(2).reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
            guard let name = String(validating: try take(nameLength), as: UTF8.self), !name.isEmpty else {
                throw Failure.malformed("an entry name is not UTF-8")
            }
            let length = try take(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            guard length <= UInt64(p.count - i) else { throw Failure.malformed("entry \(name) runs past the end") }
            guard !out.contains(where: { $0.name == name }) else { throw Failure.malformed("entry \(name) appears twice") }
            out.append(Entry(name: name, bytes: Array(try take(Int(length)))))
        }
        return out
    }

    static func be(_ v: UInt64, _ count: Int) -> [UInt8] {
        (0..<count).reversed().map { UInt8(truncatingIfNeeded: v >> (8 * UInt64($0))) }
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
