#if canImport(Glibc)
import Glibc
#endif
import Keychain
import KeyshareCrypto

/// How a driver's stored variables reach the module, one rule wherever it
/// is loaded: the module sees the loading process's environment without the
/// known configuration variables (DriverEnvironment.configurationNames),
/// plus the variables stored with the driver. A child (`driver snapshot`,
/// `driver events`) is started with that environment; a module loaded in
/// this process (the agent, an in-process application) gets it for its
/// dlopen and C_Initialize only, where modules read their configuration.
extension DriverEnvironment {
    /// Serialises the set/restore of this process's environment: two
    /// drivers initialising at once must not see each other's values.
    static let lock = Lock()

    /// `stored` applied to this process's environment, as NAME=VALUE strings
    /// for a child's envp.
    static func childEnvironment(_ stored: [String: String]) -> [String] {
        let usable = stored.filter { refusal($0.key) == nil }
        let dropped = Set(configurationNames).union(usable.keys)
        var out: [String] = []
        var e: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = environ
        while let here = e, let p = here.pointee {
            let entry = String(cString: p)
            let name = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            if !dropped.contains(name) { out.append(entry) }
            e = here.successor()
        }
        return out + usable.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
    }

    /// Runs `body` (a module's dlopen or C_Initialize) with `stored` applied
    /// to this process's environment, and puts the previous values back right
    /// after. nil: the environment is left as it is (a child started with
    /// `childEnvironment` already has it). Only what differs is touched.
    static func applying<T>(_ stored: [String: String]?, _ body: () throws -> T) rethrows -> T {
        guard let stored else { return try body() }
        return try lock.withLock {
            let usable = stored.filter { refusal($0.key) == nil }
            var saved: [(String, String?)] = []
            for name in Set(configurationNames).union(usable.keys).sorted() {
                let current = getenv(name).map { String(cString: $0) }
                let wanted = usable[name]
                guard current != wanted else { continue }
                saved.append((name, current))
                if let wanted { setenv(name, wanted, 1) } else { unsetenv(name) }
            }
            defer {
                for (name, value) in saved {
                    if let value { setenv(name, value, 1) } else { unsetenv(name) }
                }
            }
            return try body()
        }
    }
}
