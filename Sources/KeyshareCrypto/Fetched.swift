import COpenSSL

/// Ciphers and digests fetched from the providers once per process. Handing
/// OpenSSL 3 the legacy `EVP_aes_256_gcm()` / `EVP_sha256()` constants makes
/// every init fetch the implementation again (a name lookup under a lock,
/// about half the cost of opening one sealed attribute); a fetched object
/// is used as is. Fetched objects are never freed: the module stays loaded
/// (-z nodelete) and they are process-wide. The constant is the fallback if
/// a fetch fails, so behaviour never depends on the cache. Fetched from
/// keyshare's own library context (`CryptoEngine.context`, issue 29), never
/// the default one a host configures.
enum Fetched {
    nonisolated(unsafe) static let aes128GCM: OpaquePointer = EVP_CIPHER_fetch(CryptoEngine.context, "AES-128-GCM", nil) ?? EVP_aes_128_gcm()
    nonisolated(unsafe) static let aes192GCM: OpaquePointer = EVP_CIPHER_fetch(CryptoEngine.context, "AES-192-GCM", nil) ?? EVP_aes_192_gcm()
    nonisolated(unsafe) static let aes256GCM: OpaquePointer = EVP_CIPHER_fetch(CryptoEngine.context, "AES-256-GCM", nil) ?? EVP_aes_256_gcm()

    nonisolated(unsafe) static let aes128CBC: OpaquePointer = EVP_CIPHER_fetch(CryptoEngine.context, "AES-128-CBC", nil) ?? EVP_aes_128_cbc()
    nonisolated(unsafe) static let aes192CBC: OpaquePointer = EVP_CIPHER_fetch(CryptoEngine.context, "AES-192-CBC", nil) ?? EVP_aes_192_cbc()
    nonisolated(unsafe) static let aes256CBC: OpaquePointer = EVP_CIPHER_fetch(CryptoEngine.context, "AES-256-CBC", nil) ?? EVP_aes_256_cbc()
    nonisolated(unsafe) static let aes128Wrap: OpaquePointer = EVP_CIPHER_fetch(CryptoEngine.context, "AES-128-WRAP", nil) ?? EVP_aes_128_wrap()
    nonisolated(unsafe) static let aes192Wrap: OpaquePointer = EVP_CIPHER_fetch(CryptoEngine.context, "AES-192-WRAP", nil) ?? EVP_aes_192_wrap()
    nonisolated(unsafe) static let aes256Wrap: OpaquePointer = EVP_CIPHER_fetch(CryptoEngine.context, "AES-256-WRAP", nil) ?? EVP_aes_256_wrap()
    nonisolated(unsafe) static let aes128WrapPad: OpaquePointer =
        EVP_CIPHER_fetch(CryptoEngine.context, "AES-128-WRAP-PAD", nil) ?? EVP_aes_128_wrap_pad()
    nonisolated(unsafe) static let aes192WrapPad: OpaquePointer =
        EVP_CIPHER_fetch(CryptoEngine.context, "AES-192-WRAP-PAD", nil) ?? EVP_aes_192_wrap_pad()
    nonisolated(unsafe) static let aes256WrapPad: OpaquePointer =
        EVP_CIPHER_fetch(CryptoEngine.context, "AES-256-WRAP-PAD", nil) ?? EVP_aes_256_wrap_pad()

    nonisolated(unsafe) static let sha1: OpaquePointer = EVP_MD_fetch(CryptoEngine.context, "SHA1", nil) ?? EVP_sha1()
    nonisolated(unsafe) static let sha224: OpaquePointer = EVP_MD_fetch(CryptoEngine.context, "SHA224", nil) ?? EVP_sha224()
    nonisolated(unsafe) static let sha256: OpaquePointer = EVP_MD_fetch(CryptoEngine.context, "SHA256", nil) ?? EVP_sha256()
    nonisolated(unsafe) static let sha384: OpaquePointer = EVP_MD_fetch(CryptoEngine.context, "SHA384", nil) ?? EVP_sha384()
    nonisolated(unsafe) static let sha512: OpaquePointer = EVP_MD_fetch(CryptoEngine.context, "SHA512", nil) ?? EVP_sha512()
}
