/// ECDSA signatures travel in two forms: raw r||s (PKCS #11, what KeyRef
/// produces) and the DER SEQUENCE { INTEGER r, INTEGER s } that OpenSSL,
/// X.509 and most protocols use. These convert between them for files.
public enum ECDSASignatureEncoding {
    /// DER from raw r||s (each half `count/2` bytes).
    public static func der(fromRaw raw: [UInt8]) throws -> [UInt8] {
        guard raw.count >= 2, raw.count % 2 == 0 else { throw KeyShareError.invalidParameter("bad raw ECDSA signature") }
        func integer(_ b: ArraySlice<UInt8>) -> [UInt8] {
            var v = Array(b.drop(while: { $0 == 0 }))
            if v.isEmpty { v = [0] }
            if v[0] & 0x80 != 0 { v.insert(0, at: 0) }
            return [0x02] + length(v.count) + v
        }
        let body = integer(raw[..<(raw.count / 2)]) + integer(raw[(raw.count / 2)...])
        return [0x30] + length(body.count) + body
    }

    /// Raw r||s, each padded to `size` bytes (the curve's byte size), from DER.
    public static func raw(fromDER der: [UInt8], size: Int) throws -> [UInt8] {
        var i = 0
        func bad() -> KeyShareError { .invalidParameter("not a DER ECDSA signature") }
        func readLength() throws -> Int {
            guard i < der.count else { throw bad() }
            let first = Int(der[i]); i += 1
            if first < 0x80 { return first }
            let n = first & 0x7F
            guard n >= 1, n <= 2, i + n <= der.count else { throw bad() }
            var len = 0
            for _ in 0..<n { len = len << 8 | Int(der[i]); i += 1 }
            return len
        }
        func readInteger() throws -> [UInt8] {
            guard i < der.count, der[i] == 0x02 else { throw bad() }
            i += 1
            let len = try readLength()
            guard len > 0, i + len <= der.count else { throw bad() }
            let v = Array(der[i..<(i + len)].drop(while: { $0 == 0 }))
            i += len
            guard v.count <= size else { throw bad() }
            return [UInt8](repeating: 0, count: size - v.count) + v
        }
        guard der.first == 0x30 else { throw bad() }
        i = 1
        let total = try readLength()
        guard i + total == der.count else { throw bad() }
        return try readInteger() + readInteger()
    }

    static func length(_ n: Int) -> [UInt8] {
        n < 0x80 ? [UInt8(n)] : n < 0x100 ? [0x81, UInt8(n)] : [0x82, UInt8(n >> 8), UInt8(n & 0xFF)]
    }
}
