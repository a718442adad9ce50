import CPKCS11
import Keychain

/// The attribute rules of PKCS #11 objects: which types an object of a class
/// has (and their default values when the writer left them out), which are
/// sensitive, which may change and how.
enum ObjectRules {
    /// Internal attributes that no caller ever sees or sets.
    static let hidden: Set<CK_ATTRIBUTE_TYPE> = [CKA.keysharePKCS8, CKA.keyshareTPM, CKA.keyshareChainOnly]

    static let booleans: Set<CK_ATTRIBUTE_TYPE> = [
        CKA_TOKEN, CKA_PRIVATE, CKA_MODIFIABLE, CKA_COPYABLE, CKA_DESTROYABLE, CKA_TRUSTED, CKA_SENSITIVE,
        CKA_ENCRYPT, CKA_DECRYPT, CKA_WRAP, CKA_UNWRAP, CKA_SIGN, CKA_SIGN_RECOVER, CKA_VERIFY,
        CKA_VERIFY_RECOVER, CKA_DERIVE, CKA_EXTRACTABLE, CKA_LOCAL, CKA_NEVER_EXTRACTABLE, CKA_ALWAYS_SENSITIVE,
        CKA_WRAP_WITH_TRUSTED, CKA_ALWAYS_AUTHENTICATE, CKA_ENCAPSULATE, CKA_DECAPSULATE,
    ]

    /// Values reported for types an object of the class has but whose writer
    /// did not store (the spec's defaults).
    static func defaults(for objectClass: CK_OBJECT_CLASS) -> AttributeMap {
        let f = AttributeCoding.bool(false), t = AttributeCoding.bool(true)
        var a: AttributeMap = [
            CKA_LABEL: [], CKA_MODIFIABLE: t, CKA_COPYABLE: t, CKA_DESTROYABLE: t,
        ]
        let key: AttributeMap = [
            CKA_ID: [], CKA_START_DATE: [], CKA_END_DATE: [], CKA_DERIVE: f, CKA_LOCAL: f,
            CKA_KEY_GEN_MECHANISM: AttributeCoding.ulong(KS_CK_UNAVAILABLE_INFORMATION),
        ]
        switch objectClass {
        case CKO_DATA:
            a.merge([CKA_APPLICATION: [], CKA_OBJECT_ID: [], CKA_VALUE: []]) { old, _ in old }
        case CKO_CERTIFICATE:
            a.merge([
                CKA_CERTIFICATE_TYPE: AttributeCoding.ulong(CKC_X_509), CKA_TRUSTED: f,
                CKA_CERTIFICATE_CATEGORY: AttributeCoding.ulong(0), CKA_START_DATE: [], CKA_END_DATE: [],
                CKA_ID: [], CKA_SUBJECT: [], CKA_ISSUER: [], CKA_SERIAL_NUMBER: [], CKA_URL: [],
                CKA_HASH_OF_SUBJECT_PUBLIC_KEY: [], CKA_HASH_OF_ISSUER_PUBLIC_KEY: [],
                CKA_JAVA_MIDP_SECURITY_DOMAIN: AttributeCoding.ulong(0),
            ]) { old, _ in old }
        case CKO_PUBLIC_KEY:
            a.merge(key) { old, _ in old }
            a.merge([
                CKA_SUBJECT: [], CKA_ENCRYPT: f, CKA_VERIFY: f, CKA_VERIFY_RECOVER: f, CKA_WRAP: f, CKA_TRUSTED: f,
                KS_CKA_WRAP_TEMPLATE: [],
            ]) { old, _ in old }
        case CKO_PRIVATE_KEY:
            a.merge(key) { old, _ in old }
            a.merge([
                CKA_SUBJECT: [], CKA_SENSITIVE: t, CKA_DECRYPT: f, CKA_SIGN: f, CKA_SIGN_RECOVER: f, CKA_UNWRAP: f,
                CKA_EXTRACTABLE: f, CKA_ALWAYS_SENSITIVE: f, CKA_NEVER_EXTRACTABLE: f, CKA_WRAP_WITH_TRUSTED: f,
                CKA_ALWAYS_AUTHENTICATE: f, KS_CKA_UNWRAP_TEMPLATE: [], KS_CKA_DERIVE_TEMPLATE: [],
            ]) { old, _ in old }
        case CKO_SECRET_KEY:
            a.merge(key) { old, _ in old }
            a.merge([
                CKA_SENSITIVE: t, CKA_ENCRYPT: f, CKA_DECRYPT: f, CKA_SIGN: f, CKA_VERIFY: f, CKA_WRAP: f,
                CKA_UNWRAP: f, CKA_EXTRACTABLE: f, CKA_ALWAYS_SENSITIVE: f, CKA_NEVER_EXTRACTABLE: f,
                CKA_WRAP_WITH_TRUSTED: f, CKA_TRUSTED: f,
                KS_CKA_WRAP_TEMPLATE: [], KS_CKA_UNWRAP_TEMPLATE: [], KS_CKA_DERIVE_TEMPLATE: [],
            ]) { old, _ in old }
        default:
            break
        }
        return a
    }

