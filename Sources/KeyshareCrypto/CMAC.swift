import COpenSSL

/// AES-CMAC (NIST SP 800-38B, RFC 4493) through EVP_MAC, for CKM_AES_CMAC
/// and CKM_AES_CMAC_GENERAL. A class because it owns an EVP_MAC_CTX; one
/// thread at a time.
public final class CMACContext: @unchecked Sendable {
    public static let macSize = 16
    private let ctx: OpaquePointer

    public init(aesKey key: [UInt8]) throws {
        // OpenSSL's CMAC names the block cipher in CBC mode.
        let cipher: StaticString
        switch key.count {
        case 16: cipher = "AES-128-CBC"
        case 24: cipher = "AES-192-CBC"
        case 32: cipher = "AES-256-CBC"
        default: throw CryptoError(.invalidInput, "AES-CMAC", reason: "key must be 16, 24 or 32 bytes")
        }
        CryptoError.clearQueue()
        guard let mac = Fetched.cmac, let c = EVP_MAC_CTX_new(mac) else { throw CryptoError.openssl("AES-CMAC") }
        let params = [
            OSSL_PARAM_construct_utf8_string(cString("cipher"), UnsafeMutablePointer(mutating: cString(cipher)), 0),
            OSSL_PARAM_construct_end(),
        ]
        guard key.withUnsafeBufferPointer({ EVP_MAC_init(c, $0.baseAddress, key.count, params) }) == 1 else {
            EVP_MAC_CTX_free(c)
            throw CryptoError.openssl("AES-CMAC init")
        }
        ctx = c
    }

    deinit { EVP_MAC_CTX_free(ctx) }

    public func update(_ data: [UInt8]) throws {
        if data.isEmpty { return }
        guard EVP_MAC_update(ctx, data, data.count) == 1 else { throw CryptoError.openssl("AES-CMAC update") }
    }

    /// The full 16-byte MAC (CKM_AES_CMAC_GENERAL truncates it).
    public func finish() throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Self.macSize)
        var len = 0
        guard EVP_MAC_final(ctx, &out, &len, out.count) == 1, len == Self.macSize else {
            throw CryptoError.openssl("AES-CMAC final")
        }
        return out
    }

    public static func mac(aesKey key: [UInt8], data: [UInt8]) throws -> [UInt8] {
        let c = try CMACContext(aesKey: key)
        try c.update(data)
        return try c.finish()
    }
}

extension Fetched {
    nonisolated(unsafe) static let cmac: OpaquePointer? = EVP_MAC_fetch(nil, "CMAC", nil)
}
