import COpenSSL

/// Locked memory for key material: OpenSSL's secure heap (one mlock'ed,
/// MADV_DONTDUMP arena, zeroed on free). Once `start` succeeded, OpenSSL puts
/// the private numbers of every parsed key there (the RSA CRT parts, an EC
/// scalar: BN_secure_new) and `allocate` the token keys. The keyshare agent
/// starts it when it cannot lock all its memory (mlockall needs a large
/// RLIMIT_MEMLOCK); without `start` both are plain heap, zeroed on free.
public enum LockedMemory {
    public enum StartResult: Sendable, Equatable {
        /// The arena exists and is locked.
        case locked
        /// The arena exists (zeroed on free, not dumped) but mlock failed.
        case notLocked
        case failed
    }

    /// `bytes` is rounded down to a power of two (OpenSSL's rule).
    public static func start(bytes: Int) -> StartResult {
        var size = 1
        while size * 2 <= bytes { size *= 2 }
        switch CRYPTO_secure_malloc_init(size, 16) {
        case 1: return .locked
        case 2: return .notLocked
        default: return .failed
        }
    }

    /// Bytes of the arena in use (key parts and token keys held now).
    public static var used: Int { Int(CRYPTO_secure_used()) }

    /// Zero-filled; from the arena when it has room, else from the heap.
    public static func allocate(_ count: Int) -> UnsafeMutableBufferPointer<UInt8> {
        if let p = CRYPTO_secure_zalloc(count, nil, 0) ?? CRYPTO_zalloc(count, nil, 0) {
            return UnsafeMutableBufferPointer(start: p.assumingMemoryBound(to: UInt8.self), count: count)
        }
        fatalError("out of memory")
    }

    /// Zeroes and frees what `allocate` returned (either source).
    public static func free(_ b: UnsafeMutableBufferPointer<UInt8>) {
        guard let base = b.baseAddress else { return }
        CRYPTO_secure_clear_free(base, b.count, nil, 0)
    }
}
