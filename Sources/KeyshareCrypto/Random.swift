import COpenSSL

/// Cryptographically secure random bytes from OpenSSL's DRBG, which is
/// fork-safe (it reseeds in a child), unlike a cached /dev/urandom reader.
public enum SecureRandom {
    public static func bytes(_ count: Int) throws -> [UInt8] {
        precondition(count >= 0)
        if count == 0 { return [] }
        var out = [UInt8](repeating: 0, count: count)
        let ok = out.withUnsafeMutableBufferPointer { RAND_bytes_ex(CryptoEngine.context, $0.baseAddress, count, 0) }
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
    /// never replacing OpenSSL's own seeding. keyshare's DRBGs are its own
    /// library context's (`CryptoEngine.context`), which RAND_add (the
    /// default context's) does not reach: the primary DRBG is reseeded from
    /// its own entropy source with the data as additional input, and the
    /// public and private DRBGs follow it at their next use.
    public static func seed(_ data: [UInt8]) {
        guard !data.isEmpty, let primary = RAND_get0_primary(CryptoEngine.context) else { return }
        _ = data.withUnsafeBufferPointer { EVP_RAND_reseed(primary, 0, nil, 0, $0.baseAddress, $0.count) }
        CryptoError.clearQueue()
    }
}
