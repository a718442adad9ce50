/// The product's one version number. It lives in the lowest layer so every
/// part reports the same value: C_GetInfo's libraryVersion, the tokens'
/// firmware and hardware versions (PKCS #11 3.0 §5.4.3, §5.5.3) and
/// `keyshare --version`. Bump it here, and add the release to CHANGELOG.md.
public enum KeyshareVersion {
    public static let major: UInt8 = 0
    public static let minor: UInt8 = 3
    public static let patch: UInt8 = 0

    /// "major.minor.patch", as `keyshare --version` prints it.
    public static let string = "\(major).\(minor).\(patch)"
}
