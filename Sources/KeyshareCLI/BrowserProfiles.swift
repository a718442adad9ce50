import FoundationEssentials
import Glibc

/// Where the browsers of this user keep their NSS databases, and where the
/// module to register is.
enum BrowserProfiles {
    static var home: String {
        if let h = ProcessInfo.processInfo.environment["HOME"], h.hasPrefix("/") { return h }
        return homeDirectory()
    }

    /// Chromium's (and Chrome's, and other NSS programs') user database.
    static var chromium: String { home + "/.pki/nssdb" }

    /// The profile directories that profiles.ini lists under Firefox's
    /// classic directory (~/.mozilla/firefox) and its XDG one
    /// (~/.config/mozilla/firefox); only those that exist.
    static func firefox() -> [String] {
        let env = ProcessInfo.processInfo.environment
        let config = env["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.config"
        var out: [String] = []
        for root in [home + "/.mozilla/firefox", config + "/mozilla/firefox"] {
            guard let data = FileManager.default.contents(atPath: root + "/profiles.ini"), data.count <= 1 << 20,
                  let text = String(data: data, encoding: .utf8) else { continue }
            for dir in profileDirectories(ini: text, root: root) where !out.contains(dir) {
                var st = stat()
                if stat(dir, &st) == 0, st.st_mode & S_IFMT == S_IFDIR { out.append(dir) }
            }
        }
        return out
    }

    /// The Path= of every [ProfileN] section, made absolute when IsRelative=1 (the default).
    static func profileDirectories(ini: String, root: String) -> [String] {
        var out: [String] = []
        var inProfile = false, path: String?, relative = true
        func flush() {
            if inProfile, let p = path, !p.isEmpty, !p.contains("\n") {
                out.append(relative ? root + "/" + p : p)
            }
            path = nil
            relative = true
        }
        for raw in ini.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingBlanks()
            if line.hasPrefix("[") {
                flush()
                inProfile = line.hasPrefix("[Profile")
            } else if line.hasPrefix("Path=") {
                path = String(line.dropFirst(5))
            } else if line.hasPrefix("IsRelative=") {
                relative = line.dropFirst(11) != "0"
            }
        }
        flush()
        return out
    }

    /// The module to register: `given`, else the one beside this program
    /// (a build tree), else the one the package installs in p11-kit's module
    /// directory. Always an absolute, resolved path: Firefox matches its
    /// policy's device to a profile's module by the library path string.
    static func module(_ given: String?) throws -> String {
        if let given {
            guard let resolved = resolve(given) else { throw CLIError("--module \(given): no such file") }
            return resolved
        }
        var candidates: [String] = []
        if let exe = resolve("/proc/self/exe") {
            let dir = PathString.directory(exe)
            candidates += [dir + "/libkeyshare-pkcs11.so", dir + "/../lib/\(multiarch)/pkcs11/libkeyshare-pkcs11.so"]
        }
        candidates.append("/usr/lib/\(multiarch)/pkcs11/libkeyshare-pkcs11.so")
        for c in candidates { if let r = resolve(c) { return r } }
        throw CLIError("libkeyshare-pkcs11.so not found (looked in \(candidates.joined(separator: ", "))); give --module PATH")
    }

    static var multiarch: String {
        #if arch(x86_64)
        "x86_64-linux-gnu"
        #elseif arch(arm64)
        "aarch64-linux-gnu"
        #else
        "linux-gnu"
        #endif
    }

    /// realpath(3) of a regular file; nil when there is none.
    static func resolve(_ path: String) -> String? {
        guard let r = realpath(path, nil) else { return nil }
        defer { free(r) }
        let s = String(cString: r)
        var st = stat()
        return stat(s, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG ? s : nil
    }
}
