import COpenSSL

/// One `-----BEGIN X-----` ... `-----END X-----` block of a PEM text.
public struct PEMBlock: Sendable {
    /// 1-based position in the text, so an error can name the block.
    public let index: Int
    /// The type word between BEGIN and the dashes: "CERTIFICATE", "ENCRYPTED PRIVATE KEY".
    public let label: String
    /// The block exactly as written (OpenSSL's PEM readers take it back for encrypted keys).
    public let text: String
    /// RFC 1421 headers of the traditional encrypted form (`Proc-Type`, `DEK-Info`).
    public let headers: String

    /// PKCS #8 `ENCRYPTED PRIVATE KEY`, or a traditional key with `Proc-Type: 4,ENCRYPTED`.
    public var isEncrypted: Bool {
        label == "ENCRYPTED PRIVATE KEY" || headers.containsText("ENCRYPTED")
    }

    public var name: String { "PEM block \(index) (\(label))" }
}

/// What a PEM file holds, for import: every private key (decrypted with the
/// password when a block is encrypted) and every certificate, in file order.
/// A block keyshare cannot import is refused with the reason, naming the
/// block: nothing of the file is then imported, so a bundle is never half
/// taken (the old importer silently dropped every certificate of a file that
/// also held a key).
public struct PEMBundle: Sendable {
    public var privateKeys: [PrivateKey] = []
    public var certificates: [Certificate] = []
    /// Blocks read but not imported on purpose (an `EC PARAMETERS` block
    /// beside its key, as `openssl ecparam -genkey` writes it).
    public var skipped: [String] = []

    /// Whether `text` looks like PEM at all.
    public static func looksLikePEM(_ text: String) -> Bool { text.containsText("-----BEGIN ") }

    /// Every block of `text`, in order. Text between blocks (the "Bag
    /// Attributes" lines `openssl pkcs12 -nodes` prints) is ignored. A BEGIN
    /// without its END is an error.
    public static func blocks(_ text: String) throws -> [PEMBlock] {
        var out: [PEMBlock] = []
        var rest = Substring(text)
        while let begin = rest.textRange(of: "-----BEGIN ") {
            let afterBegin = rest[begin.upperBound...]
            guard let dashes = afterBegin.textRange(of: "-----") else {
                throw CryptoError(.invalidInput, "PEM block \(out.count + 1)", reason: "a BEGIN line without its closing dashes")
            }
            let label = String(afterBegin[..<dashes.lowerBound])
            let endLine = "-----END \(label)-----"
            guard let end = rest[dashes.upperBound...].textRange(of: endLine) else {
                throw CryptoError(.invalidInput, "PEM block \(out.count + 1) (\(label))", reason: "no \(endLine) line (truncated file?)")
            }
            let body = rest[dashes.upperBound..<end.lowerBound]
            // Headers are the "Name: value" lines before the first blank line.
            var headers = ""
            if body.contains(":") {
                for line in body.split(separator: "\n", omittingEmptySubsequences: false).dropFirst() {
                    let l = line.trimmingSuffix("\r")
                    if l.isEmpty { break }
                    if l.contains(":") { headers += l + "\n" }
                }
            }
            out.append(PEMBlock(index: out.count + 1, label: label,
                                text: String(rest[begin.lowerBound..<end.upperBound]) + "\n", headers: headers))
            rest = rest[end.upperBound...]
        }
        return out
    }

    /// Parses every block. `password` is asked only when an encrypted key is
    /// met, and once. Errors name the block: a refused type says why and
    /// what to do instead; a wrong password is `.wrongPassword`.
    public static func parse(_ text: String, password: () throws -> [UInt8]) throws -> PEMBundle {
        let blocks = try blocks(text)
        guard !blocks.isEmpty else {
            throw CryptoError(.invalidInput, "PEM", reason: "no PEM block found")
        }
        var bundle = PEMBundle()
        var cachedPassword: [UInt8]?
        defer { if var p = cachedPassword { OSSL.cleanse(&p) } }
        for block in blocks {
            switch block.label {
            case "CERTIFICATE", "X509 CERTIFICATE", "TRUSTED CERTIFICATE":
                bundle.certificates.append(try certificate(block))
            case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY":
                if block.isEncrypted {
                    if cachedPassword == nil { cachedPassword = try password() }
                    bundle.privateKeys.append(try encryptedKey(block, password: cachedPassword ?? []))
                } else {
                    bundle.privateKeys.append(try plainKey(block))
                }
            case "EC PARAMETERS":
                bundle.skipped.append("\(block.name): curve parameters, which the EC key names itself")
            default:
                throw CryptoError(.unsupported, block.name, reason: refusal(block.label))
            }
        }
        return bundle
    }

