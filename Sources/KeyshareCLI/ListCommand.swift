import ArgumentParser
import FoundationEssentials
import Glibc
import Keychain
import KeySharing
import KeyshareCrypto
import Tokens

/// `keyshare list`: what the keychain holds. Public items are listed without a
/// PIN; private items (keys) are encrypted, labels included, so listing them
/// needs the token unlocked (`--pin-source`, or `--private` to be asked).
/// The default table fits 120 columns (long labels and names are cut with
/// "…"); `--wide` shows every column in full, `--json` every field.
struct ListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List items: class, label, key, certificate type and subject, expiry and reference.",
        discussion: """
            The table fits 120 columns: long labels and names are cut with "…" (--wide shows them whole, with \
            the NOT BEFORE date, the token and the PKCS #11 URI). CERT TYPE says what a certificate is for: CA or \
            self-signed CA, else its extended key usage (TLS server, TLS client, email, code signing, ...), else \
            the key-sharing type of its key usage (device, signature, encryption, authentication). --json gives every \
            field, dates in UTC (notBefore, notAfter).
            """)

    @OptionGroup var selection: TokenSelection
    @OptionGroup var pin: PINOptions
    @Flag(name: .customLong("private"), help: "Include private items (asks for the PIN unless --pin-source is given).")
    var includePrivate = false
    @Option(help: ArgumentHelp("Only certificates that expire within this time, or have expired (N followed by d, w, h or m; a bare N is days).",
                               valueName: "duration"))
    var expiring: String?
    @Flag(help: "Every column in full (the PKCS #11 URI, the token, NOT BEFORE), whatever the width.") var wide = false
    @Flag(help: "JSON output.") var json = false

    /// The table's width without --wide: a terminal of 120 columns shows each row on one line.
    static let width = 120

    /// `30d`, `2w`, `12h`, `90m`, `30` (days): seconds, nil when not that form.
    static func seconds(_ text: String) -> Int64? {
        guard let last = text.last else { return nil }
        let units: [Character: Int64] = ["m": 60, "h": 3600, "d": 86400, "w": 7 * 86400]
        let (number, unit) = units[last].map { (String(text.dropLast()), $0) } ?? (text, 86400)
        guard let n = Int64(number), n >= 0, n <= 100 * 365 else { return nil }
        return n * unit
    }

    func run() throws {
        var horizon: Int64?
        if let expiring {
            guard let s = Self.seconds(expiring) else {
                throw ValidationError("--expiring takes N followed by d, w, h or m (e.g. 30d); a bare N is days")
            }
            horizon = Int64(Date().timeIntervalSince1970) + s
        }
        let ctx = try Context.open()
        let tokens: [TokenRecord] = try selection.token.map { [try ctx.tokens.resolveToken($0)] } ?? ctx.store.tokens()
        var rows: [ItemRow] = []
        for token in tokens where token.present {
            var key: TokenKey?
            if includePrivate || pin.pinSource != nil {
                key = try ctx.unlock(token, pin)
            }
            let items = try ctx.store.find(ItemQuery(tokenID: token.tokenID, limit: .all), key: key)
            rows += items.map { ItemRow($0, token: token) }
        }
        if let horizon { rows = rows.filter { $0.notAfterUnix.map { $0 <= horizon } ?? false } }
        rows.sort { ($0.tokenID, $0.label, $0.classOrder) < ($1.tokenID, $1.label, $1.classOrder) }
        if json { return try Console.json(rows) }
        if rows.isEmpty { return Console.out(expiring.map { "no certificate expires within \($0)" } ?? "no items") }
        if wide {
            return Console.table(
                ["CLASS", "LABEL", "KEY", "CERT TYPE", "COMMON NAME", "NOT BEFORE", "NOT AFTER", "TOKEN", "REFERENCE", "URI"],
                rows.map { [$0.itemClass, $0.label, $0.key ?? "-", $0.certificatePurpose ?? "-", $0.commonName ?? "-",
                            $0.notBefore ?? "-", $0.notAfter ?? "-", $0.tokenLabel, $0.reference, $0.uri] })
        }
        // Cut first what is longest and least needed to act on an item (the
        // reference names it for show, delete and export).
        Console.table(
            ["CLASS", "LABEL", "KEY", "CERT TYPE", "COMMON NAME", "NOT AFTER", "REFERENCE"],
            rows.map { [$0.itemClass, $0.label, $0.key ?? "-", $0.certificatePurpose ?? "-", $0.commonName ?? "-",
                        $0.notAfter.map { String($0.prefix(10)) } ?? "-", $0.reference] },
            fit: Self.width, shrink: [(1, 12), (4, 12), (3, 10), (2, 8)])
    }
}

