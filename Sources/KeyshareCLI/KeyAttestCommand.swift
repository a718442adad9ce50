#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import FoundationEssentials
import Keychain
import KeySharing
import KeyshareCrypto
import KeyshareTPM
import Tokens

/// The names of the files `keyshare key attest` writes, in the TCG's own encodings
/// (docs/tpm.md "Key attestation"); `keyshare csr --attest` bundles them.
enum AttestationFiles {
    static let attest = "certify.attest", signature = "certify.sig"
    static let keyPublicArea = "key.tpm2b_public", akPublicArea = "ak.tpm2b_public"
    static let keyPEM = "key.pub.pem", akPEM = "ak.pub.pem", ekPEM = "ek.pub.pem", ekCertificate = "ek.crt.pem"
    /// With --csr: the request, and the zip of every file for the CA.
    static let request = "request.csr.pem", bundle = "attestation.zip"
    static let all = [attest, signature, keyPublicArea, akPublicArea, keyPEM, akPEM, ekPEM, ekCertificate, request, bundle]

    /// Hex digits (optionally 0x-prefixed) to bytes, nil when they are not.
    static func bytes(hex s: String) -> [UInt8]? {
        var d = Array(s.utf8)
        if d.count >= 2, d[0] == 0x30, d[1] | 0x20 == 0x78 { d.removeFirst(2) }
        guard d.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: c - 0x30
            case 0x41...0x46: c - 0x41 + 10
            case 0x61...0x66: c - 0x61 + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        var i = 0
        while i < d.count {
            guard let hi = nibble(d[i]), let lo = nibble(d[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    /// A DER certificate as PEM (RFC 7468: base64 in lines of 64), after checking it parses.
    static func certificatePEM(_ der: [UInt8]) throws -> String {
        _ = try Certificate(der: der)
        let table = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var b64: [UInt8] = []
        var i = 0
        while i < der.count {
            let n = min(3, der.count - i)
            let v = (UInt32(der[i]) << 16) | (n > 1 ? UInt32(der[i + 1]) << 8 : 0) | (n > 2 ? UInt32(der[i + 2]) : 0)
            b64 += [table[Int(v >> 18 & 63)], table[Int(v >> 12 & 63)], n > 1 ? table[Int(v >> 6 & 63)] : 0x3D, n > 2 ? table[Int(v & 63)] : 0x3D]
            i += 3
        }
        var text = "-----BEGIN CERTIFICATE-----\n"
        var j = 0
        while j < b64.count {
            text += String(decoding: b64[j..<min(j + 64, b64.count)], as: UTF8.self) + "\n"
            j += 64
        }
        return text + "-----END CERTIFICATE-----\n"
    }
}

extension KeyCommand {
    /// `keyshare key attest` (issue 31): TPM2_Certify of a TPM token's key by the
    /// token's attestation key with the verifier's nonce, and the endorsement key
    /// and its certificate, written as files a verifier reads with tpm2-tools and
    /// openssl (docs/tpm.md "Key attestation"). The TPM is opened here, as for
    /// `key import --tpm`, under the store's TPM lock.
    struct Attest: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Prove to a verifier (a CA) that a TPM token's key was made in this TPM and cannot leave it (TPM2_Certify).",
            discussion: """
                Writes to --out DIR: certify.attest (the TPMS_ATTEST), certify.sig (its TPMT_SIGNATURE by the token's \
                attestation key), key.tpm2b_public and ak.tpm2b_public (TPM2B_PUBLIC), key.pub.pem, ak.pub.pem, ek.pub.pem \
                and, when the TPM holds one, ek.crt.pem (its endorsement certificate). The verifier's recipe is in docs/tpm.md.
                """)
        @Option(help: "The key's application tag.") var tag: String?
        @Option(help: "The private key's persistent reference or label.") var key: String?
        @Option(help: "The verifier's nonce in hex, 8 to 64 bytes: the TPM signs it into the attestation (qualifying data).")
        var nonce: String
        @Option(help: "The directory to write the files to (created 0755 if missing; existing files only with --force).")
        var out: String
        @OptionGroup var selection: TokenSelection
        @OptionGroup var pin: PINOptions
        @OptionGroup var force: ForceOption
        @Option(help: ArgumentHelp("A PKCS #10 request (PEM or DER) for this key, e.g. from openssl req through the PKCS #11 module: "
            + "checked, copied to DIR/request.csr.pem, and bundled with the attestation in DIR/attestation.zip for the CA."))
        var csr: String?
        @Flag(help: "JSON output: the files written and the Names (hex) of the key and the attestation key.") var json = false

        func validate() throws {
            guard (tag == nil) != (key == nil) else { throw ValidationError("name the key with exactly one of --tag or --key") }
            guard let n = AttestationFiles.bytes(hex: nonce), (8...64).contains(n.count) else {
                throw ValidationError("--nonce must be 8 to 64 bytes in hex (16 to 128 hex digits)")
            }
            guard !out.isEmpty else { throw ValidationError("--out needs a directory") }
        }

        func run() throws {
            let nonceBytes = AttestationFiles.bytes(hex: nonce) ?? []
            let request = try csr.map(Self.readRequest)
            let create = try Self.prepare(directory: out, force: force.force)
            let ctx = try Context.open(syncDrivers: false)
            let token = try ctx.token(selection)
            guard TPMToken.isTPM(token.tokenID) else {
                throw CLIError("token \(token.label) is not a TPM token: its keys were not made in a TPM, so there is nothing a TPM "
                    + "can attest (a TPM token: keyshare token create --tpm)")
            }
            let tokenKey = try ctx.unlock(token, pin)
            let item = try findKey(ctx, token, tokenKey)
            let label = item[CKA.label].map { String(decoding: $0, as: UTF8.self) } ?? ""
            guard let blob = item[CKA.keyshareTPM], !blob.isEmpty else {
                throw CLIError("\(label.isEmpty ? "the key" : "key \(label)") has no TPM object: nothing to attest")
            }
            let a: TPMAttestation
            do {
                a = try TPMToken.attest(blob: blob, auth: try tokenKey.tpmObjectAuth(), token: token.tokenID, nonce: nonceBytes,
                                        site: ctx.store.tpmSite())
            } catch let e as TPMError {
                throw CLIError("cannot attest the key: \(e)")
            }
            let c = a.certification
            let keyPEM = try TPMToken.publicKey(ofBlob: blob).pem()
            let akPEM = try Self.pem(c.akPublic)
            let ekPEM = try Self.pem(a.endorsementPublic)
            var files: [(String, [UInt8])] = [
                (AttestationFiles.attest, c.attest), (AttestationFiles.signature, c.signature),
                (AttestationFiles.keyPublicArea, c.keyPublic), (AttestationFiles.akPublicArea, c.akPublic),
                (AttestationFiles.keyPEM, Array(keyPEM.utf8)), (AttestationFiles.akPEM, Array(akPEM.utf8)),
                (AttestationFiles.ekPEM, Array(ekPEM.utf8)),
            ]
            if let der = a.endorsementCertificate {
                files.append((AttestationFiles.ekCertificate, Array(try AttestationFiles.certificatePEM(der).utf8)))
            }
            if let request {
                // The CA binds the certificate to the attested key: they must be one key.
                guard try CertificateRequest.publicKeyInfo(request) == (try TPMToken.publicKey(ofBlob: blob).spkiDER()) else {
                    throw CLIError("\(csr ?? ""): the request's public key is not the key being attested")
                }
                files.append((AttestationFiles.request, Array(try CertificateRequest.pem(request).utf8)))
            }
            // Created only now: a refusal or a failure before this point leaves no empty directory behind.
            if create, mkdir(out, 0o755) != 0 {
                throw CLIError("cannot create the directory \(out): \(String(cString: strerror(errno)))")
            }
            for (name, bytes) in files {
                try OutputFile.write(bytes, to: out + "/" + name, existing: FileIO.existing(force.force), mode: 0o644)
            }
            if request != nil {
                let zip = try ShareZip.build(files.map { (name: $0.0, bytes: $0.1) }, date: Date())
                try OutputFile.write(zip, to: out + "/" + AttestationFiles.bundle, existing: FileIO.existing(force.force), mode: 0o644)
                files.append((AttestationFiles.bundle, zip))
            }
            let keyName = try TPM.name(ofPublicArea: c.keyPublic), akName = try TPM.name(ofPublicArea: c.akPublic)
            let attrs = TPM.objectAttributes(ofPublicArea: c.keyPublic) ?? 0
            let born = attrs & 0x32 == 0x32  // fixedTPM (bit 1), fixedParent (bit 4), sensitiveDataOrigin (bit 5)
            let ekText = a.endorsementKind == .rsa ? "RSA 2048" : "ECC P-256"
            if json {
                try Console.json([
                    "directory": JSONField.string(out),
                    "files": .strings(files.map { out + "/" + $0.0 }),
                    "keyName": .string(Hex.lower(keyName)),
                    "akName": .string(Hex.lower(akName)),
                    "endorsementKey": .string(a.endorsementKind == .rsa ? "rsa" : "ecc"),
                    "endorsementCertificate": a.endorsementCertificate == nil ? .null : .string(out + "/" + AttestationFiles.ekCertificate),
                    "bornInTPM": .bool(born),
                ])
                return
            }
            Console.out("attested \(label.isEmpty ? "key" : "key \(label)") of token \(token.label) in \(out)")
            Console.out("  key Name \(Hex.lower(keyName))")
            Console.out("  AK Name  \(Hex.lower(akName))")
            Console.out(born ? "  the TPM says: generated in this TPM (fixedTPM, fixedParent, sensitiveDataOrigin)"
                : "  the TPM says: NOT generated in this TPM (imported: sensitiveDataOrigin clear); it cannot leave the TPM now")
            if a.endorsementCertificate == nil {
                Console.out("  this TPM holds no endorsement certificate keyshare can read (NV 0x01C00002, 0x01C0000A): no ek.crt.pem; "
                    + "a verifier must trust ek.pub.pem (\(ekText)) some other way")
            } else {
                Console.out("  endorsement certificate (\(ekText)) from the TPM's NV: ek.crt.pem")
            }
        }

        /// The token's private key named by --tag or --key.
        private func findKey(_ ctx: Context, _ token: TokenRecord, _ tokenKey: TokenKey) throws -> Item {
            let items: [Item]
            if let tag {
                var q = ItemQuery(attributes: [0x8000_4B54: Array(tag.utf8)], limit: .all)  // KeyShare's application tag
                q.tokenID = token.tokenID
                q.itemClass = .privateKey
                items = try ctx.store.find(q, key: tokenKey)
            } else {
                items = try ctx.resolveItems(key ?? "", token: token, key: tokenKey).filter { $0.itemClass == .privateKey && $0.tokenID == token.tokenID }
            }
            guard let first = items.first else {
                throw CLIError("no private key \(tag.map { "with tag \($0)" } ?? (key ?? "")) in token \(token.label)")
            }
            guard items.count == 1 else { throw CLIError("\(items.count) private keys match; name one by its persistent reference (--key)") }
            return first
        }

        /// A PKCS #10 request (PEM or DER) whose self-signature verifies.
        private static func readRequest(_ path: String) throws -> [UInt8] {
            let bytes = try FileIO.read(path)
            var der = bytes
            if let text = String(bytes: bytes, encoding: .utf8), text.contains("-----BEGIN CERTIFICATE REQUEST-----") {
                let body = String(text.split(whereSeparator: \.isNewline).filter { !$0.hasPrefix("-----") }.joined().filter { !$0.isWhitespace })
                guard let d = Data(base64Encoded: body) else { throw CLIError("\(path): bad PEM") }
                der = [UInt8](d)
            }
            guard (try? CertificateRequest.verify(der)) == true else {
                throw CLIError("\(path): not a PKCS #10 request whose signature verifies")
            }
            return der
        }

        private static func pem(_ tpm2b: [UInt8]) throws -> String {
            switch try TPM.publicKey(ofPublicArea: tpm2b) {
            case .ec(let k, let x, let y): return try PublicKey(curve: k == .p256 ? .p256 : .p384, point: [0x04] + x + y).pem()
            case .rsa(_, let n, let e): return try PublicKey(rsaModulus: n, exponent: e).pem()
            }
        }

        /// Checks the output directory before any work: true when it must be created (0755), and
        /// its parent is a directory; an existing one must be a directory (not a link) whose files
        /// of ours are absent, or replaceable with --force.
        static func prepare(directory: String, force: Bool) throws -> Bool {
            var st = stat()
            if lstat(directory, &st) != 0 {
                guard errno == ENOENT else { throw CLIError("cannot use \(directory): \(String(cString: strerror(errno)))") }
                try OutputFile.check(directory, existing: .refuse)  // its parent must be a directory
                return true
            }
            guard st.st_mode & S_IFMT == S_IFDIR else { throw CLIError("\(directory) is not a directory") }
            for name in AttestationFiles.all {
                try OutputFile.check(directory + "/" + name, existing: FileIO.existing(force))
            }
            return false
        }
    }
}
