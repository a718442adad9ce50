import CPKCS11
import Keychain

/// Find templates that name an attribute by its default value.
///
/// C_GetAttributeValue answers attributes an object does not store from the
/// class defaults (ObjectRules.defaults: CKA_START_DATE empty, CKA_COPYABLE
/// true ...), but the store's query matches stored values only, so a
/// template copied from an object's own answers found nothing. Such
/// template entries are taken out of the store query and matched here
/// against the stored value or, when there is none, the class default, as
/// SoftHSM2 and Kryoptic match every attribute an object answers.
extension Runtime {
    /// The template entries whose value is a default of some object class.
    static func defaultValued(_ template: AttributeMap) -> AttributeMap {
        let classes: [CK_OBJECT_CLASS] = [CKO_DATA, CKO_CERTIFICATE, CKO_PUBLIC_KEY, CKO_PRIVATE_KEY, CKO_SECRET_KEY]
        var out: AttributeMap = [:]
        for (type, value) in template where classes.contains(where: { ObjectRules.defaults(for: $0)[type] == value }) {
            out[type] = value
        }
        return out
    }

    /// Whether the item answers every entry with that value, stored or by default.
    static func matches(_ item: Item, _ entries: AttributeMap) -> Bool {
        guard !entries.isEmpty else { return true }
        let defaults = ObjectRules.defaults(for: CK_OBJECT_CLASS(item.itemClass.rawValue))
        return entries.allSatisfy { type, value in (item.attributes[type] ?? defaults[type]) == value }
    }
}

extension Item {
    /// CKA_PRIVATE as the module shows it: an external token's private-key
    /// proxy is private, as the key on the card is (it is hidden before
    /// login like one), though the store keeps it unsealed because it holds
    /// no secret (ExternalDriver.proxy).
    var showsPrivate: Bool { isPrivate || attributes[CKA.keyshareExternal] != nil }
}
