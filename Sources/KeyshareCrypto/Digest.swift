import COpenSSL

/// The hash functions of signatures, labels (SHA-256 of a certificate),
/// localKeyID (SHA-1), the PKCS #11 digest and HMAC mechanisms and the
/// key-derivation PRFs: SHA-1, SHA-2 (with SHA-512/224 and SHA-512/256,
/// FIPS 180-4 §6.7) and SHA-3 (FIPS 202).
public enum DigestAlgorithm: Sendable, CaseIterable, Equatable, Hashable {
    case sha1, sha224, sha256, sha384, sha512
    case sha512_224, sha512_256
    case sha3_224, sha3_256, sha3_384, sha3_512

    public var outputSize: Int {
        switch self {
        case .sha1: 20
        case .sha224, .sha512_224, .sha3_224: 28
        case .sha256, .sha512_256, .sha3_256: 32
        case .sha384, .sha3_384: 48
        case .sha512, .sha3_512: 64
        }
    }

    var md: OpaquePointer {
        switch self {
        case .sha1: Fetched.sha1
        case .sha224: Fetched.sha224
        case .sha256: Fetched.sha256
        case .sha384: Fetched.sha384
        case .sha512: Fetched.sha512
        case .sha512_224: Fetched.sha512_224
        case .sha512_256: Fetched.sha512_256
        case .sha3_224: Fetched.sha3_224
        case .sha3_256: Fetched.sha3_256
        case .sha3_384: Fetched.sha3_384
        case .sha3_512: Fetched.sha3_512
        }
    }

    /// The name OpenSSL knows the digest by (EVP_MAC's "digest" parameter).
    public var name: String {
        switch self {
        case .sha1: "SHA-1"
        case .sha224: "SHA-224"
        case .sha256: "SHA-256"
        case .sha384: "SHA-384"
        case .sha512: "SHA-512"
        case .sha512_224: "SHA512-224"
        case .sha512_256: "SHA512-256"
        case .sha3_224: "SHA3-224"
        case .sha3_256: "SHA3-256"
        case .sha3_384: "SHA3-384"
        case .sha3_512: "SHA3-512"
        }
    }

    /// The first `count` (at most 20) bytes of SHA-1(`data`): CKA_CHECK_VALUE (PKCS #11 3.0
    /// §4.10, §4.6.3), made for every secret key and certificate the module stores. The
    /// low-level SHA-1 (COpenSSL's ks_sha1_oneshot) on a stack buffer: the same digest as
    /// `DigestAlgorithm.sha1.hash`, without EVP's per-call context and the two arrays.
    public static func sha1Prefix(_ data: [UInt8], count: Int) -> [UInt8] {
        var md = InlineArray<20, UInt8>(repeating: 0)
        var span = md.mutableSpan
        return span.withUnsafeMutableBytes { out in
            let ok = data.withUnsafeBytes { ks_sha1_oneshot($0.baseAddress, $0.count, out.baseAddress?.assumingMemoryBound(to: UInt8.self)) }
            precondition(ok == 1, "SHA-1 cannot fail")
            return Array(out.prefix(min(count, out.count)))
        }
    }

    /// One-shot digest.
    public func hash(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var len: UInt32 = 0
        let ok = data.withUnsafeBufferPointer { d in
            out.withUnsafeMutableBufferPointer { o in
                EVP_Digest(d.baseAddress, d.count, o.baseAddress, &len, md, nil)
            }
        }
        precondition(ok == 1, "EVP_Digest cannot fail for a built-in digest")
        return Array(out[0..<Int(len)])
    }
}

/// Multi-part digest (C_DigestUpdate); a class because it owns an EVP_MD_CTX.
public final class DigestContext: @unchecked Sendable {
    private let ctx: OpaquePointer
    public let algorithm: DigestAlgorithm

    public init(_ algorithm: DigestAlgorithm) throws {
        guard let c = EVP_MD_CTX_new() else { throw CryptoError.openssl("digest init") }
        guard EVP_DigestInit_ex(c, algorithm.md, nil) == 1 else {
            EVP_MD_CTX_free(c)
            throw CryptoError.openssl("digest init")
        }
        ctx = c
        self.algorithm = algorithm
    }

    private init(owning c: OpaquePointer, _ algorithm: DigestAlgorithm) {
        ctx = c
        self.algorithm = algorithm
    }

    /// An independent copy of the running digest (EVP_MD_CTX_copy_ex): the
    /// copy and the original go on separately. What C_GetOperationState
    /// keeps; OpenSSL 3.0 has no portable serialisation of a digest state.
    public func copy() throws -> DigestContext {
        guard let c = EVP_MD_CTX_new() else { throw CryptoError.openssl("digest copy") }
        guard EVP_MD_CTX_copy_ex(c, ctx) == 1 else {
            EVP_MD_CTX_free(c)
            throw CryptoError.openssl("digest copy")
        }
        return DigestContext(owning: c, algorithm)
    }

    deinit { EVP_MD_CTX_free(ctx) }

    public func update(_ data: [UInt8]) throws {
        let ok = data.withUnsafeBufferPointer { EVP_DigestUpdate(ctx, $0.baseAddress, $0.count) }
        guard ok == 1 else { throw CryptoError.openssl("digest update") }
    }

    public func finish() throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var len: UInt32 = 0
        guard EVP_DigestFinal_ex(ctx, &out, &len) == 1 else { throw CryptoError.openssl("digest final") }
        return Array(out[0..<Int(len)])
    }
}
