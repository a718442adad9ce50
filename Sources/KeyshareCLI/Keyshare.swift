import ArgumentParser
import FoundationEssentials
import Glibc
import KeyshareCrypto

/// The `keyshare` command: the human interface to the keychain, its tokens and
/// the key-sharing export path.

struct Keyshare: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keyshare",
        abstract: "A key store for Linux that applications use without seeing private keys.",
        discussion: """
            The store lives in $KEYSHARE_HOME/keychain.db (default ~/.local/share/keyshare).
            Applications use its keys through libkeyshare-pkcs11.so.
            """,
        // Line 1 is the version scripts parse; line 2 names the crypto engine (issue 18).
        version: KeyshareVersion.string + "\n" + CryptoEngine.summary(now: Int(time(nil))),
        subcommands: [
            TokenCommand.self, DriverCommand.self, ImportCommand.self, ListCommand.self, ShowCommand.self,
            DeleteCommand.self, ExportCommand.self, PasswordCommand.self,
            ShareCommand.self, ServeCommand.self,
            KeyCommand.self, CSRCommand.self, TrustCommand.self, WrapCommand.self, UnwrapCommand.self,
            AgentCommand.self, AgentPolicyCommand.self, UnlockCommand.self, LockCommand.self, LogCommand.self,
            BrowserCommand.self, BackupCommand.self, RestoreCommand.self, TPMCommand.self, DoctorCommand.self,
        ])

    /// ArgumentParser's own errors (usage) keep its formatting; every other error
    /// becomes exactly one line on stderr and exit status 1.
    static func main() {
        ProcessHardening.apply(arguments: CommandLine.arguments)
        // tpm2-tss logs every TPM error to stderr; the CLI says one line itself
        // (TSS2_LOG set by the user still wins). Before any thread exists.
        setenv("TSS2_LOG", "all+NONE", 0)
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch let error as CLIExit {
            Glibc.exit(error.code)
        } catch {
            // --help and --version arrive as errors with a success exit code.
            if error is CleanExit || Keyshare.exitCode(for: error) == .success { exit(withError: error) }
            if isArgumentParserError(error) {
                let message = Keyshare.message(for: error).split(separator: "\n").first.map(String.init) ?? "invalid arguments"
                if let better = CommandSuggestion.line(for: message, arguments: Array(CommandLine.arguments.dropFirst())) {
                    Console.error(better)
                } else {
                    Console.error(message.replacing("Error: ", with: "") + " (see 'keyshare --help')")
                }
                Glibc.exit(Keyshare.exitCode(for: error).rawValue)
            }
            Console.error(ErrorText.describe(error))
            Glibc.exit(1)
        }
    }

    private static func isArgumentParserError(_ error: Error) -> Bool {
        if error is ValidationError || error is CleanExit || error is ExitCode { return true }
        let typeName = String(reflecting: type(of: error))
        return typeName.hasPrefix("ArgumentParser.")
    }
}

/// Thrown to end the process with a status after output was already printed.
struct CLIExit: Error {
    var code: Int32
}