/// One item as `list` and `show` present it: never a secret value.
struct ItemRow: Encodable {
    var itemClass: String
    var label: String
    var tokenID: String
    var tokenLabel: String
    var key: String?
    /// The key-sharing type of a certificate (device, signature, encryption,
    /// authentication, unknown), as the share tree names its files.
    var certificateType: String?
    /// What the certificate is for, in words (CERT TYPE in the table).
    var certificatePurpose: String?
    var notBefore: String?
    var notAfter: String?
    var subject: String?
    var commonName: String?
    var serial: String?
    var id: String?
    var reference: String
    var uri: String
    var classOrder: Int
    var notAfterUnix: Int64?

    enum CodingKeys: String, CodingKey {
        case itemClass, label, tokenID, tokenLabel, key, certificateType, certificatePurpose, notBefore, notAfter, subject,
             commonName, serial, id, reference, uri, classOrder
    }

    init(_ item: Item, token: TokenRecord) {
        itemClass = ItemClassName.name(item.itemClass)
        label = item.attributes[CKA.label].map { String(decoding: $0, as: UTF8.self) } ?? ""
        tokenID = item.tokenID.description
        tokenLabel = token.label
        reference = item.reference.base64url
        id = item.attributes[CKA.id].map { Hex.upper($0) }
        classOrder = Int(item.itemClass.rawValue & 0xFF)
        let typeName = PKCS11URI.typeName(item.itemClass)
        // A chain certificate kept out of the token is no PKCS #11 object: no URI names it.
        uri = item.isChainOnly ? "-" : PKCS11URI.object(token: token, label: label.isEmpty ? nil : label, id: item.attributes[CKA.id], type: typeName)
        if item.itemClass == .certificate, let der = item.attributes[CKA.value], let cert = try? Certificate(der: der) {
            certificateType = CertificateCategory(certificate: cert).rawValue
            certificatePurpose = CertificatePurpose.name(cert)
            notBefore = Dates.iso8601(cert.notBefore)
            notAfter = Dates.iso8601(cert.notAfter)
            notAfterUnix = cert.notAfter
            subject = cert.subject
            commonName = cert.commonName
            serial = cert.serialHex
            key = KeyDescription.of(cert.publicKey)
        } else if let keyType = item.attributes.ulong(CKA.keyType) {
            key = KeyDescription.of(keyType: keyType, attributes: item.attributes)
        }
    }
}