    /// Secret parts: readable only from a key that is neither sensitive nor
    /// unextractable.
    static func isSecretPart(_ type: CK_ATTRIBUTE_TYPE, objectClass: CK_OBJECT_CLASS) -> Bool {
        switch objectClass {
        case CKO_PRIVATE_KEY:
            return [CKA_PRIVATE_EXPONENT, CKA_PRIME_1, CKA_PRIME_2, CKA_EXPONENT_1, CKA_EXPONENT_2,
                    CKA_COEFFICIENT, CKA_VALUE, CKA_SEED].contains(type)
        case CKO_SECRET_KEY:
            return type == CKA_VALUE
        case ItemClass.genericPassword.rawValue:
            return type == CKA_VALUE
        default:
            return false
        }
    }

    static func isSensitive(_ view: ObjectView, _ type: CK_ATTRIBUTE_TYPE) -> Bool {
        guard isSecretPart(type, objectClass: view.objectClass) else { return false }
        if view.objectClass == ItemClass.genericPassword.rawValue { return true }
        // Private parts of a non-sensitive, extractable key are readable
        // (computed from the PKCS #8 in PrivateParts.swift), like a secret key's value.
        return view.bool(CKA_SENSITIVE) ?? true || !(view.bool(CKA_EXTRACTABLE) ?? false)
    }

    /// C_GetAttributeValue's view of one type.
    static func lookup(_ view: ObjectView, _ type: CK_ATTRIBUTE_TYPE) -> AttributeLookup {
        if hidden.contains(type) { return .typeInvalid }
        if TemplateAttributes.isTemplateType(type) {
            // An embedded template (TemplateAttributes.swift); keys of the classes that have it, else none.
            guard case .value(let b) = lookupBytes(view, type) else {
                // CKA_ENCAPSULATE_TEMPLATE / CKA_DECAPSULATE_TEMPLATE of an ML-KEM key that has none set.
                return TemplateAttributes.isKEMTemplate(type, of: view) ? .template([]) : .typeInvalid
            }
            // An old store's pointer bytes read as the empty template (TemplateAttributes.swift).
            return .template(TemplateAttributes.decode(b) ?? [])
        }
        return lookupBytes(view, type)
    }

    /// An attribute's stored (or computed, or default) bytes.
    static func lookupBytes(_ view: ObjectView, _ type: CK_ATTRIBUTE_TYPE) -> AttributeLookup {
        if hidden.contains(type) { return .typeInvalid }
        if isSensitive(view, type) { return .sensitive }
        if let v = view.attributes[type] { return .value(v) }
        // Objects stored before the module computed CKA_CHECK_VALUE (CheckValue.swift).
        if type == CKA_CHECK_VALUE, let value = view.attributes[CKA_VALUE],
           let kcv = CheckValue.compute(objectClass: view.objectClass, keyType: view.keyType, value: value) {
            return .value(kcv)
        }
        if view.objectClass == CKO_PRIVATE_KEY, isSecretPart(type, objectClass: CKO_PRIVATE_KEY) {
            return PrivateParts.component(view, type).map { .value($0) } ?? .typeInvalid
        }
        if let v = defaults(for: view.objectClass)[type] { return .value(v) }
        return .typeInvalid
    }

