#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import Keychain
import KeyshareCrypto

/// The checks of `keyshare doctor`, in the order they are shown. Each returns
/// its line and records problems with their fix; none of them creates, starts
/// or changes anything (the store is opened read-only and only when its
/// directory and files pass the store's own SecureDirectory rule).
final class DoctorChecks {
    let now: Int
    var problems: [DoctorProblem] = []
    /// The store, read-only, once `store()` found it sound; nil otherwise.
    private var opened: KeychainStore?
    private let env = ProcessInfo.processInfo.environment

    init(now: Int) { self.now = now }

    private func problem(_ check: String, _ severity: DoctorProblem.Severity, _ what: String, fix: String) {
        problems.append(DoctorProblem(check: check, severity: severity, problem: what, fix: fix))
    }

    private var home: String {
        if let h = env["HOME"], h.hasPrefix("/") { return h }
        return BrowserProfiles.home
    }

    // MARK: store

    func store() -> DoctorCheck {
        let dir = KeychainStore.defaultHome()
        let source = !(env["KEYSHARE_HOME"] ?? "").isEmpty ? "KEYSHARE_HOME"
            : !(env["XDG_DATA_HOME"] ?? "").isEmpty ? "XDG_DATA_HOME" : "default"
        var facts: [String: JSONField] = ["home": .string(dir), "source": .string(source)]
        let db = dir + "/keychain.db"
        var st = stat()
        guard lstat(dir, &st) == 0 else {
            facts["exists"] = false
            // What mkdir -p would build on must already pass the rule.
            var existing = dir
            while lstat(existing, &st) != 0 && existing != "/" { existing = Doctor.parent(existing) }
            let before = problems.count
            for (what, fix) in Doctor.pathProblems(existing, leaf: false) { problem("store", .error, what, fix: fix) }
            facts["secure"] = .bool(problems.count == before)
            return DoctorCheck(check: "store", status: "ok", summary: "\(dir): not created yet (the first `keyshare token create` makes it)",
                               facts: facts)
        }
        facts["exists"] = true
        let before = problems.count
        for (what, fix) in Doctor.pathProblems(dir, leaf: true) { problem("store", .error, what, fix: fix) }
        if problems.count == before {
            // The authoritative rule, in case it is stricter than the walk above.
            do { try SecureDirectory.check(path: dir) } catch {
                problem("store", .error, "\(error)", fix: "ls -ld \(Doctor.quote(dir)) and each parent directory, then chmod go-w or chown as the problem says")
            }
        }
        if problems.count == before, stat(dir, &st) == 0, st.st_mode & 0o077 != 0 {
            problem("store", .warning, "\(dir) is readable by other users (mode \(Doctor.mode(st)))", fix: "chmod 700 \(Doctor.quote(dir))")
        }
        var hasDB = false
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let path = db + suffix
            guard lstat(path, &st) == 0 else { continue }
            if suffix.isEmpty { hasDB = true }
            for (severity, what, fix) in Doctor.fileProblems(path, st, mustHaveData: suffix.isEmpty) {
                problem("store", severity, what, fix: fix)
            }
        }
        facts["keychainDB"] = .bool(hasDB)
        let sound = problems.count == before
        facts["secure"] = .bool(!problems[before...].contains { $0.severity == .error })
        guard hasDB else {
            return DoctorCheck(check: "store", status: "ok", summary: "\(dir): no keychain.db yet (the first `keyshare token create` makes it)",
                               facts: facts)
        }
        // Opened as every command opens it (a read-only SQLite handle cannot open a WAL store whose
        // -shm is gone), and only when sound: an open tightens loose modes, and doctor changes nothing.
        guard sound else {
            return DoctorCheck(check: "store", status: "error", summary: "\(db): not opened (see the problems below)", facts: facts)
        }
        do {
            let store = try KeychainStore(home: dir)
            opened = store
            let tokens = try store.tokens()
            facts["tokens"] = .int(tokens.count)
            return DoctorCheck(check: "store", status: "ok", summary: "\(db) (\(tokens.count) token\(tokens.count == 1 ? "" : "s"))", facts: facts)
        } catch {
            problem("store", .error, "\(db) cannot be opened: \(ErrorText.describe(error))",
                    fix: "keyshare token list (shows the same error; restore keychain.db from a backup if it is damaged)")
            return DoctorCheck(check: "store", status: "error", summary: "\(db): cannot be opened", facts: facts)
        }
    }

    // MARK: agent

    func agent() -> DoctorCheck {
        let socket = AgentCommand.socketPath
        var facts: [String: JSONField] = ["socket": .string(socket)]
        do {
            guard let s = try AgentCommand.status() else {
                facts["running"] = false
                return DoctorCheck(check: "agent", status: "ok",
                                   summary: "not running (socket \(socket)); the module and the CLI start it when needed",
                                   facts: facts)
            }
            facts["running"] = true
            for key in ["pid", "version", "protocol", "store"] { facts[key] = .optional(s[key]) }
            let version = s["version"] ?? "?"
            if version != KeyshareVersion.string {
                problem("agent", .warning, "the running agent (pid \(s["pid"] ?? "?")) is keyshare \(version), this program is \(KeyshareVersion.string) (started before an upgrade)",
                        fix: "keyshare agent restart")
            }
            return DoctorCheck(check: "agent", status: "ok",
                               summary: "running, pid \(s["pid"] ?? "?"), keyshare \(version), protocol \(s["protocol"] ?? "?"), socket \(socket)",
                               facts: facts)
        } catch {
            facts["running"] = .null
            problem("agent", .error, "the agent at \(socket) cannot be asked: \(ErrorText.describe(error))", fix: "keyshare agent restart")
            return DoctorCheck(check: "agent", status: "error", summary: "socket \(socket): no answer", facts: facts)
        }
    }

    // MARK: OpenSSL

    /// A bundled OpenSSL older than this is a warning: OpenSSL has shipped security releases every few months.
    static let bundledMaximumAgeDays = 180

    func openssl() -> DoctorCheck {
        let bundled = CryptoEngine.isBundled
        let age = CryptoEngine.releaseAge(now: now)
        let facts: [String: JSONField] = [
            "version": .string(CryptoEngine.version), "linkage": .string(bundled ? "bundled" : "system"),
            "releaseDate": .optional(CryptoEngine.releaseDate), "ageDays": age.map(JSONField.int) ?? .null,
            "postQuantum": .bool(CryptoEngine.hasPostQuantum),
        ]
        guard bundled else {
            let pq = CryptoEngine.hasPostQuantum ? "" : "; no post-quantum mechanisms (they need OpenSSL 3.5)"
            return DoctorCheck(check: "openssl", status: "ok",
                               summary: "\(CryptoEngine.name), the system's (linked dynamically: its security updates apply)\(pq)", facts: facts)
        }
        let released = CryptoEngine.releaseDate.map { "released \($0)" + (age.map { ", \($0) days ago" } ?? "") } ?? "release date unknown"
        if let age, age > Self.bundledMaximumAgeDays {
            let installed = AgentControl.program.hasPrefix("/usr/")
            problem("openssl", .warning,
                    "the bundled \(CryptoEngine.name) was released \(age) days ago and gets no security update from the system",
                    fix: installed ? "sudo apt-get update && sudo apt-get install --only-upgrade keyshare"
                        : "make openssl-update VERSION=X.Y.Z && make build (X.Y.Z: Debian 13's current OpenSSL)")
        }
        return DoctorCheck(check: "openssl", status: "note",
                           summary: "\(CryptoEngine.name), bundled (linked statically; \(released)): not updated by the system's security updates",
                           facts: facts)
    }

    // MARK: p11-kit

    func p11kit() -> DoctorCheck {
        // p11-kit's own rule: ~/.config/pkcs11/modules counts unless /etc/pkcs11/pkcs11.conf says
        // user-config: none, and never for root ("skipping user config in program running as root").
        let userDir = home + "/.config/pkcs11/modules"
        let isRoot = geteuid() == 0
        let userConfig = !isRoot && !(Doctor.read("/etc/pkcs11/pkcs11.conf") ?? "").split(separator: "\n").contains { (line: Substring) in
            line.filter { $0 != " " } == "user-config:none"
        }
        let fixDir = userConfig ? userDir : "/etc/pkcs11/modules"
        var dirs = ["/etc/pkcs11/modules", "/usr/share/p11-kit/modules"]
        if userConfig { dirs.insert(userDir, at: 0) }
        let moduleDir = "/usr/lib/\(BrowserProfiles.multiarch)/pkcs11"
        var files: [String] = [], working: [String] = []
        for dir in dirs {
            for name in ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted() where name.hasSuffix(".module") {
                let file = dir + "/" + name
                guard let text = Doctor.read(file) else { continue }
                for line in text.split(separator: "\n") {
                    let l = line.trimmingBlanks()
                    guard l.hasPrefix("module:") else { continue }
                    let value = l.dropFirst(7).trimmingBlanks()
                    guard value.split(separator: "/").last == "libkeyshare-pkcs11.so" else { continue }
                    let resolved = value.hasPrefix("/") ? value : moduleDir + "/" + value
                    files.append(file)
                    if access(resolved, R_OK) == 0 {
                        working.append(resolved)
                    } else {
                        problem("p11-kit", .error, "\(file) names \(resolved), which does not exist",
                                fix: file.hasPrefix(home) ? "rm \(Doctor.quote(file))" : "sudo apt-get install --reinstall keyshare")
                    }
                }
            }
        }
        let installed = access("/usr/bin/p11-kit", X_OK) == 0 || access("/usr/share/p11-kit", F_OK) == 0
        var facts: [String: JSONField] = ["moduleFiles": .strings(files), "registered": .bool(!working.isEmpty),
                                          "installed": .bool(installed), "userConfig": .bool(userConfig)]
        if !working.isEmpty {
            facts["module"] = .string(working[0])
            return DoctorCheck(check: "p11-kit", status: "ok", summary: "registered: \(files[0]) loads \(working[0])", facts: facts)
        }
        guard installed else {
            return DoctorCheck(check: "p11-kit", status: "note", summary: "p11-kit is not installed (applications load the module by path)", facts: facts)
        }
        if files.isEmpty {
            if let module = try? BrowserProfiles.module(nil) {
                let ignored = isRoot && access(userDir + "/keyshare.module", F_OK) == 0
                    ? "; p11-kit reads no user configuration for root, so \(userDir) is ignored" : ""
                problem("p11-kit", .warning,
                        "keyshare is not registered with p11-kit (GnuTLS, p11tool and p11-kit-proxy do not see its tokens\(ignored))",
                        fix: "mkdir -p \(Doctor.quote(fixDir)) && printf 'module: %s\\n' \(Doctor.quote(module)) > \(Doctor.quote(fixDir + "/keyshare.module"))")
            } else {
                problem("p11-kit", .error, "libkeyshare-pkcs11.so is neither beside this program nor installed",
                        fix: "sudo apt-get install keyshare")
            }
        }
        return DoctorCheck(check: "p11-kit", status: "warning", summary: "keyshare is not registered", facts: facts)
    }

    // MARK: browsers

    func browsers() -> DoctorCheck {
        var facts: [String: JSONField] = [:]
        var parts: [String] = []
        let chromium = BrowserProfiles.chromium
        switch Doctor.nssRegistration(chromium) {
        case nil:
            facts["chromium"] = "no database"
            parts.append("chromium: no NSS database yet")
        case .some(.registered):
            facts["chromium"] = "registered"
            parts.append("chromium: registered")
        case .some(let state):
            facts["chromium"] = .string(state.rawValue)
            parts.append("chromium: \(state.rawValue)")
            problem("browsers", .warning, "Chromium's NSS database \(chromium) \(state == .missingLibrary ? "names a keyshare module that does not exist" : "does not load keyshare") (client certificates are not offered)",
                    fix: "keyshare browser setup --chromium")
        }
        let profiles = BrowserProfiles.firefox()
        let policy = Doctor.read(FirefoxPolicy.defaultPath).map { $0.contains("SecurityDevices") && $0.contains("\"keyshare\"") } ?? false
        let missing = profiles.filter { Doctor.nssRegistration($0) != .registered }
        facts["firefoxProfiles"] = .int(profiles.count)
        facts["firefoxRegistered"] = .int(profiles.count - missing.count)
        facts["firefoxPolicy"] = .bool(policy)
        if profiles.isEmpty {
            parts.append("firefox: no profile" + (policy ? " (the policy registers keyshare in new ones)" : ""))
        } else {
            parts.append("firefox: \(profiles.count - missing.count) of \(profiles.count) profile\(profiles.count == 1 ? "" : "s") registered"
                + (policy ? ", policy registers the rest at their start" : ""))
            if !missing.isEmpty && !policy {
                problem("browsers", .warning, "\(missing.count) Firefox profile\(missing.count == 1 ? " does" : "s do") not load keyshare (\(missing.joined(separator: ", ")))",
                        fix: "keyshare browser setup --firefox")
            }
        }
        return DoctorCheck(check: "browsers", status: "ok", summary: parts.joined(separator: "; "), facts: facts)
    }

    // MARK: TPM

    func tpm() -> DoctorCheck {
        let tcti = opened?.tpmTCTI() ?? ((env["KEYSHARE_TCTI"] ?? "").isEmpty ? "device:/dev/tpmrm0" : env["KEYSHARE_TCTI"]!)
        var facts: [String: JSONField] = ["tcti": .string(tcti),
                                          "tctiSource": .string(!(env["KEYSHARE_TCTI"] ?? "").isEmpty ? "KEYSHARE_TCTI" : "store or default")]
        var present: Bool?, usable: Bool?
        var device = tcti
        if tcti.hasPrefix("device:") || tcti == "device" {
            let dev = tcti.count > 7 ? String(tcti.dropFirst(7)) : "/dev/tpmrm0"
            device = dev
            present = access(dev, F_OK) == 0
            usable = present == true && access(dev, R_OK | W_OK) == 0
        }
        facts["present"] = present.map(JSONField.bool) ?? .null
        facts["usable"] = usable.map(JSONField.bool) ?? .null
        var soft: [TokenRecord] = [], bound: [TokenRecord] = [], tpmTokens: [TokenRecord] = []
        if let store = opened, let tokens = try? store.tokens() {
            for t in tokens where t.hasPINs {
                if store.isTPMToken(t) { tpmTokens.append(t) }
                else if (try? store.tokenBindingPCRs(t.tokenID)) != nil { bound.append(t) } else { soft.append(t) }
            }
        }
        facts["tpmTokens"] = .int(tpmTokens.count)
        facts["boundTokens"] = .int(bound.count)
        facts["unboundSoftTokens"] = .strings(soft.map(\.label))
        let needing = (tpmTokens + bound).map(\.label)
        let counts = "\(tpmTokens.count) TPM token\(tpmTokens.count == 1 ? "" : "s"), \(bound.count) soft token\(bound.count == 1 ? "" : "s") bound, \(soft.count) not bound"
        if present == false {
            if !needing.isEmpty {
                problem("tpm", .error, "token\(needing.count == 1 ? "" : "s") \(needing.joined(separator: ", ")) need\(needing.count == 1 ? "s" : "") the TPM at \(device), which is absent",
                        fix: "keyshare token tpm-config --tcti TCTI (the TPM they were made on; see keyshare-token-tpm-config(1))")
            }
            return DoctorCheck(check: "tpm", status: "ok", summary: "no TPM (\(device) absent); \(counts)", facts: facts)
        }
        if usable == false {
            let user = env["USER"] ?? "$USER"
            if !needing.isEmpty {
                problem("tpm", .error, "\(device) is not readable and writable by this user, and token\(needing.count == 1 ? "" : "s") \(needing.joined(separator: ", ")) need\(needing.count == 1 ? "s" : "") it",
                        fix: "sudo usermod -aG tss \(user) (then log in again)")
            }
            return DoctorCheck(check: "tpm", status: "note", summary: "TPM at \(device), not accessible to this user (group tss); \(counts)", facts: facts)
        }
        if present == true {
            for t in soft {
                problem("tpm", .warning, "soft token \(t.label) is not sealed to this machine's TPM (a copy of keychain.db can be attacked offline)",
                        fix: "keyshare token bind --tpm --token \(Doctor.quote(t.label))")
            }
        }
        let at = present == nil ? "TCTI \(tcti) (not probed)" : "TPM at \(device)"
        return DoctorCheck(check: "tpm", status: "ok", summary: "\(at); \(counts)", facts: facts)
    }

    // MARK: cards

    func cards() -> DoctorCheck {
        let socket = (env["PCSCLITE_CSOCK_NAME"] ?? "").isEmpty ? "/run/pcscd/pcscd.comm" : env["PCSCLITE_CSOCK_NAME"]!
        var st = stat()
        let pcscd = stat(socket, &st) == 0 && st.st_mode & S_IFMT == S_IFSOCK
        let drivers = opened.flatMap { try? $0.drivers() } ?? []
        var facts: [String: JSONField] = ["pcscdSocket": .string(socket), "pcscd": .bool(pcscd),
                                          "drivers": .strings(drivers.map(\.name))]
        for d in drivers {
            if access(d.modulePath, R_OK) != 0 {
                problem("cards", .error, "driver \(d.name): its module \(d.modulePath) does not exist",
                        fix: "keyshare driver remove \(Doctor.quote(d.name))")
            } else if !d.status.isEmpty {
                problem("cards", .warning, "driver \(d.name): its last poll failed (\(d.status))",
                        fix: "keyshare driver remove \(Doctor.quote(d.name)) && keyshare driver add --module \(Doctor.quote(d.modulePath)) --name \(Doctor.quote(d.name))")
            }
            let usesPCSC = (d.name + d.modulePath).lowercased().contains("opensc")
            if usesPCSC && !pcscd {
                problem("cards", .warning, "driver \(d.name) reads cards through pcscd, whose socket \(socket) is absent",
                        fix: "sudo systemctl enable --now pcscd.socket")
            }
        }
        let pcsc = pcscd ? "pcscd socket \(socket)" : "no pcscd socket"
        if drivers.isEmpty {
            let ma = BrowserProfiles.multiarch
            let candidates: [String] = ["/usr/lib/\(ma)/opensc-pkcs11.so", "/usr/lib/\(ma)/pkcs11/opensc-pkcs11.so"]
            let opensc = candidates.first { access($0, R_OK) == 0 }
            facts["openscAvailable"] = .optional(opensc)
            let hint = opensc.map { "; OpenSC is installed: keyshare driver add --module \($0) makes smart cards appear" } ?? ""
            return DoctorCheck(check: "cards", status: "ok", summary: "no card drivers configured; \(pcsc)\(hint)", facts: facts)
        }
        return DoctorCheck(check: "cards", status: "ok",
                           summary: "drivers: \(drivers.map(\.name).joined(separator: ", ")); \(pcsc)", facts: facts)
    }
}
