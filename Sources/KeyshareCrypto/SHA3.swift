import COpenSSL

/// SHA-3 (FIPS 202) and the truncated SHA-512 variants (FIPS 180-4 §6.7),
/// fetched once per process like the SHA-2 digests in `Fetched` (a fetched
/// EVP_MD is used as is; the legacy constant is the fallback).
extension Fetched {
    nonisolated(unsafe) static let sha512_224: OpaquePointer = EVP_MD_fetch(CryptoEngine.context, "SHA512-224", nil) ?? EVP_sha512_224()
    nonisolated(unsafe) static let sha512_256: OpaquePointer = EVP_MD_fetch(CryptoEngine.context, "SHA512-256", nil) ?? EVP_sha512_256()
    nonisolated(unsafe) static let sha3_224: OpaquePointer = EVP_MD_fetch(CryptoEngine.context, "SHA3-224", nil) ?? EVP_sha3_224()
    nonisolated(unsafe) static let sha3_256: OpaquePointer = EVP_MD_fetch(CryptoEngine.context, "SHA3-256", nil) ?? EVP_sha3_256()
    nonisolated(unsafe) static let sha3_384: OpaquePointer = EVP_MD_fetch(CryptoEngine.context, "SHA3-384", nil) ?? EVP_sha3_384()
    nonisolated(unsafe) static let sha3_512: OpaquePointer = EVP_MD_fetch(CryptoEngine.context, "SHA3-512", nil) ?? EVP_sha3_512()
}
