import FoundationEssentials
import Glibc
import KeySharing

/// Firefox's enterprise policy file (`/etc/firefox/policies/policies.json`
/// on Linux), where the package registers the module for every user and
/// profile: `SecurityDevices` → `Add` → `keyshare`: the module's path.
/// Firefox adds the module to each profile at start (matched by library
/// path, so a profile where `keyshare browser setup` registered it already
/// is left alone). The file is merged, never replaced: every other policy
/// and device stays; a file that is not a JSON object is left untouched and
/// reported.
struct FirefoxPolicy {
    static let defaultPath = "/etc/firefox/policies/policies.json"
    let path: String

    enum Action {
        case add(library: String), remove, purge
        var adds: Bool { if case .add = self { true } else { false } }
        var purges: Bool { if case .purge = self { true } else { false } }
    }

    /// What `apply` did, for one line of output.
    enum Outcome: String { case written, unchanged, deleted }

    /// Applies `action` and writes the file when it changed. `add` also takes
    /// keyshare out of `Delete`; `remove` takes it out of `Add` and puts it in
    /// `Delete`, so profiles drop the module whose library is gone; `purge`
    /// takes it out of both, and deletes the file when nothing else is left.
    func apply(_ action: Action) throws -> Outcome {
        let existing = try read()
        if existing == nil, !action.adds { return .unchanged }  // no file: nothing to take out
        var root = existing ?? [:]
        var policies = try object(root["policies"], "policies") ?? [:]
        var devices = try object(policies["SecurityDevices"], "policies.SecurityDevices") ?? [:]
        // The old form (names to paths, no Add/Delete) means the same as {"Add": {...}}.
        if !devices.isEmpty, devices["Add"] == nil, devices["Delete"] == nil { devices = ["Add": .object(devices)] }
        var add = try object(devices["Add"], "SecurityDevices.Add") ?? [:]
        guard devices["Delete"] == nil || devices["Delete"]?.array != nil else {
            throw CLIError("\(path): SecurityDevices.Delete is not a list; the file was left as it is")
        }
        var delete = devices["Delete"]?.array ?? []
        let name = NSSModuleDatabase.moduleName
        let deleteHasUs = delete.contains(.string(name))
        // remove and purge change only a file that names keyshare (remove: in Add).
        if !action.adds, add[name] == nil, !(action.purges && deleteHasUs) { return .unchanged }
        switch action {
        case .add(let library):
            add[name] = .string(library)
            delete.removeAll { $0 == .string(name) }
        case .remove:
            add[name] = nil
            if !deleteHasUs { delete.append(.string(name)) }
        case .purge:
            add[name] = nil
            delete.removeAll { $0 == .string(name) }
        }
        devices["Add"] = add.isEmpty ? nil : .object(add)
        devices["Delete"] = delete.isEmpty ? nil : .array(delete)
        policies["SecurityDevices"] = devices.isEmpty ? nil : .object(devices)
        root["policies"] = .object(policies)
        if let existing, try Self.render(existing) == Self.render(root) { return .unchanged }
        // A file that held keyshare's entry and nothing else goes with it.
        if action.purges, policies.isEmpty, root.count == 1 {
            guard unlink(path) == 0 || errno == ENOENT else {
                throw CLIError("cannot delete \(path): \(String(cString: strerror(errno)))")
            }
            return .deleted
        }
        try write(root)
        return .written
    }

    /// The file's JSON object; nil when there is no file.
    private func read() throws -> [String: JSONValue]? {
        var st = stat()
        guard lstat(path, &st) == 0 else {
            if errno == ENOENT { return nil }
            throw CLIError("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        guard st.st_mode & S_IFMT == S_IFREG else { throw CLIError("refusing \(path): not a regular file") }
        guard st.st_size <= 4 << 20, let data = FileManager.default.contents(atPath: path) else {
            throw CLIError("cannot read \(path) (larger than 4 MiB, or unreadable)")
        }
        if data.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return [:] }
        guard let object = (try? JSONValue.parse(data))?.object else {
            throw CLIError("\(path) is not a JSON object; it was left as it is (fix it, then run this again)")
        }
        return object
    }

    private func object(_ value: JSONValue?, _ what: String) throws -> [String: JSONValue]? {
        guard let value else { return nil }
        guard let o = value.object else { throw CLIError("\(path): \(what) is not an object; the file was left as it is") }
        return o
    }

    /// Sorted keys, two-space indents: the same content always gives the same
    /// bytes (the package's postrm recognises the file it left).
    static func render(_ root: [String: JSONValue]) throws -> [UInt8] {
        try JSONValue.object(root).rendered(pretty: true) + [0x0A]
    }

    private func write(_ root: [String: JSONValue]) throws {
        let dir = PathString.directory(path)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        var st = stat()
        let mode: mode_t = lstat(path, &st) == 0 ? st.st_mode & 0o777 : 0o644
        try OutputFile.write(try Self.render(root), to: path, existing: .replaceRegularFile, mode: mode)
    }
}