/// A certificate's CERT TYPE in `keyshare list`: what it is for, in the
/// words people use. The key-sharing types (device, signature, ...) come
/// from Key Usage alone and call a TLS server certificate "device" and a CA
/// "unknown"; here a CA is a CA, the extended key usage names the purpose,
/// and only a certificate without one falls back to the key-sharing type.
enum CertificatePurpose {
    static func name(_ c: Certificate) -> String {
        let selfSigned = c.subjectDER == c.issuerDER
        if c.isCA { return selfSigned ? "self-signed CA" : "CA" }
        var parts: [String] = []
        if let eku = c.extendedKeyUsage {
            switch (eku.contains(.serverAuth), eku.contains(.clientAuth)) {
            case (true, true): parts.append("TLS server+client")
            case (true, false): parts.append("TLS server")
            case (false, true): parts.append("TLS client")
            case (false, false): break
            }
            if eku.contains(.emailProtection) { parts.append("email") }
            if eku.contains(.codeSigning) { parts.append("code signing") }
            if eku.contains(.timeStamping) { parts.append("timestamping") }
            if eku.contains(.ocspSigning) { parts.append("OCSP signing") }
            if eku.contains(.any) { parts.append("any purpose") }
        }
        if parts.isEmpty {
            let category = CertificateCategory(certificate: c)
            parts.append(category == .unknown ? "other" : category.rawValue)
        }
        return parts.joined(separator: ", ") + (selfSigned ? " (self-signed)" : "")
    }
}

enum ItemClassName {
    static func name(_ c: ItemClass) -> String {
        switch c {
        case .certificate: "certificate"
        case .privateKey: "private-key"
        case .publicKey: "public-key"
        case .secretKey: "secret-key"
        case .genericPassword: "password"
        case .data: "data"
        }
    }
}

enum Dates {
    static func iso8601(_ unix: Int64) -> String {
        Date(timeIntervalSince1970: TimeInterval(unix)).formatted(Date.ISO8601FormatStyle())
    }
}

enum KeyDescription {
    static func of(_ k: PublicKey) -> String {
        switch k.keyType {
        case .rsa: "RSA-\(k.bits)"
        case .ec: "EC \(k.curve?.rawValue ?? "?")"
        case .ed25519: "Ed25519"
        case .ed448: "Ed448"
        case .x25519: "X25519"
        case .x448: "X448"
        case .mlDSA, .mlKEM, .slhDSA: "\(k.keyType)"
        }
    }

    static func of(keyType: UInt, attributes: AttributeMap) -> String {
        switch keyType {
        case CKK.rsa:
            if let m = attributes[CKA.modulus] { return "RSA-\(m.count * 8)" }
            if let bits = attributes.ulong(CKA.modulusBits) { return "RSA-\(bits)" }
            return "RSA"
        case CKK.ec:
            if let p = attributes[CKA.ecParams], let c = ECCurve(paramsDER: p) { return "EC \(c.rawValue)" }
            return "EC"
        case CKK.ecEdwards, CKK.ecMontgomery:
            switch attributes[CKA.ecParams].flatMap({ ECXCurve(paramsDER: $0) }) {
            case .ed448?: return "Ed448"
            case .x25519?: return "X25519"
            case .x448?: return "X448"
            default: return keyType == CKK.ecEdwards ? "Ed25519" : "X25519"
            }
        case CKK.aes:
            if let len = attributes.ulong(CKA.valueLen) { return "AES-\(len * 8)" }
            return "AES"
        case CKK.genericSecret: return "generic secret"
        // Legacy finite-field keys: the size of p.
        case CKK.dsa, CKK.dh:
            let name = keyType == CKK.dsa ? "DSA" : "DH"
            if let p = attributes[CKA.prime] { return "\(name)-\(p.drop { $0 == 0 }.count * 8) (legacy)" }
            return "\(name) (legacy)"
        // Legacy DES keys have one size each: DES (56-bit), two- and three-key 3DES.
        case CKK.des: return "DES (legacy)"
        case CKK.des2: return "3DES two-key (legacy)"
        case CKK.des3: return "3DES (legacy)"
        case CKK.chacha20: return "ChaCha20"
        case CKK.mlDSA, CKK.mlKEM, CKK.slhDSA:
            if let set = attributes.ulong(CKA.parameterSet),
               let t = ObjectTemplates.postQuantumType(ckk: keyType, parameterSet: set) { return "\(t)" }
            return keyType == CKK.mlDSA ? "ML-DSA" : keyType == CKK.mlKEM ? "ML-KEM" : "SLH-DSA"
        default: return "key type \(keyType)"
        }
    }
}
