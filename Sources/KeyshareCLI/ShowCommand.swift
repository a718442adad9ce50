import ArgumentParser
import FoundationEssentials
import Glibc
import Keychain
import KeyshareCrypto
import KeySharing

/// `keyshare show`: every attribute of an item, decoded where the type is known.
/// Secret values (key material, password data) are never printed.
struct ShowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "Show all attributes of an item (never a secret).")

    @Argument(help: "A persistent reference (as `list` prints it) or a label.", completion: StoreCompletion.items) var item: String
    @OptionGroup var selection: TokenSelection
    @OptionGroup var pin: PINOptions
    @Flag(help: "JSON output.") var json = false

    func run() throws {
        let ctx = try Context.open()
        var token: TokenRecord?
        var key: TokenKey?
        if pin.pinSource != nil {
            let t = try ctx.token(selection)
            token = t
            key = try ctx.unlock(t, pin)
        } else if selection.token != nil {
            token = try ctx.token(selection)
        }
        let items = try ctx.resolveItems(item, token: token, key: key)
        let shown = try items.map { try ShownItem($0, ctx: ctx) }
        if json { return try Console.json(items.count == 1 ? [shown[0]] : shown) }
        for (i, s) in shown.enumerated() {
            if i > 0 { Console.out("") }
            Console.out("reference: \(s.reference)")
            Console.out("token: \(s.tokenID)")
            Console.out("class: \(s.itemClass)")
            Console.out("uri: \(s.uri)")
            for (name, value) in s.attributes.sorted(by: { $0.key < $1.key }) {
                Console.out("\(name): \(value)")
            }
        }
    }
}

struct ShownItem: Encodable {
    var reference: String
    var tokenID: String
    var itemClass: String
    var uri: String
    var attributes: [String: String]

    init(_ item: Item, ctx: Context) throws {
        reference = item.reference.base64url
        tokenID = item.tokenID.description
        itemClass = ItemClassName.name(item.itemClass)
        let token = try ctx.store.token(item.tokenID)
        let label = item.attributes.string(CKA.label)
        uri = token.map { PKCS11URI.object(token: $0, label: label, id: item.attributes[CKA.id], type: PKCS11URI.typeName(item.itemClass)) } ?? ""
        var attrs: [String: String] = [:]
        for (type, value) in item.attributes where !AttributeNames.isSecret(type, of: item.itemClass) {
            attrs[AttributeNames.name(type)] = AttributeNames.render(type, value)
        }
        if item.itemClass == .certificate, let der = item.attributes[CKA.value], let cert = try? Certificate(der: der) {
            attrs["x509.subject"] = cert.subject
            attrs["x509.issuer"] = cert.issuer
            attrs["x509.serial"] = cert.serialHex
            attrs["x509.notBefore"] = Dates.iso8601(cert.notBefore)
            attrs["x509.notAfter"] = Dates.iso8601(cert.notAfter)
            attrs["x509.sha256"] = Hex.upper(cert.sha256Fingerprint)
            attrs["keyshare.category"] = CertificateCategory(certificate: cert).rawValue
            attrs["x509.publicKey"] = KeyDescription.of(cert.publicKey)
        } else if let keyType = item.attributes.ulong(CKA.keyType) {
            // The algorithm in words ("ML-DSA-65", "RSA-2048", "EC P-256"), as `list` shows it.
            attrs["keyshare.algorithm"] = KeyDescription.of(keyType: keyType, attributes: item.attributes)
        }
        attrs["keyshare.created"] = Dates.iso8601(item.created)
        attrs["keyshare.modified"] = Dates.iso8601(item.modified)
        attributes = attrs
    }
}
