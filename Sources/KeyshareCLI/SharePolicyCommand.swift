import ArgumentParser
import FoundationEssentials
import Glibc
import Keychain
import KeySharing

/// A member of the access group, as given on the command line.
struct RuleOptions: ParsableArguments {
    @Option(help: "An executable (resolved to its real path, as /proc/PID/exe shows it).") var exe: String?
    @Option(help: "Every process of this user (only your own uid: other users are always refused).") var uid: UInt32?

    func rule() throws -> AccessPolicy.Rule {
        guard (exe == nil) != (uid == nil) else { throw ValidationError("give exactly one of --exe PATH or --uid UID") }
        if let uid {
            guard uid == getuid() else {
                throw CLIError("uid \(uid) is another user; the service always refuses other users' processes")
            }
            return AccessPolicy.Rule(uid: uid)
        }
        guard let exe, let resolved = realpath(exe, nil) else {
            throw CLIError("cannot resolve \(exe ?? ""): \(String(cString: strerror(errno)))")
        }
        defer { free(resolved) }
        let path = String(cString: resolved)
        guard access(path, X_OK) == 0 else { throw CLIError("\(path) is not an executable file") }
        return AccessPolicy.Rule(exe: path)
    }
}

enum PolicyStore {
    static var home: String { KeychainStore.defaultHome() }

    static func load() throws -> AccessPolicy {
        do {
            return try AccessPolicyFile.load(home: home) ?? AccessPolicy()
        } catch {
            throw CLIError("\(error)")
        }
    }

    static func save(_ policy: AccessPolicy) throws {
        try SecureFile.makePrivateDirectory(home)
        try AccessPolicyFile.save(policy, home: home)
    }
}

struct ShareAllow: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "allow", abstract: "Let a program (or all your processes) fetch the shared password from the service.")
    @OptionGroup var member: RuleOptions
    @Option(help: "Set the shared group ID of the access-control group.") var group: String?
    @OptionGroup var output: JSONOption

    func run() throws {
        let rule = try member.rule()
        var policy = try PolicyStore.load()
        policy.deny.removeAll { $0 == rule }
        if !policy.allow.contains(rule) { policy.allow.append(rule) }
        if let group { policy.group = group }
        try PolicyStore.save(policy)
        try Console.report(output.json, "allowed \(rule) (group \(policy.group))", ["allowed": .string("\(rule)"), "group": .string(policy.group)])
    }
}

struct ShareDeny: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deny", abstract: "Refuse a program (or a uid) the shared password, even if otherwise allowed.")
    @OptionGroup var member: RuleOptions
    @OptionGroup var output: JSONOption

    func run() throws {
        let rule = try member.rule()
        var policy = try PolicyStore.load()
        policy.allow.removeAll { $0 == rule }
        if !policy.deny.contains(rule) { policy.deny.append(rule) }
        try PolicyStore.save(policy)
        try Console.report(output.json, "denied \(rule)", ["denied": .string("\(rule)")])
    }
}

struct SharePolicy: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy", abstract: "Show who may fetch the shared password.")
    @Flag(help: "JSON output.") var json = false

    func run() throws {
        let policy = try PolicyStore.load()
        if json {
            try Console.json(policy)
            return
        }
        Console.out("policy file: \(AccessPolicyFile.path(home: PolicyStore.home))")
        Console.out("group: \(policy.group)")
        Console.out(policy.allow.isEmpty ? "state: not enabled (nobody is allowed)" : "state: enabled")
        for r in policy.allow { Console.out("allow: \(r)") }
        for r in policy.deny { Console.out("deny: \(r)") }
    }
}
