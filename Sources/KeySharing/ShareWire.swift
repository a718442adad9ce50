/// The agent's share reply (docs/agent.md, "The share tree through the
/// agent") carries every identity's label, certificate and PKCS #12 in three
/// fields, each a list packed here: a control message holds at most 64
/// fields, and one field per identity and item made a token with 22
/// shareable identities unlistable ("the keyshare agent closed the
/// connection without an answer").
public enum ShareWire {
    /// Each element as a 4-byte big-endian length, then its bytes.
    public static func pack(_ parts: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(parts.reduce(0) { $0 + 4 + $1.count })
        for p in parts {
            let n = UInt32(p.count)
            out += [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)]
            out += p
        }
        return out
    }

    /// The inverse of `pack`; nil when a length runs past the end.
    public static func unpack(_ bytes: [UInt8]) -> [[UInt8]]? {
        var parts: [[UInt8]] = []
        var i = 0
        while i < bytes.count {
            guard bytes.count - i >= 4 else { return nil }
            let n = Int(bytes[i]) << 24 | Int(bytes[i + 1]) << 16 | Int(bytes[i + 2]) << 8 | Int(bytes[i + 3])
            i += 4
            guard bytes.count - i >= n else { return nil }
            parts.append(Array(bytes[i..<i + n]))
            i += n
        }
        return parts
    }
}
