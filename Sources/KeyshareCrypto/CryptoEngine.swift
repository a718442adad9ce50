import COpenSSL
import COpenSSLSupport

/// The OpenSSL keyshare runs on (issue 18, docs/architecture.md "The crypto engine"). On Debian 12
/// the default build links Debian 13's OpenSSL 3.5 statically (`bundled`); `make OPENSSL=system`,
/// or a system OpenSSL ≥ 3.5, links the system libcrypto dynamically. `keyshare --version` and
/// C_GetInfo's library description name it, because a bundled OpenSSL does not receive the
/// system's security updates and a user must be able to tell which one a binary carries.
public enum CryptoEngine {
    /// True when libcrypto is linked into this binary (the fetched Debian 13 archive), false when it is
    /// a shared libcrypto.so. Decided at run time from where OpenSSL_version lives, not from which
    /// headers were compiled in: a build directory switched between modes must not mislabel itself.
    public static let isBundled: Bool = {
        let fn: @convention(c) (Int32) -> UnsafePointer<CChar>? = OpenSSL_version
        return ks_same_object(unsafeBitCast(fn, to: UnsafeRawPointer.self)) == 1
    }()

    /// The runtime version, "3.5.9" (OpenSSL_version, not the headers: a dynamic libcrypto may be newer).
    public static let version: String = String(cString: OpenSSL_version(OPENSSL_VERSION_STRING))

    /// "OpenSSL 3.5.9": fits C_GetInfo's 32-character description with a prefix.
    public static var name: String { "OpenSSL \(version)" }

    /// The release date OpenSSL states for itself ("30 Sep 2025", the end of OpenSSL_version(OPENSSL_VERSION)).
    public static let releaseDate: String? = {
        let parts = String(cString: OpenSSL_version(OPENSSL_VERSION)).split(separator: " ")
        guard parts.count >= 5 else { return nil }
        return parts.suffix(3).joined(separator: " ")
    }()

    /// Whole days from that release to `now` (seconds since the epoch); nil when the date cannot be read.
    public static func releaseAge(now: Int) -> Int? {
        guard let date = releaseDate else { return nil }
        let f = date.split(separator: " ")
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard f.count == 3, let d = Int(f[0]), let mi = months.firstIndex(of: String(f[1])), let y = Int(f[2]) else { return nil }
        // Days from 1970-01-01 to the civil date (Howard Hinnant's days_from_civil).
        let m = mi + 1, yy = m <= 2 ? y - 1 : y
        let era = (yy >= 0 ? yy : yy - 399) / 400
        let yoe = yy - era * 400
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146097 + doe - 719468
        return now / 86400 - days
    }

    /// One line for `keyshare --version`: which engine, and for the bundled one its release date and
    /// age (it gets no security update from the system: docs/packaging.md says who rebuilds when).
    public static func summary(now: Int) -> String {
        guard isBundled else { return "\(name) (system, linked dynamically)" }
        let released = releaseDate.map { d in "; released \(d)" + (releaseAge(now: now).map { ", \($0) days ago" } ?? "") } ?? ""
        return "\(name) (bundled, linked statically\(released); not updated by the system: rebuild with a newer one)"
    }

    /// OpenSSL 3.2+ answers an RSA PKCS #1 v1.5 decryption with bad padding with a synthetic
    /// message derived from the key and ciphertext (implicit rejection, the Marvin-attack
    /// countermeasure) instead of an error; 3.0 reports the error. keyshare keeps the engine's
    /// behaviour: turning it off would reopen the timing oracle (SoftHSM2 and Kryoptic on 3.2+ do the same).
    public static var rsaImplicitRejection: Bool {
        OPENSSL_version_major() > 3 || (OPENSSL_version_major() == 3 && OPENSSL_version_minor() >= 2)
    }

    /// OpenSSL 3.5 brought ML-DSA, ML-KEM and SLH-DSA; older engines list none of them.
    public static var hasPostQuantum: Bool {
        OPENSSL_version_major() > 3 || (OPENSSL_version_major() == 3 && OPENSSL_version_minor() >= 5)
    }
}

extension CryptoEngine {
    /// keyshare's own OpenSSL library context (issue 29): every fetch, key and operation of keyshare
    /// names it instead of OpenSSL's default context, which in-process is the host's (its
    /// OPENSSL_CONF's providers, pkcs11-provider included, and default properties). No
    /// configuration is ever read into it; its one provider is "default" (`ks_libctx`,
    /// COpenSSLSupport). nil only if OpenSSL could not make it, and then the default context serves.
    nonisolated(unsafe) public static let context: OpaquePointer? = ks_libctx()

    /// The name a fetched (or legacy) digest goes by, for the `_ex` calls that take a name.
    static func name(of md: OpaquePointer?) -> UnsafePointer<CChar>? {
        md.flatMap { EVP_MD_get0_name($0) }
    }

    /// Every provider loaded in OpenSSL's default library context, with the version it reports
    /// ("default" and, once a PKCS #12 was parsed, the legacy one). With the bundled engine every
    /// one of them must be 3.5: a 3.0 legacy.so from the system would be a mismatched pair.
    public static func loadedProviders() -> [(name: String, version: String)] {
        final class Box { var out: [(name: String, version: String)] = [] }
        let box = Box()
        _ = withExtendedLifetime(box) {
            OSSL_PROVIDER_do_all(nil, { prov, arg in
                guard let prov, let arg else { return 1 }
                let box = Unmanaged<Box>.fromOpaque(arg).takeUnretainedValue()
                let name = String(cString: OSSL_PROVIDER_get0_name(prov))
                box.out.append((name, LegacyProvider.providerVersion(prov) ?? "?"))
                return 1
            }, Unmanaged.passUnretained(box).toOpaque())
        }
        return box.out
    }
}
