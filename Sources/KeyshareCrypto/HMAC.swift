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
        // The process-wide template for this MAC (MACTemplates): a copy keyed here skips the
        // fetches. Without one (the template could not be made), the full path below.
        if let template = MACTemplates.template(algorithm, keyCount: key.count), let c = EVP_MAC_CTX_dup(template) {
            let keyBytes = key.isEmpty ? [UInt8(0)] : key
            let ok = keyBytes.withUnsafeBufferPointer { EVP_MAC_init(c, $0.baseAddress, key.count, nil) }
            guard ok == 1 else {
                EVP_MAC_CTX_free(c)
                throw CryptoError.openssl("\(macName) init")
            }
            ctx = c
            self.algorithm = algorithm
            return
        }
        guard let mac = EVP_MAC_fetch(CryptoEngine.context, macName, nil) else { throw CryptoError.openssl(macName) }
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

/// One unkeyed EVP_MAC_CTX per MAC and digest (or CMAC cipher), made once per
/// process and never freed (the module stays loaded, -z nodelete, as
/// `Fetched`). Issue 13: making a MAC context fetched EVP_MAC "HMAC" and,
/// inside the provider, the digest by name at every C_SignInit (about 2,500
/// instructions, two name lookups under the store's lock);
/// `EVP_MAC_CTX_dup` of a template whose digest is set copies the provider's
/// reference instead, and `EVP_MAC_init` then takes only the key. The
/// templates are only read after they are made (dup reads its source), so
/// threads share them. nil when OpenSSL refused one: the caller then takes
/// the full path, so behaviour never depends on the cache.
enum MACTemplates {
    private static func make(_ macName: String, _ paramName: String, _ value: String) -> OpaquePointer? {
        guard let mac = EVP_MAC_fetch(CryptoEngine.context, macName, nil) else { CryptoError.clearQueue(); return nil }
        defer { EVP_MAC_free(mac) }
        guard let c = EVP_MAC_CTX_new(mac) else { CryptoError.clearQueue(); return nil }
        let ok = paramName.withCString { namePtr in
            value.withCString { valuePtr -> Int32 in
                let params = [
                    OSSL_PARAM_construct_utf8_string(namePtr, UnsafeMutablePointer(mutating: valuePtr), 0),
                    OSSL_PARAM_construct_end(),
                ]
                return EVP_MAC_CTX_set_params(c, params)
            }
        }
        guard ok == 1 else {
            EVP_MAC_CTX_free(c)
            CryptoError.clearQueue()
            return nil
        }
        return c
    }

    nonisolated(unsafe) static let sha1 = make("HMAC", "digest", DigestAlgorithm.sha1.name)
    nonisolated(unsafe) static let sha224 = make("HMAC", "digest", DigestAlgorithm.sha224.name)
    nonisolated(unsafe) static let sha256 = make("HMAC", "digest", DigestAlgorithm.sha256.name)
    nonisolated(unsafe) static let sha384 = make("HMAC", "digest", DigestAlgorithm.sha384.name)
    nonisolated(unsafe) static let sha512 = make("HMAC", "digest", DigestAlgorithm.sha512.name)
    nonisolated(unsafe) static let sha512_224 = make("HMAC", "digest", DigestAlgorithm.sha512_224.name)
    nonisolated(unsafe) static let sha512_256 = make("HMAC", "digest", DigestAlgorithm.sha512_256.name)
    nonisolated(unsafe) static let sha3_224 = make("HMAC", "digest", DigestAlgorithm.sha3_224.name)
    nonisolated(unsafe) static let sha3_256 = make("HMAC", "digest", DigestAlgorithm.sha3_256.name)
    nonisolated(unsafe) static let sha3_384 = make("HMAC", "digest", DigestAlgorithm.sha3_384.name)
    nonisolated(unsafe) static let sha3_512 = make("HMAC", "digest", DigestAlgorithm.sha3_512.name)
    nonisolated(unsafe) static let cmacAES128 = make("CMAC", "cipher", "AES-128-CBC")
    nonisolated(unsafe) static let cmacAES192 = make("CMAC", "cipher", "AES-192-CBC")
    nonisolated(unsafe) static let cmacAES256 = make("CMAC", "cipher", "AES-256-CBC")

    /// The template for `algorithm` (for CMAC, the AES size a key of `keyCount` bytes picks).
    static func template(_ algorithm: MACAlgorithm, keyCount: Int) -> OpaquePointer? {
        switch algorithm {
        case .hmac(let d):
            switch d {
            case .sha1: sha1
            case .sha224: sha224
            case .sha256: sha256
            case .sha384: sha384
            case .sha512: sha512
            case .sha512_224: sha512_224
            case .sha512_256: sha512_256
            case .sha3_224: sha3_224
            case .sha3_256: sha3_256
            case .sha3_384: sha3_384
            case .sha3_512: sha3_512
            }
        case .cmacAES:
            switch keyCount {
            case 16: cmacAES128
            case 24: cmacAES192
            case 32: cmacAES256
            default: nil
            }
        }
    }
}

/// HMAC is the MAC keyshare uses most; the name stays for its callers.
public typealias HMACContext = MACContext

extension MACContext {
    public convenience init(_ digest: DigestAlgorithm, key: [UInt8]) throws {
        try self.init(.hmac(digest), key: key)
    }
}
