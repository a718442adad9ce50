import ArgumentParser
import Foundation
import Keychain
import KeySharing
import KeyshareCrypto
import Tokens

/// `keyshare list`: what the keychain holds. Public items are listed without a
/// PIN; private items (keys) are encrypted, labels included, so listing them
/// needs the token unlocked (`--pin-source`, or `--private` to be asked).
struct ListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List items: class, label, token, key, certificate type, reference and PKCS #11 URI.")

    @OptionGroup var selection: TokenSelection
    @OptionGroup var pin: PINOptions
    @Flag(name: .customLong("private"), help: "Include private items (asks for the PIN unless --pin-source is given).")
    var includePrivate = false
    @Flag(help: "JSON output.") var json = false

    func run() throws {
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
        rows.sort { ($0.tokenID, $0.label, $0.classOrder) < ($1.tokenID, $1.label, $1.classOrder) }
        if json { return try Console.json(rows) }
        if rows.isEmpty { return Console.out("no items") }
        Console.table(
            ["CLASS", "LABEL", "KEY", "CERT TYPE", "NOT BEFORE", "REFERENCE", "URI"],
            rows.map { [$0.itemClass, $0.label, $0.key ?? "-", $0.certificateType ?? "-", $0.notBefore ?? "-", $0.reference, $0.uri] })
    }
}

/// One item as `list` and `show` present it: never a secret value.
struct ItemRow: Encodable {
    var itemClass: String
    var label: String
    var tokenID: String
    var key: String?
    var certificateType: String?
    var notBefore: String?
    var subject: String?
    var serial: String?
    var id: String?
    var reference: String
    var uri: String
    var classOrder: Int

    init(_ item: Item, token: TokenRecord) {
        itemClass = ItemClassName.name(item.itemClass)
        label = item.attributes[CKA.label].map { String(decoding: $0, as: UTF8.self) } ?? ""
        tokenID = item.tokenID.description
        reference = item.reference.base64url
        id = item.attributes[CKA.id].map { $0.map { String(format: "%02X", $0) }.joined() }
        classOrder = Int(item.itemClass.rawValue & 0xFF)
        let typeName = PKCS11URI.typeName(item.itemClass)
        // A chain certificate kept out of the token is no PKCS #11 object: no URI names it.
        uri = item.isChainOnly ? "-" : PKCS11URI.object(token: token, label: label.isEmpty ? nil : label, id: item.attributes[CKA.id], type: typeName)
        if item.itemClass == .certificate, let der = item.attributes[CKA.value], let cert = try? Certificate(der: der) {
            certificateType = CertificateCategory(certificate: cert).rawValue
            notBefore = Dates.iso8601(cert.notBefore)
            subject = cert.subject
            serial = cert.serialHex
            key = KeyDescription.of(cert.publicKey)
        } else if let keyType = item.attributes.ulong(CKA.keyType) {
            key = KeyDescription.of(keyType: keyType, attributes: item.attributes)
        }
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
        let f = ISO8601DateFormatter()
        f.timeZone = TimeZone(identifier: "UTC")
        return f.string(from: Date(timeIntervalSince1970: TimeInterval(unix)))
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
