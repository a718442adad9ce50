import ArgumentParser
import FoundationEssentials
import Glibc
import KeyShare
import KeySharing

/// `keyshare wrap` / `unwrap`: files sealed for a shared group (the
/// AppConnect model). The group key never leaves the keychain; a file is
/// streamed in 64 KiB segments, so any size wraps in bounded memory.
struct WrapCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wrap",
        abstract: "Encrypt a file for a group (AES-256-GCM under the group's key in the keychain).")

    @Option(help: "The group ID the file is for.") var group: String
    @Argument var input: String
    @Argument(help: "The wrapped file to write (0600).") var output: String
    @OptionGroup var selection: TokenSelection
    @OptionGroup var groups: AccessGroupOptions
    @OptionGroup var pin: PINOptions
    @OptionGroup var force: ForceOption
    @OptionGroup var json: JSONOption

    func run() throws {
        let session = try SessionFactory.open(groups)
        // What is wrong with the input is said first, then the output path, both before the PIN.
        if (try? session.wrappedFileInfo(input)) != nil { throw KeyShareError.invalidParameter("\(input) is already wrapped") }
        try FileIO.checkOutput(output, force: force.force)
        try SessionFactory.unlock(session, selection, pin)
        // The library writes its own temporary file; OutputFile puts the result in place.
        try OutputFile.produce(at: output, existing: FileIO.existing(force.force)) { tmp in
            try session.wrap(input: input, output: tmp, group: group, fileName: Self.baseName(input), token: selection.token)
        }
        try Console.report(json.json, "wrapped \(input) for group \(group) into \(output)",
                           ["wrapped": .string(input), "group": .string(group), "output": .string(output)])
    }

    /// The name recorded in the header: the input's, not the temporary file's.
    static func baseName(_ path: String) -> String { String(path.split(separator: "/").last ?? "") }
}

struct UnwrapCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unwrap",
        abstract: "Decrypt a wrapped file (exit 3 with \"not wrapped: use as is\" for a plain file).")

    @Argument var input: String
    @Argument(help: "The output file, or a directory to write the original file name into.") var output: String
    @OptionGroup var selection: TokenSelection
    @OptionGroup var groups: AccessGroupOptions
    @OptionGroup var pin: PINOptions
    @OptionGroup var force: ForceOption
    @OptionGroup var json: JSONOption

    func run() throws {
        let session = try SessionFactory.open(groups)
        let info: WrappedFileInfo
        do {
            info = try session.wrappedFileInfo(input)
        } catch KeyShareError.notWrapped {
            Console.error("\(input): not wrapped: use as is")
            throw CLIExit(code: KeyShareError.notWrapped.exitCode)
        }
        // Membership is checked before the PIN is asked for.
        if let bound = session.accessGroups, !bound.contains(info.group) { throw KeyShareError.notInAccessGroup(info.group) }
        var target = output
        var st = stat()
        // Into a directory (a real one, not a link to one): the recorded file name there.
        if lstat(output, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR {
            let name = PathString.lastComponent(info.fileName)
            guard !name.isEmpty, name != ".", name != ".." else { throw CLIError("the wrapped file records no usable file name") }
            target = output + "/" + name
        }
        try FileIO.checkOutput(target, force: force.force)
        try SessionFactory.unlock(session, selection, pin)
        try OutputFile.produce(at: target, existing: FileIO.existing(force.force)) { tmp in
            try session.unwrap(input: input, output: tmp)
        }
        try Console.report(json.json, "unwrapped \(info.fileName) (group \(info.group)) to \(target)",
                           ["unwrapped": .string(input), "fileName": .string(info.fileName), "group": .string(info.group),
                            "output": .string(target)])
    }
}