    /// The CKA_PRIVATE rule (docs/pkcs11-conformance.md, "CKA_PRIVATE"):
    /// objects that carry secret material (private keys, secret keys, generic
    /// passwords) are private when they are stored, because that material is
    /// sealed under the token key, which only the user's login unlocks. PKCS
    /// #11 3.0 leaves the default "token-specific" (§4.4, common storage object
    /// attributes) and lets C_CopyObject change CKA_PRIVATE, but a value
    /// "incompatible with other existing attributes of the object" fails with
    /// CKR_TEMPLATE_INCONSISTENT (§5.7, C_CopyObject): so does CKA_PRIVATE=false
    /// for a token object of these classes, logged in or not. SoftHSM2 differs:
    /// it stores such keys in the clear.
    ///
    /// A session object (CKA_TOKEN=false) may be born public (issue 29): it is
    /// never stored, lives in this process's memory only and dies with its
    /// session, so nothing is left unsealed; it is a public object of the
    /// session as PKCS #11 3.0 defines them (usable without a login, as in
    /// SoftHSM2, Kryoptic and NSS). What stays: a private object never becomes
    /// public (C_SetAttributeValue, C_CopyObject: `checkPrivacyChange`), and a
    /// key made from a private key's material (derived, unwrapped,
    /// decapsulated) is private too (`checkInheritedPrivacy`), so no key that
    /// was private is usable after C_Logout.
    static func alwaysPrivate(_ objectClass: CK_OBJECT_CLASS) -> Bool {
        objectClass == CKO_PRIVATE_KEY || objectClass == CKO_SECRET_KEY || objectClass == ItemClass.genericPassword.rawValue
    }

    /// What the refusal of a public token key says (the debug log, the agent's log).
    static let publicTokenKeyMessage =
        "CKA_PRIVATE=false refused for a token private or secret key (CKR_TEMPLATE_INCONSISTENT): its material would be "
        + "stored without the PIN's protection. Make it private (pkcs11-tool --private), or a session key (CKA_TOKEN=false), "
        + "which may be public"

    /// Refuses a template that asks for a public secret-bearing token object.
    /// `isToken` is where the object will live: the template's CKA_TOKEN unless the caller knows better.
    static func checkPrivacy(_ objectClass: CK_OBJECT_CLASS, _ t: AttributeMap, isToken: Bool? = nil) throws {
        guard alwaysPrivate(objectClass), try t.checkedBool(CKA_PRIVATE) == false else { return }
        if try isToken ?? (t.checkedBool(CKA_TOKEN) ?? false) {
            Log.warning(publicTokenKeyMessage)
            throw PKCS11Error.templateInconsistent
        }
    }

    /// C_SetAttributeValue and C_CopyObject: a private key is never made public. (Data objects and
    /// certificates carry no key material; a copy of one may change CKA_PRIVATE, §5.7.)
    static func checkPrivacyChange(_ view: ObjectView, _ t: AttributeMap) throws {
        if alwaysPrivate(view.objectClass), view.isPrivate, try t.checkedBool(CKA_PRIVATE) == false {
            throw PKCS11Error.templateInconsistent
        }
    }

    /// A key made from other keys' material (C_DeriveKey's base and its other keys, C_UnwrapKey's
    /// unwrapping key, C_DecapsulateKey's private key): if any of them is private, a template
    /// asking for a public key is CKR_TEMPLATE_INCONSISTENT, as C_CopyObject of that key would be.
    /// Otherwise a derived key of a private key's value (CKM_EXTRACT_KEY_FROM_KEY from bit 0,
    /// CKM_XOR_BASE_AND_DATA with zeros) or a private key unwrapped again would outlive C_Logout.
    static func checkInheritedPrivacy(_ sources: [ObjectView], _ t: AttributeMap) throws {
        if sources.contains(where: { $0.isPrivate }), try t.checkedBool(CKA_PRIVATE) == false {
            throw PKCS11Error.templateInconsistent
        }
    }

    /// Whether a stored item is private to the module: its CKA_PRIVATE, or
    /// the rule above for keys a store from before the rule holds as public.
    static func isPrivate(_ item: Item) -> Bool { item.isPrivate || alwaysPrivate(item.itemClass.rawValue) }