    /// Why a block type is not imported, and what to give instead.
    static func refusal(_ label: String) -> String {
        switch label {
        case "CERTIFICATE REQUEST", "NEW CERTIFICATE REQUEST":
            "a certificate request is not imported; import the certificate issued for it"
        case "PUBLIC KEY", "RSA PUBLIC KEY":
            "a public key alone is not imported; import its private key or its certificate"
        case "X509 CRL":
            "certificate revocation lists are not kept in the keychain"
        case "PKCS7", "CMS":
            "a PKCS #7 bundle is not read; extract its certificates with `openssl pkcs7 -print_certs`"
        case "DSA PRIVATE KEY", "DH PARAMETERS", "DSA PARAMETERS":
            "DSA and DH are not supported (RSA, EC P-256/384/521 and Ed25519 keys are)"
        default:
            "this PEM type is not importable (certificates and private keys are)"
        }
    }

    static func certificate(_ block: PEMBlock) throws -> Certificate {
        CryptoError.clearQueue()
        let der = try decode(block)
        do {
            return try Certificate(der: der)
        } catch {
            throw CryptoError(.invalidInput, block.name, reason: "not a valid X.509 certificate")
        }
    }

    static func plainKey(_ block: PEMBlock) throws -> PrivateKey {
        let der = try decode(block)
        do {
            return try PrivateKey(der: der)
        } catch let e as CryptoError where e.kind == .unsupported {
            throw CryptoError(.unsupported, block.name, reason: e.reason)
        } catch {
            throw CryptoError(.invalidInput, block.name, reason: "not a valid private key")
        }
    }

    /// PKCS #8 EncryptedPrivateKeyInfo (PBES2 and the PKCS #12 PBEs) and the
    /// traditional `Proc-Type: 4,ENCRYPTED` / `DEK-Info` form, through
    /// OpenSSL's PEM reader with the password (never its terminal prompt).
    /// OpenSSL's error chain is condensed to wrong password / unsupported.
    static func encryptedKey(_ block: PEMBlock, password: [UInt8]) throws -> PrivateKey {
        // DES-CBC and the old PKCS #5 v1.5 schemes live in the legacy provider.
        _ = LegacyProvider.ensureLoaded()
        do {
            return try PrivateKey(pem: block.text, password: password)
        } catch let e as CryptoError {
            let r = e.reason.lowercased()
            // A wrong key still yields valid CBC padding about 1 time in 256;
            // the garbage then fails to decode ("header too long", "nested asn1
            // error"): that is a wrong password too, not an unsupported scheme.
            let decodeOfGarbage = r.containsText("asn1") || r.containsText("header too long")
            if !decodeOfGarbage && (r.containsText("unsupported") || r.containsText("unknown cipher") || r.containsText("not supported")) {
                throw CryptoError(.unsupported, block.name, reason: "its encryption is not supported (\(e.reason))")
            }
            throw CryptoError(.wrongPassword, block.name, reason: "wrong password for the encrypted private key")
        }
    }

    /// The DER inside a block, through OpenSSL's PEM decoder (base64 checked).
    static func decode(_ block: PEMBlock) throws -> [UInt8] {
        CryptoError.clearQueue()
        return try OSSL.withReadBIO(Array(block.text.utf8), block.name) { bio in
            var name: UnsafeMutablePointer<CChar>?
            var header: UnsafeMutablePointer<CChar>?
            var data: UnsafeMutablePointer<UInt8>?
            var len = 0
            guard PEM_read_bio_ex(bio, &name, &header, &data, &len, UInt32(PEM_FLAG_ONLY_B64)) == 1, let data else {
                CryptoError.clearQueue()
                throw CryptoError(.invalidInput, block.name, reason: "bad base64 contents")
            }
            defer {
                ks_OPENSSL_free(name)
                ks_OPENSSL_free(header)
                ks_OPENSSL_cleanse_free(data, len)
            }
            return Array(UnsafeBufferPointer(start: data, count: len))
        }
    }
}

private extension Substring {
    func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : String(self)
    }
}
