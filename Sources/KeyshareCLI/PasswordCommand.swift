import ArgumentParser
import FoundationEssentials
import Glibc
import Keychain
import KeySharing

/// `keyshare password`: the shared export password. Printed only to a terminal
/// (or with --stdout, for a pipe the user chose) so it does not end up in logs.
struct PasswordCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "password",
        abstract: "Show, rotate or fetch (from the password service) the shared export password.",
        subcommands: [Show.self, Rotate.self, Fetch.self],
        defaultSubcommand: Show.self)

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the shared export password (made on first use).")
        @Flag(help: "Print even when standard output is not a terminal.") var stdout = false
        @OptionGroup var selection: TokenSelection
        @OptionGroup var pin: PINOptions
        @OptionGroup var output: JSONOption

        func run() throws {
            guard stdout || Console.stdoutIsTerminal else {
                throw CLIError("refusing to print the password to a pipe or file; add --stdout if that is what you want")
            }
            let ctx = try Context.open()
            let token = try ctx.token(selection)
            let key = try ctx.unlock(token, pin)
            let password = try SharedPassword.obtain(store: ctx.store, token: token.tokenID, key: key)
            try Console.report(output.json, password, ["password": .string(password), "token": .string(token.label)])
        }
    }

    struct Rotate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Replace the shared export password; later exports use the new one.")
        @OptionGroup var selection: TokenSelection
        @OptionGroup var pin: PINOptions
        @OptionGroup var output: JSONOption

        func run() throws {
            let ctx = try Context.open()
            let token = try ctx.token(selection)
            let key = try ctx.unlock(token, pin)
            _ = try SharedPassword.rotate(store: ctx.store, token: token.tokenID, key: key)
            try Console.report(output.json, "the shared export password was replaced; files exported before need the old one",
                               ["rotated": true, "token": .string(token.label)])
        }
    }

    /// The consumer's side: asks a running `keyshare serve` for the password.
    struct Fetch: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Fetch the shared password from the password service (as a consumer would).")
        @Option(help: "The service's socket (default $XDG_RUNTIME_DIR/keyshare/password.sock).") var socket: String?
        @Flag(help: "Print even when standard output is not a terminal.") var stdout = false
        @Option(help: "Seconds to wait for the service's reply (1-300).") var timeout = 5
        @OptionGroup var output: JSONOption

        func validate() throws {
            guard (1...300).contains(timeout) else { throw ValidationError("--timeout must be 1 to 300 seconds") }
        }

        func run() throws {
            guard stdout || Console.stdoutIsTerminal else {
                throw CLIError("refusing to print the password to a pipe or file; add --stdout if that is what you want")
            }
            let password = try PasswordClient.fetchPassword(socketPath: socket ?? PasswordSocket.defaultPath(), timeoutSeconds: timeout)
            try Console.report(output.json, password, ["password": .string(password)])
        }
    }
}