    /// Types fixed at creation (or computed from the key material).
    static let readOnly: Set<CK_ATTRIBUTE_TYPE> = [
        CKA_CLASS, CKA_TOKEN, CKA_PRIVATE, CKA_UNIQUE_ID, CKA_KEY_TYPE, CKA_LOCAL, CKA_KEY_GEN_MECHANISM,
        CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE, CKA_MODULUS, CKA_MODULUS_BITS, CKA_PUBLIC_EXPONENT,
        CKA_PRIVATE_EXPONENT, CKA_PRIME_1, CKA_PRIME_2, CKA_EXPONENT_1, CKA_EXPONENT_2, CKA_COEFFICIENT,
        CKA_VALUE_BITS, CKA_VALUE_LEN, CKA_EC_PARAMS, CKA_EC_POINT, CKA_CERTIFICATE_TYPE, CKA_MODIFIABLE,
        CKA_PUBLIC_KEY_INFO, CKA_CHECK_VALUE, CKA_PARAMETER_SET,
        // Embedded templates: no footnote 8 in the 3.0 key tables, so fixed
        // once the key exists (C_SetAttributeValue and C_CopyObject), else a
        // restriction could be lifted by whoever may use the key.
        // SoftHSM2 lets them change (docs/pkcs11-conformance.md).
        KS_CKA_WRAP_TEMPLATE, KS_CKA_UNWRAP_TEMPLATE, KS_CKA_DERIVE_TEMPLATE,
        CK_ATTRIBUTE_TYPE(CKA_ENCAPSULATE_TEMPLATE), CK_ATTRIBUTE_TYPE(CKA_DECAPSULATE_TEMPLATE),
    ]

    /// What only the token says of an object: "must not be specified when
    /// object is created with C_CreateObject" (PKCS #11 3.0 attribute tables,
    /// common footnote 2). A template naming one is CKR_ATTRIBUTE_READ_ONLY,
    /// as C_GenerateKey's already was (SoftHSM2 answers the same).
    static let setByTokenOnly: Set<CK_ATTRIBUTE_TYPE> = [
        CKA_LOCAL, CKA_KEY_GEN_MECHANISM, CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE, CKA_UNIQUE_ID,
    ]

    /// CKA_TRUSTED "can only be set to CK_TRUE by the SO user" (footnote 10),
    /// at creation as in C_SetAttributeValue: the wrap rules trust such a
    /// key's value (KeyUsagePolicy), so a user must not plant one.
    static func checkTrusted(_ t: AttributeMap, soLoggedIn: Bool) throws {
        if try t.checkedBool(CKA_TRUSTED) == true, !soLoggedIn { throw PKCS11Error.attributeReadOnly }
    }

    /// Checks one C_SetAttributeValue entry against the object as it is now.
    static func checkSet(_ view: ObjectView, _ a: Attribute, soLoggedIn: Bool) throws {
        if hidden.contains(a.type) { throw PKCS11Error.attributeTypeInvalid }
        // A type the object does not have; a date that is no CK_DATE (AttributeSchema.swift).
        if let allowed = AttributeSchema.types(view.objectClass, keyType: view.keyType), !allowed.contains(a.type) {
            throw PKCS11Error.attributeTypeInvalid
        }
        try AttributeSchema.checkDates([a.type: a.value])
        try AllowedMechanisms.checkValue([a.type: a.value])
        // Empty destroys it, the computed value is accepted (CheckValue.swift).
        if a.type == CKA_CHECK_VALUE {
            try CheckValue.checkSet(view, a.value)
            return
        }
        if a.type == CKA_PRIVATE, alwaysPrivate(view.objectClass), view.isPrivate, AttributeCoding.decodeBool(a.value) == false {
            throw PKCS11Error.templateInconsistent
        }
        if readOnly.contains(a.type) { throw PKCS11Error.attributeReadOnly }
        if a.type == CKA_VALUE, view.objectClass != CKO_DATA { throw PKCS11Error.attributeReadOnly }
        try KeyUsagePolicy.checkChange(view, a)  // fixed secret-key usage (KeyUsagePolicy.swift)
        if booleans.contains(a.type) {
            guard let new = AttributeCoding.decodeBool(a.value) else { throw PKCS11Error.attributeValueInvalid }
            let old = view.bool(a.type)
            switch a.type {
            // One-way switches: a key can become more protected, never less.
            case CKA_SENSITIVE where old == true && !new: throw PKCS11Error.attributeReadOnly
            case CKA_EXTRACTABLE where old == false && new: throw PKCS11Error.attributeReadOnly
            case CKA_WRAP_WITH_TRUSTED where old == true && !new: throw PKCS11Error.attributeReadOnly
            case CKA_COPYABLE where old == false && new: throw PKCS11Error.attributeReadOnly
            case CKA_TRUSTED where new && !soLoggedIn: throw PKCS11Error.attributeReadOnly
            default: break
            }
        }
    }
}
