import COpenSSL

/// Ciphers and digests fetched from the providers once per process. Handing
/// OpenSSL 3 the legacy `EVP_aes_256_gcm()` / `EVP_sha256()` constants makes
/// every init fetch the implementation again (a name lookup under a lock,
/// about half the cost of opening one sealed attribute); a fetched object
/// is used as is. Fetched objects are never freed: the module stays loaded
/// (-z nodelete) and they are process-wide. The constant is the fallback if
/// a fetch fails, so behaviour never depends on the cache.
enum Fetched {
    nonisolated(unsafe) static let aes128GCM: OpaquePointer = EVP_CIPHER_fetch(nil, "AES-128-GCM", nil) ?? EVP_aes_128_gcm()
    nonisolated(unsafe) static let aes192GCM: OpaquePointer = EVP_CIPHER_fetch(nil, "AES-192-GCM", nil) ?? EVP_aes_192_gcm()
    nonisolated(unsafe) static let aes256GCM: OpaquePointer = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil) ?? EVP_aes_256_gcm()

    nonisolated(unsafe) static let sha1: OpaquePointer = EVP_MD_fetch(nil, "SHA1", nil) ?? EVP_sha1()
    nonisolated(unsafe) static let sha224: OpaquePointer = EVP_MD_fetch(nil, "SHA224", nil) ?? EVP_sha224()
    nonisolated(unsafe) static let sha256: OpaquePointer = EVP_MD_fetch(nil, "SHA256", nil) ?? EVP_sha256()
    nonisolated(unsafe) static let sha384: OpaquePointer = EVP_MD_fetch(nil, "SHA384", nil) ?? EVP_sha384()
    nonisolated(unsafe) static let sha512: OpaquePointer = EVP_MD_fetch(nil, "SHA512", nil) ?? EVP_sha512()
}
