import Foundation
import Testing
@testable import KeySharing

/// Issue 27, "Unlocks that are scoped": which program an unlock names
/// (NamedProgram: same file or same content) and which programs no unlock
/// reaches (Authenticators). The agent and real PAM / cryptsetup programs are
/// in Tests/integration/87-agent-unlock-scope.sh.
@Suite struct AuthenticatorsTests {
    private func scratch() throws -> String {
        let dir = NSTemporaryDirectory() + "ks-authn-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        return dir
    }

    private func identity(_ path: String, shownAs shown: String? = nil) throws -> ProgramIdentity {
        let found = try #require(ProgramDigests.file(at: path))
        return ProgramIdentity(path: shown ?? path, file: found.file, digest: found.digest)
    }

    /// A named program is its file and its content: a copy is named, another content is not.
    @Test func aNamedProgramIsItsFileOrContent() throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for (name, text) in [("a", "program a"), ("copy", "program a"), ("b", "program b")] {
            #expect(FileManager.default.createFile(atPath: "\(dir)/\(name)", contents: Data(text.utf8)))
        }
        let a = try #require(NamedProgram(path: "\(dir)/a"))
        let (ia, icopy, ib) = (try identity("\(dir)/a"), try identity("\(dir)/copy"), try identity("\(dir)/b"))
        #expect(a.names(ia))
        #expect(a.names(icopy))
        #expect(!a.names(ib))
        #expect(NamedProgram(path: "\(dir)/none") == nil)
        // A policy rule's recorded digest still names that content once the file is gone.
        let recorded = try #require(ProgramDigests.file(at: "\(dir)/b")?.digest)
        let rule = try #require(NamedProgram(path: "\(dir)/none", recorded: recorded))
        #expect(rule.names(ib) && !rule.names(ia))
    }

    /// By name (also a deleted executable as /proc/PID/exe shows it), by the
    /// content of an installed authenticator (a renamed copy of su); an
    /// ordinary program is none.
    @Test func authenticatorsByNameAndByContent() throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(FileManager.default.createFile(atPath: "\(dir)/tool", contents: Data("a tool".utf8)))
        let tool = try identity("\(dir)/tool")
        #expect(Authenticators.reason(for: tool) == nil)
        let asSSHD = try identity("\(dir)/tool", shownAs: "/usr/sbin/sshd")
        let asLogin = try identity("\(dir)/tool", shownAs: "/x/login (deleted)")
        #expect(Authenticators.reason(for: asSSHD)?.contains("sshd") == true)
        #expect(Authenticators.reason(for: asLogin)?.contains("login") == true)
        #expect(Authenticators.name(of: "/usr/bin/sudo (deleted)") == "sudo")
        let su = ["/usr/bin/su", "/bin/su"].first { FileManager.default.isExecutableFile(atPath: $0) }
        if let su {
            try FileManager.default.copyItem(atPath: su, toPath: "\(dir)/renamed")
            let renamed = try identity("\(dir)/renamed")
            #expect(Authenticators.reason(for: renamed)?.contains("same file or content") == true)
            let named = try #require(NamedProgram(path: "\(dir)/renamed"))
            #expect(Authenticators.reason(for: named) != nil)
        }
        let namedTool = try #require(NamedProgram(path: "\(dir)/tool"))
        #expect(Authenticators.reason(for: namedTool) == nil)
    }
}
