import COpenSSL

/// Cryptographically secure random bytes from OpenSSL's DRBG, which is
/// fork-safe (it reseeds in a child), unlike a cached /dev/urandom reader.
public enum SecureRandom {
    public static func bytes(_ count: Int) throws -> [UInt8] {
        precondition(count >= 0)
        if count == 0 { return [] }
        var out = [UInt8](repeating: 0, count: count)
        let ok = out.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
        guard ok == 1 else { throw CryptoError.openssl("random") }
        return out
    }

    /// A uniform integer in 0..<bound by rejection sampling: no modulo bias.
    public static func uniform(below bound: UInt32) throws -> UInt32 {
        precondition(bound > 0)
        let limit = UInt32.max - UInt32.max % bound
        while true {
            let b = try bytes(4)
            let v = UInt32(b[0]) | UInt32(b[1]) << 8 | UInt32(b[2]) << 16 | UInt32(b[3]) << 24
            if v < limit { return v % bound }
        }
    }

    /// Adds caller-supplied entropy to the DRBG (C_SeedRandom): mixed in,
    /// never replacing OpenSSL's own seeding.
    public static func seed(_ data: [UInt8]) {
        data.withUnsafeBufferPointer { RAND_add($0.baseAddress, Int32($0.count), 0) }
    }
}
