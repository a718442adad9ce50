/// A program named by a path (`keyshare unlock --program PATH`, a policy
/// `unlock` rule, an installed authenticator), as found at one moment in the
/// agent's own mount namespace: the file there and its content's SHA-256, plus
/// a digest recorded earlier (a policy rule's). It names a process's program
/// (ProgramIdentity) as a policy rule does (AgentPolicy.Rule.names): the same
/// file, or the same content, so a copy of a named program is that program and
/// a different program put at another path is not.
///
/// Taken once and kept (an unlock lasts minutes): matching is then a compare
/// in memory, cheap enough for every call's `sharedUnlocks`.
public struct NamedProgram: Sendable, Equatable {
    public let path: String
    public let file: FileIdentity?
    public let digests: [[UInt8]]

    public init(path: String, file: FileIdentity?, digests: [[UInt8]]) {
        self.path = path
        self.file = file
        self.digests = digests
    }

    /// The file at `path` now, with `recorded` (a policy rule's digest) as
    /// another content it names; nil when there is nothing at `path` and
    /// nothing recorded.
    public init?(path: String, recorded: [UInt8]? = nil) {
        let found = ProgramDigests.file(at: path)
        var digests: [[UInt8]] = []
        if let recorded { digests.append(recorded) }
        if let d = found?.digest, !digests.contains(d) { digests.append(d) }
        guard found != nil || !digests.isEmpty else { return nil }
        self.init(path: path, file: found?.file, digests: digests)
    }

    /// Whether this names the program `program` (same file, or same content).
    public func names(_ program: ProgramIdentity) -> Bool {
        if let file, file == program.file { return true }
        guard let d = program.digest else { return false }
        return digests.contains(d)
    }

    /// Whether this and `other` are the same program (a file or a content in common).
    func sameProgram(as other: NamedProgram) -> Bool {
        if let file, file == other.file { return true }
        return digests.contains { other.digests.contains($0) }
    }
}
