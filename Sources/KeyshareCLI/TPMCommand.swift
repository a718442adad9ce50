import ArgumentParser
import Keychain
import KeySharing
import KeyshareTPM
import Tokens

/// `keyshare tpm`: what a verifier asks of a TPM token's TPM itself (issue 31).
struct TPMCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tpm",
        abstract: "Answer a verifier's challenges with a TPM token's TPM (key attestation: docs/tpm.md).",
        subcommands: [Activate.self])

    /// TPM2_ActivateCredential: the verifier made a credential for this TPM's endorsement key and
    /// the token's attestation key (TPM2_MakeCredential, e.g. offline with `tpm2_makecredential -T none`);
    /// only the TPM holding both can open it, which ties the AK (and what it certified) to the EK
    /// certificate. No PIN: the AK and the EK have no user authorization of keyshare's.
    struct Activate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Open a verifier's credential challenge (TPM2_ActivateCredential with the token's attestation key and the EK).",
            discussion: """
                --credential is the file tpm2_makecredential writes (-o), made with the EK of ek.pub.pem and the AK's Name \
                from keyshare key attest. The secret goes to --out (a new file, mode 0600), or to standard output with --stdout.
                """)
        @Option(help: "The credential file (tpm2_makecredential's output).") var credential: String
        @Option(help: "Where to write the secret (a new file, mode 0600).") var out: String?
        @Flag(help: "Write the secret to standard output instead of a file.") var stdout = false
        @OptionGroup var selection: TokenSelection
        @OptionGroup var force: ForceOption
        @OptionGroup var output: JSONOption

        func validate() throws {
            guard !(stdout && output.json) else { throw ValidationError("--json reports where the secret went: use it with --out") }
            guard (out == nil) == stdout else { throw ValidationError("give exactly one of --out FILE or --stdout") }
        }

        func run() throws {
            if let out { try FileIO.checkOutput(out, force: force.force) }
            let blob = try FileIO.read(credential)
            // tpm2-tools' credential file: 0xBADCC0DE, version 1, TPM2B_ID_OBJECT, TPM2B_ENCRYPTED_SECRET.
            guard blob.count > 12, blob[0..<8] == [0xBA, 0xDC, 0xC0, 0xDE, 0, 0, 0, 1] else {
                throw CLIError("\(credential): not a tpm2_makecredential file (it starts with 0xBADCC0DE, version 1)")
            }
            let ctx = try Context.open(syncDrivers: false)
            let token = try ctx.token(selection)
            guard TPMToken.isTPM(token.tokenID) else {
                throw CLIError("token \(token.label) is not a TPM token: it has no attestation key")
            }
            let secret: [UInt8]
            do {
                secret = try TPM.with(ctx.store.tpmSite()) { c in
                    let (ek, _) = try TPMToken.endorsement(c)
                    return try c.activateCredential(seed: TPMToken.attestationSeed(token.tokenID), ek: ek, credential: blob)
                }
            } catch let e as TPMError where e.kind == .unreachable {
                throw CLIError("cannot activate the credential: \(e)")
            } catch let e as TPMError {
                throw CLIError("\(credential): this TPM cannot open the credential: it was made for another TPM's endorsement key "
                    + "or another attestation key, or it is damaged (TPM2_ActivateCredential: 0x\(String(e.rc, radix: 16)))")
            }
            if let out {
                try FileIO.write(secret, out, force: force.force)
                try Console.report(output.json, "credential opened: the secret is in \(out) (mode 0600)",
                                   ["opened": .bool(true), "out": .string(out), "mode": .string("0600")])
            } else {
                try FileIO.write(secret, "-", force: false)
            }
        }
    }
}
