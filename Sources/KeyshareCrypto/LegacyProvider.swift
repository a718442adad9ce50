import COpenSSL

/// OpenSSL 3 keeps RC2-40 (what OpenSSL 1.x and old Windows put on the
/// certificate bag) in the "legacy" provider. It is loaded only when a
/// PKCS #12 is first parsed, so a host process that never imports a file is
/// not affected. Loading any provider explicitly stops OpenSSL from
/// auto-loading "default", so that is loaded alongside.
enum LegacyProvider {
    /// nil when both providers are loaded, else why legacy is unavailable.
    /// A global `let` is initialised exactly once, thread-safely.
    static let loadError: String? = {
        guard OSSL_PROVIDER_load(nil, "default") != nil else {
            return CryptoError.openssl("load default provider").reason
        }
        guard OSSL_PROVIDER_load(nil, "legacy") != nil else {
            let e = CryptoError.openssl("load legacy provider")
            return "OpenSSL legacy provider unavailable (\(e.reason)); install it or set OPENSSL_MODULES"
        }
        return nil
    }()

    static func ensureLoaded() -> String? { loadError }
}
