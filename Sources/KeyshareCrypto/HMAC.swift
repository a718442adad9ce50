import COpenSSL

/// HMAC through EVP_MAC (the HMAC_CTX API is deprecated in OpenSSL 3).
public enum HMAC {
    public static func mac(_ digest: DigestAlgorithm, key: [UInt8], data: [UInt8]) throws -> [UInt8] {
        let ctx = try HMACContext(digest, key: key)
        try ctx.update(data)
        return try ctx.finish()
    }

    /// Constant-time comparison for verifying a MAC.
    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return CRYPTO_memcmp(a, b, a.count) == 0
    }
}

/// Multi-part HMAC (C_SignUpdate with CKM_SHA256_HMAC and friends); a class
/// because it owns an EVP_MAC_CTX. Not for concurrent use from two threads.
public final class HMACContext: @unchecked Sendable {
    private let ctx: OpaquePointer
    public let algorithm: DigestAlgorithm

    public init(_ algorithm: DigestAlgorithm, key: [UInt8]) throws {
        CryptoError.clearQueue()
        guard let mac = EVP_MAC_fetch(nil, "HMAC", nil) else { throw CryptoError.openssl("HMAC") }
        defer { EVP_MAC_free(mac) }
        guard let c = EVP_MAC_CTX_new(mac) else { throw CryptoError.openssl("HMAC") }
        let name = algorithm.name
        let ok = name.withCString { namePtr -> Int32 in
            let params = [
                OSSL_PARAM_construct_utf8_string("digest", UnsafeMutablePointer(mutating: namePtr), 0),
                OSSL_PARAM_construct_end(),
            ]
            // An empty key still needs a non-null pointer.
            let keyBytes = key.isEmpty ? [UInt8(0)] : key
            return keyBytes.withUnsafeBufferPointer { EVP_MAC_init(c, $0.baseAddress, key.count, params) }
        }
        guard ok == 1 else {
            EVP_MAC_CTX_free(c)
            throw CryptoError.openssl("HMAC init")
        }
        ctx = c
        self.algorithm = algorithm
    }

    deinit { EVP_MAC_CTX_free(ctx) }

    public func update(_ data: [UInt8]) throws {
        if data.isEmpty { return }
        guard EVP_MAC_update(ctx, data, data.count) == 1 else { throw CryptoError.openssl("HMAC update") }
    }

    public func finish() throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var len = 0
        guard EVP_MAC_final(ctx, &out, &len, out.count) == 1 else { throw CryptoError.openssl("HMAC final") }
        return Array(out[0..<len])
    }
}
