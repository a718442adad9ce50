import FoundationEssentials
import Glibc
import KeySharing

/// The module list of an NSS database directory (`sql:DIR`): its pkcs11.txt,
/// edited as modutil writes it (a block of `library=` and `name=` lines, a
/// blank line between blocks), so Chromium's `~/.pki/nssdb` and Firefox's
/// profiles load libkeyshare-pkcs11.so with no modutil on the machine.
/// Every other block is kept byte for byte; the file is replaced atomically.
struct NSSModuleDatabase {
    /// The name the module is registered under here and in Firefox's policy.
    static let moduleName = "keyshare"

    let directory: String
    var path: String { directory + "/pkcs11.txt" }

    enum Change: String { case added, updated, unchanged, removed, absent }

    /// Blocks of pkcs11.txt, each its lines without the separating blank lines.
    static func blocks(_ text: String) -> [[String]] {
        var out: [[String]] = [], current: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.trimmingBlanks().isEmpty {
                if !current.isEmpty { out.append(current); current = [] }
            } else {
                current.append(line)
            }
        }
        if !current.isEmpty { out.append(current) }
        return out
    }

    static func value(_ key: String, in block: [String]) -> String? {
        block.first { $0.hasPrefix(key + "=") }.map { String($0.dropFirst(key.count + 1)) }
    }

    /// keyshare's block: by its name, or by a library that is a keyshare module (another build's path).
    static func isKeyshare(_ block: [String]) -> Bool {
        value("name", in: block) == moduleName
            || value("library", in: block).map { PathString.lastComponent($0) == "libkeyshare-pkcs11.so" } == true
    }

    static func render(_ blocks: [[String]]) -> String {
        blocks.map { $0.joined(separator: "\n") + "\n" }.joined(separator: "\n") + (blocks.isEmpty ? "" : "\n")
    }

    /// NSS's own first block for a new database, as certutil -N writes it; NSS
    /// makes cert9.db and key4.db beside it when a program first opens the
    /// directory for writing (Chromium does at start).
    func internalBlock() -> [String] {
        ["library=", "name=NSS Internal PKCS #11 Module",
         "parameters=configdir='sql:\(directory)' certPrefix='' keyPrefix='' secmod='secmod.db' flags= updatedir='' "
             + "updateCertPrefix='' updateKeyPrefix='' updateid='' updateTokenDescription='' ",
         "NSS=Flags=internal,critical trustOrder=75 cipherOrder=100 slotParams=(1={slotFlags=[ECC,RSA,DSA,DH,RC2,RC4,DES,"
             + "RANDOM,SHA1,MD5,MD2,SSL,TLS,AES,Camellia,SEED,SHA256,SHA512] askpw=any timeout=30})"]
    }

    /// The current text, nil when there is no pkcs11.txt. Refuses anything but a regular file.
    func read() throws -> String? {
        var st = stat()
        guard lstat(path, &st) == 0 else {
            if errno == ENOENT { return nil }
            throw CLIError("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        guard st.st_mode & S_IFMT == S_IFREG else { throw CLIError("refusing \(path): not a regular file") }
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw CLIError("cannot read \(path) as text")
        }
        return text
    }

    /// Registers `library` (idempotent: a block naming it already is left as
    /// it is; a keyshare block naming another library is pointed at this one).
    func register(library: String) throws -> Change {
        if try read() == nil { makeDatabase() }
        let existing = try read()
        var blocks = existing.map(Self.blocks) ?? [internalBlock()]
        let ours = blocks.indices.filter { Self.isKeyshare(blocks[$0]) }
        if ours.count == 1, Self.value("library", in: blocks[ours[0]]) == library { return .unchanged }
        let block = ["library=\(library)", "name=\(Self.moduleName)"]
        let change: Change
        if let first = ours.first {
            blocks[first] = block
            for i in ours.dropFirst().reversed() { blocks.remove(at: i) }
            change = .updated
        } else {
            blocks.append(block)
            change = .added
        }
        try write(Self.render(blocks), creating: existing == nil)
        return change
    }

    /// Takes keyshare's block out; every other block stays.
    func unregister() throws -> Change {
        guard let existing = try read() else { return .absent }
        let blocks = Self.blocks(existing)
        let kept = blocks.filter { !Self.isKeyshare($0) }
        guard kept.count != blocks.count else { return .absent }
        try write(Self.render(kept), creating: false)
        return .removed
    }

    /// Whether pkcs11.txt names `library` under keyshare's block.
    func registered(library: String) throws -> Bool {
        guard let text = try read() else { return false }
        return Self.blocks(text).contains { Self.isKeyshare($0) && Self.value("library", in: $0) == library }
    }

    /// A new database as `certutil -N --empty-password` makes it (cert9.db,
    /// key4.db, pkcs11.txt), when libnss3-tools is installed: programs that
    /// open it read-only (modutil -list) need the files. Without certutil,
    /// pkcs11.txt alone: Chromium makes the rest when it first starts.
    private func makeDatabase() {
        let candidates: [String] = ["/usr/bin/certutil", "/bin/certutil"]
        guard let certutil = candidates.first(where: { access($0, X_OK) == 0 }) else { return }
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                 attributes: [.posixPermissions: 0o700])
        _ = try? Subprocess.run(certutil, ["-N", "-d", "sql:" + directory, "--empty-password"], timeout: 30)
    }

    private func write(_ text: String, creating: Bool) throws {
        if creating {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
        var st = stat()
        let mode: mode_t = lstat(path, &st) == 0 ? st.st_mode & 0o777 : 0o600
        try OutputFile.write(Array(text.utf8), to: path, existing: .replaceRegularFile, mode: mode)
    }
}
