/// A driver's configuration variables (`keyshare driver add --env NAME=VALUE`):
/// the environment a PKCS #11 module reads its configuration from
/// (SOFTHSM2_CONF, OPENSC_CONF, ...), stored with the driver so every
/// process that loads it (the agent, an in-process application, the CLI's
/// child) gives it the same one, whoever started that process. Values are
/// configuration (paths), shown by `driver list`; never a secret.
public enum DriverEnvironment {
    /// The variables the known modules read their configuration from. A
    /// process that loads a driver does not pass its own values of these on
    /// (the driver gets only what was stored with it), so what `driver add`
    /// and `token list` see is what the agent sees (Tokens, DriverEnvironment+Process).
    public static let configurationNames: [String] = [
        "SOFTHSM2_CONF", "OPENSC_CONF", "PCSCLITE_CSOCK_NAME",
        "TPM2_PKCS11_STORE", "TPM2_PKCS11_TCTI", "TPM2_PKCS11_LOG_LEVEL",
    ]

    public static let maxEntries = 32
    public static let maxValueBytes = 4096

    /// Why `name` cannot be a driver variable, or nil when it can. Refused:
    /// anything that changes how the dynamic loader, the C library or
    /// keyshare itself behaves, since the variables are set in the agent's
    /// (or the application's) own process while the driver initialises.
    public static func refusal(_ name: String) -> String? {
        let u = Array(name.utf8)
        guard !u.isEmpty, u.count <= 128,
              u.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F }),
              !(u[0] >= 0x30 && u[0] <= 0x39) else {
            return "not a variable name (letters, digits and '_', not starting with a digit, at most 128)"
        }
        let upper = name.uppercased()
        for prefix in ["LD_", "KEYSHARE_", "MALLOC_", "OPENSSL_", "XDG_"] where upper.hasPrefix(prefix) {
            return "\(prefix)* changes how the dynamic loader, the C library or keyshare itself behaves"
        }
        let reserved: Set<String> = [
            "PATH", "HOME", "GLIBC_TUNABLES", "TMPDIR", "GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN",
            "LOCPATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TZDIR", "TZ",
        ]
        if reserved.contains(upper) { return "\(name) changes how the dynamic loader, the C library or keyshare itself behaves" }
        return nil
    }

    /// Why this whole set cannot be stored, or nil.
    public static func problem(_ entries: [String: String]) -> String? {
        guard entries.count <= maxEntries else { return "at most \(maxEntries) variables per driver" }
        for (name, value) in entries.sorted(by: { $0.key < $1.key }) {
            if let why = refusal(name) { return "--env \(name): refused: \(why)" }
            guard value.utf8.count <= maxValueBytes, !value.utf8.contains(0) else {
                return "--env \(name): a value is at most \(maxValueBytes) bytes, without NUL"
            }
        }
        return nil
    }

    /// The stored form: NAME=VALUE entries, sorted by name, NUL-separated.
    static func encode(_ entries: [String: String]) -> [UInt8] {
        var out: [UInt8] = []
        for (i, (name, value)) in entries.sorted(by: { $0.key < $1.key }).enumerated() {
            if i > 0 { out.append(0) }
            out += Array(name.utf8) + [0x3D] + Array(value.utf8)
        }
        return out
    }

    /// Entries that do not pass `refusal` (a store edited by hand) are dropped.
    static func decode(_ bytes: [UInt8]) -> [String: String] {
        var out: [String: String] = [:]
        for entry in bytes.split(separator: 0) {
            guard let eq = entry.firstIndex(of: 0x3D) else { continue }
            let name = String(decoding: entry[entry.startIndex..<eq], as: UTF8.self)
            guard refusal(name) == nil else { continue }
            out[name] = String(decoding: entry[(eq + 1)...], as: UTF8.self)
        }
        return out
    }
}
