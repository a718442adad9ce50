import KeyshareCrypto

/// An opaque, stable name for an item that may be written to disk or sent to
/// another process (and is the PKCS #11 CKA_UNIQUE_ID). Random rather than a
/// row number, so a reference can never come to name a later item, and the
/// store also retires deleted ones.
public struct PersistentReference: Hashable, Sendable, CustomStringConvertible {
    static let version: UInt8 = 1
    /// References of external (PKCS #11 driver) tokens' items: derived, not
    /// random, so the same card gives the same references at every insertion.
    static let derivedVersion: UInt8 = 2
    static let length = 17

    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.length, bytes[0] == Self.version || bytes[0] == Self.derivedVersion else { return nil }
        self.bytes = bytes
    }

    /// The reference of an object of an external token: a hash of the token
    /// ID and the object's identity on the card. Such references are never
    /// retired: they can only ever name that object of that token.
    public static func derived(token: TokenID, identity: [UInt8]) -> PersistentReference {
        let h = DigestAlgorithm.sha256.hash(Array("keyshare-ref:\(token.description)\u{0}".utf8) + identity)
        return PersistentReference(unchecked: [derivedVersion] + h.prefix(length - 1))
    }

    public var isDerived: Bool { bytes[0] == Self.derivedVersion }

    static func random() throws -> PersistentReference {
        PersistentReference(unchecked: [version] + (try SecureRandom.bytes(length - 1)))
    }

    private init(unchecked: [UInt8]) { bytes = unchecked }

    public init?(base64url: String) {
        guard let b = Base64URL.decode(base64url) else { return nil }
        self.init(bytes: b)
    }

    public var base64url: String { Base64URL.encode(bytes) }
    public var description: String { base64url }
}

enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ data: [UInt8]) -> String {
        var out: [UInt8] = []
        var i = 0
        while i + 3 <= data.count {
            let n = UInt32(data[i]) << 16 | UInt32(data[i + 1]) << 8 | UInt32(data[i + 2])
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], alphabet[Int(n & 63)]]
            i += 3
        }
        let rest = data.count - i
        if rest == 1 {
            let n = UInt32(data[i]) << 16
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)]]
        } else if rest == 2 {
            let n = UInt32(data[i]) << 16 | UInt32(data[i + 1]) << 8
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)]]
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decode(_ s: String) -> [UInt8]? {
        var values: [UInt32] = []
        for c in s.utf8 {
            if c == UInt8(ascii: "=") { continue }
            guard let idx = alphabet.firstIndex(of: c) else { return nil }
            values.append(UInt32(idx))
        }
        if values.count % 4 == 1 { return nil }
        var out: [UInt8] = []
        var i = 0
        while i < values.count {
            let chunk = values[i..<min(i + 4, values.count)]
            var n: UInt32 = 0
            for (k, v) in chunk.enumerated() { n |= v << UInt32(18 - 6 * k) }
            let bytes = chunk.count - 1
            for k in 0..<bytes { out.append(UInt8(n >> UInt32(16 - 8 * k) & 0xFF)) }
            i += 4
        }
        return out
    }
}
