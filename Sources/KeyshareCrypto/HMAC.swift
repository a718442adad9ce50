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

/// The MACs EVP_MAC runs for keyshare: HMAC over any `DigestAlgorithm`, and
/// AES-CMAC (SP 800-38B; the key size picks AES-128/192/256), the PRFs of
/// the SP 800-108 key derivations.
public enum MACAlgorithm: Sendable, Equatable, Hashable {
    case hmac(DigestAlgorithm)
    case cmacAES

    public var outputSize: Int {
        switch self {
        case .hmac(let d): d.outputSize
        case .cmacAES: 16
        }
    }
}

/// Multi-part MAC (C_SignUpdate with CKM_SHA256_HMAC and friends, and the
/// SP 800-108 PRF); a class because it owns an EVP_MAC_CTX. Not for
/// concurrent use from two threads.
public final class MACContext: @unchecked Sendable {
    private let ctx: OpaquePointer
    public let algorithm: MACAlgorithm

    public init(_ algorithm: MACAlgorithm, key: [UInt8]) throws {
        CryptoError.clearQueue()
        let (macName, paramName, paramValue): (String, String, String)
        switch algorithm {
        case .hmac(let d): (macName, paramName, paramValue) = ("HMAC", "digest", d.name)
        case .cmacAES:
            let cipher: String
            switch key.count {
            case 16: cipher = "AES-128-CBC"
            case 24: cipher = "AES-192-CBC"
            case 32: cipher = "AES-256-CBC"
            default: throw CryptoError(.invalidInput, "CMAC", reason: "AES keys are 16, 24 or 32 bytes")
            }
            (macName, paramName, paramValue) = ("CMAC", "cipher", cipher)
        }
        guard let mac = EVP_MAC_fetch(nil, macName, nil) else { throw CryptoError.openssl(macName) }
        defer { EVP_MAC_free(mac) }
        guard let c = EVP_MAC_CTX_new(mac) else { throw CryptoError.openssl(macName) }
        let ok = paramName.withCString { namePtr in
            paramValue.withCString { valuePtr -> Int32 in
                let params = [
                    OSSL_PARAM_construct_utf8_string(namePtr, UnsafeMutablePointer(mutating: valuePtr), 0),
                    OSSL_PARAM_construct_end(),
                ]
                // An empty key still needs a non-null pointer.
                let keyBytes = key.isEmpty ? [UInt8(0)] : key
                return keyBytes.withUnsafeBufferPointer { EVP_MAC_init(c, $0.baseAddress, key.count, params) }
            }
        }
        guard ok == 1 else {
            EVP_MAC_CTX_free(c)
            throw CryptoError.openssl("\(macName) init")
        }
        ctx = c
        self.algorithm = algorithm
    }

    private init(owning c: OpaquePointer, _ algorithm: MACAlgorithm) {
        ctx = c
        self.algorithm = algorithm
    }

    deinit { EVP_MAC_CTX_free(ctx) }

    /// An independent copy of the running MAC (EVP_MAC_CTX_dup): the copy
    /// and the original go on separately. Used for C_GetOperationState and
    /// to restart a keyed PRF without re-keying it.
    public func copy() throws -> MACContext {
        guard let c = EVP_MAC_CTX_dup(ctx) else { throw CryptoError.openssl("MAC copy") }
        return MACContext(owning: c, algorithm)
    }

    public func update(_ data: [UInt8]) throws {
        if data.isEmpty { return }
        guard EVP_MAC_update(ctx, data, data.count) == 1 else { throw CryptoError.openssl("MAC update") }
    }

    public func finish() throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var len = 0
        guard EVP_MAC_final(ctx, &out, &len, out.count) == 1 else { throw CryptoError.openssl("MAC final") }
        return Array(out[0..<len])
    }
}

/// HMAC is the MAC keyshare uses most; the name stays for its callers.
public typealias HMACContext = MACContext

extension MACContext {
    public convenience init(_ digest: DigestAlgorithm, key: [UInt8]) throws {
        try self.init(.hmac(digest), key: key)
    }
}
