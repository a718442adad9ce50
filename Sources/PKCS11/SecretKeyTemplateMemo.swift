import CPKCS11
import Keychain
import KeyshareCrypto

/// The last secret-key attribute set `Runtime.secretKeyAttributes` built, without the key's
/// value, with the inputs it was built from. An application that makes key after key from the
/// same template (C_EncapsulateKey / C_DecapsulateKey / C_DeriveKey per message) then gets a copy
/// of it instead of the template checks and a dozen insertions again: about a quarter of the
/// module's own work per ML-KEM call (docs/benchmarks.md, "Module work per KEM call").
///
/// Sound because the set is a pure function of what is compared here: the caller's template,
/// the key type, the generation mechanism and `bornSecret` (the checks read nothing else, and
/// the value only sets CKA_VALUE and CKA_VALUE_LEN, which the caller adds to the copy). A
/// template that fails a check is never remembered, so it fails again. No secret is kept: a
/// template with CKA_VALUE fails the checks, and the value is added after the set is remembered.
final class SecretKeyTemplateMemo: @unchecked Sendable {
    private struct Entry {
        let template: AttributeMap
        let keyType: CK_KEY_TYPE
        let mechanism: CK_MECHANISM_TYPE?
        let bornSecret: Bool
        let attributes: AttributeMap
    }

    private let lock = Lock()
    /// Guarded by `lock`.
    private var last: Entry?

    /// The remembered set for these inputs, or nil.
    func attributes(template: AttributeMap, keyType: CK_KEY_TYPE, mechanism: CK_MECHANISM_TYPE?,
                    bornSecret: Bool) -> AttributeMap? {
        guard let e = lock.withLock({ last }), e.keyType == keyType, e.mechanism == mechanism,
              e.bornSecret == bornSecret, e.template == template else { return nil }
        return e.attributes
    }

    func remember(template: AttributeMap, keyType: CK_KEY_TYPE, mechanism: CK_MECHANISM_TYPE?, bornSecret: Bool,
                  attributes: AttributeMap) {
        let e = Entry(template: template, keyType: keyType, mechanism: mechanism, bornSecret: bornSecret,
                      attributes: attributes)
        lock.withLock { last = e }
    }
}
