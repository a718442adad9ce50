import COpenSSL
import COpenSSLSupport
import Glibc

/// OpenSSL 3 keeps RC2-40 (what OpenSSL 1.x and old Windows put on the
/// certificate bag) in the "legacy" provider. It is loaded only when a
/// PKCS #12 is first parsed, so a host process that never imports a file is
/// not affected. Loading any provider explicitly stops OpenSSL from
/// auto-loading "default", so that is loaded alongside.
///
/// With the bundled OpenSSL (issue 18) the provider must be the bundle's 3.5 one: the static
/// libcrypto's compiled-in module directory is the system's, which on Debian 12 holds 3.0's
/// legacy.so. So it is loaded by absolute path, from `keyshare-ossl-modules/` next to the engine
/// (libkeyshare-engine.so: the build directory and the installed layout), then the bundle directory
/// of a development tree; never by name.
enum LegacyProvider {
    /// nil when both providers are loaded, else why legacy is unavailable.
    /// A global `let` is initialised exactly once, thread-safely.
    static let loadError: String? = {
        guard OSSL_PROVIDER_load(nil, "default") != nil else {
            return CryptoError.openssl("load default provider").reason
        }
        guard CryptoEngine.isBundled else {
            guard OSSL_PROVIDER_load(nil, "legacy") != nil else {
                let e = CryptoError.openssl("load legacy provider")
                return "OpenSSL legacy provider unavailable (\(e.reason)); install it or set OPENSSL_MODULES"
            }
            return nil
        }
        var tried: [String] = []
        for path in bundledCandidates() {
            tried.append(path)
            guard access(path, R_OK) == 0 else { continue }
            guard let prov = OSSL_PROVIDER_load(nil, path) else {
                ERR_clear_error()
                continue
            }
            // A provider that is not the bundle's own version is refused (and unloaded).
            if providerVersion(prov).map({ sameMinor($0, CryptoEngine.version) }) == true { return nil }
            OSSL_PROVIDER_unload(prov)
        }
        return "the bundled \(CryptoEngine.name)'s legacy provider was not found (looked in \(tried.joined(separator: ", ")))"
    }()

    static func ensureLoaded() -> String? { loadError }

    /// Where the bundle's legacy.so may be, in order.
    static func bundledCandidates() -> [String] {
        var out: [String] = []
        var buf = [CChar](repeating: 0, count: 4096)
        if ks_self_object_dir(&buf, buf.count) == 1 {
            let dir = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            out.append("\(dir)/keyshare-ossl-modules/legacy.so")
        }
        if let p = ks_openssl_bundle_legacy() { out.append(String(cString: p)) }
        return out
    }

    /// The provider's "version" parameter ("3.5.9").
    static func providerVersion(_ prov: OpaquePointer) -> String? {
        var value: UnsafeMutablePointer<CChar>? = nil
        let ok: Bool = withUnsafeMutablePointer(to: &value) { vp in
            "version".withCString { key in
                var params = [OSSL_PARAM_construct_utf8_ptr(key, vp, 0), OSSL_PARAM_construct_end()]
                return OSSL_PROVIDER_get_params(prov, &params) == 1
            }
        }
        guard ok, let value else { return nil }
        return String(cString: value)
    }

    /// "3.5.9" and "3.5.1" match; "3.0.19" and "3.5.9" do not.
    static func sameMinor(_ a: String, _ b: String) -> Bool {
        a.split(separator: ".").prefix(2) == b.split(separator: ".").prefix(2)
    }
}
