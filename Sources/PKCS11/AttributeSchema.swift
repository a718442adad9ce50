import CPKCS11
import Keychain

/// Which attribute types an object of a class and key type has: the
/// attribute tables of PKCS #11 3.0 (base §4.4-4.10, current mechanisms'
/// per-key-type tables), narrowed to what this module implements.
///
/// PKCS #11 3.0 §5.7 (C_CreateObject, C_CopyObject, C_SetAttributeValue) and
/// §5.18 (the key functions) list CKR_ATTRIBUTE_TYPE_INVALID, "an invalid
/// attribute type was specified in a template" (§5.1.6). A template naming a
/// type its object does not have (CKA_MODULUS on a CKO_SECRET_KEY,
/// CKA_VALUE_LEN on an EC key, a vendor type) gets that answer on every path
/// that takes a template for a new or changed object, as SoftHSM2 gives it
/// (P11Object: a type outside the object's attribute map is
/// CKR_ATTRIBUTE_TYPE_INVALID; probed on 2.6.1, docs/pkcs11-conformance.md
/// "Template attributes") and Kryoptic (its object factories refuse a type
/// they do not list). Storing such a type silently would make the object
/// claim what it is not (an AES key with a modulus) and hand it back to
/// C_FindObjects as if it meant something.
///
/// CKA_WRAP_TEMPLATE (public and secret keys), CKA_UNWRAP_TEMPLATE and
/// CKA_DERIVE_TEMPLATE (private and secret keys) are in the class tables as
/// the 3.0 tables place them; their values are embedded templates, kept in
/// a self-contained encoding (TemplateAttributes.swift).
enum AttributeSchema {
    static let common: Set<CK_ATTRIBUTE_TYPE> = [
        CKA_CLASS, CKA_TOKEN, CKA_PRIVATE, CKA_MODIFIABLE, CKA_LABEL, CKA_COPYABLE, CKA_DESTROYABLE, CKA_UNIQUE_ID,
    ]
    static let data: Set<CK_ATTRIBUTE_TYPE> = [CKA_APPLICATION, CKA_OBJECT_ID, CKA_VALUE]
    static let certificate: Set<CK_ATTRIBUTE_TYPE> = [
        CKA_CERTIFICATE_TYPE, CKA_TRUSTED, CKA_CERTIFICATE_CATEGORY, CKA_CHECK_VALUE, CKA_START_DATE, CKA_END_DATE,
        CKA_PUBLIC_KEY_INFO,
        // X.509 public key certificates (§4.6.3), the one type offered.
        CKA_SUBJECT, CKA_ID, CKA_ISSUER, CKA_SERIAL_NUMBER, CKA_VALUE, CKA_URL, CKA_HASH_OF_SUBJECT_PUBLIC_KEY,
        CKA_HASH_OF_ISSUER_PUBLIC_KEY, CKA_JAVA_MIDP_SECURITY_DOMAIN, CKA_NAME_HASH_ALGORITHM,
    ]
    static let key: Set<CK_ATTRIBUTE_TYPE> = [
        CKA_KEY_TYPE, CKA_ID, CKA_START_DATE, CKA_END_DATE, CKA_DERIVE, CKA_LOCAL, CKA_KEY_GEN_MECHANISM,
        CKA_ALLOWED_MECHANISMS,  // enforced at every key-taking Init (AllowedMechanisms.swift)
    ]
    static let publicKey: Set<CK_ATTRIBUTE_TYPE> = [
        CKA_SUBJECT, CKA_ENCRYPT, CKA_VERIFY, CKA_VERIFY_RECOVER, CKA_WRAP, CKA_TRUSTED, CKA_PUBLIC_KEY_INFO,
        KS_CKA_WRAP_TEMPLATE,
    ]
    static let privateKey: Set<CK_ATTRIBUTE_TYPE> = [
        CKA_SUBJECT, CKA_SENSITIVE, CKA_DECRYPT, CKA_SIGN, CKA_SIGN_RECOVER, CKA_UNWRAP, CKA_EXTRACTABLE,
        CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE, CKA_WRAP_WITH_TRUSTED, CKA_ALWAYS_AUTHENTICATE,
        CKA_PUBLIC_KEY_INFO, KS_CKA_UNWRAP_TEMPLATE, KS_CKA_DERIVE_TEMPLATE,
    ]
    static let secretKey: Set<CK_ATTRIBUTE_TYPE> = [
        CKA_SENSITIVE, CKA_ENCRYPT, CKA_DECRYPT, CKA_SIGN, CKA_VERIFY, CKA_WRAP, CKA_UNWRAP, CKA_EXTRACTABLE,
        CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE, CKA_CHECK_VALUE, CKA_WRAP_WITH_TRUSTED, CKA_TRUSTED,
        KS_CKA_WRAP_TEMPLATE, KS_CKA_UNWRAP_TEMPLATE, KS_CKA_DERIVE_TEMPLATE,
    ]

    /// The key-type part of a key's attribute table, or nil for a key type
    /// the module does not have (the callers answer that one themselves).
    /// CKA_MODULUS_BITS and CKA_PUBLIC_EXPONENT are C_GenerateKeyPair's
    /// inputs on the public template; CKA_EC_PARAMS may come on either half
    /// (the private key's table has it). CKA_VALUE_LEN on DES and DES3,
    /// whose tables lack it, is taken when it names their one size
    /// (SymmetricKeys.swift): templates written for every secret key type
    /// carry it.
    static func keyTypePart(_ cls: CK_OBJECT_CLASS, _ keyType: CK_KEY_TYPE) -> Set<CK_ATTRIBUTE_TYPE>? {
        switch (cls, keyType) {
        // CKA_ENCAPSULATE / CKA_DECAPSULATE: RSA keys encapsulate too (3.2 rsa.md, RSAEncapsulation.swift).
        case (CKO_PUBLIC_KEY, CKK_RSA): [CKA_MODULUS, CKA_MODULUS_BITS, CKA_PUBLIC_EXPONENT, CKA_ENCAPSULATE]
        case (CKO_PRIVATE_KEY, CKK_RSA):
            [CKA_MODULUS, CKA_PUBLIC_EXPONENT, CKA_PRIVATE_EXPONENT, CKA_PRIME_1, CKA_PRIME_2, CKA_EXPONENT_1,
             CKA_EXPONENT_2, CKA_COEFFICIENT, CKA_DECAPSULATE]
        // CKA_ENCAPSULATE / CKA_DECAPSULATE: ECDH keys encapsulate too (3.2 elliptic_curves.md,
        // ECDHEncapsulation.swift); Edwards keys only sign.
        case (CKO_PUBLIC_KEY, CKK_EC), (CKO_PUBLIC_KEY, CKK_EC_MONTGOMERY): [CKA_EC_PARAMS, CKA_EC_POINT, CKA_ENCAPSULATE]
        case (CKO_PUBLIC_KEY, CKK_EC_EDWARDS): [CKA_EC_PARAMS, CKA_EC_POINT]
        case (CKO_PRIVATE_KEY, CKK_EC), (CKO_PRIVATE_KEY, CKK_EC_MONTGOMERY): [CKA_EC_PARAMS, CKA_VALUE, CKA_DECAPSULATE]
        case (CKO_PRIVATE_KEY, CKK_EC_EDWARDS): [CKA_EC_PARAMS, CKA_VALUE]
        // PKCS #11 3.2 §6.67-6.69: the parameter set, the public key (public) or the private key and
        // its seed (private), and the KEM usage flags of ML-KEM keys.
        case (CKO_PUBLIC_KEY, CKK_ML_DSA), (CKO_PUBLIC_KEY, CKK_SLH_DSA): [CKA_PARAMETER_SET, CKA_VALUE]
        case (CKO_PRIVATE_KEY, CKK_ML_DSA), (CKO_PRIVATE_KEY, CKK_SLH_DSA): [CKA_PARAMETER_SET, CKA_VALUE, CKA_SEED]
        // CKA_ENCAPSULATE_TEMPLATE / CKA_DECAPSULATE_TEMPLATE (3.2 public / private key tables) on the
        // one KEM key type, enforced at C_EncapsulateKey / C_DecapsulateKey (TemplateAttributes.swift).
        case (CKO_PUBLIC_KEY, CKK_ML_KEM): [CKA_PARAMETER_SET, CKA_VALUE, CKA_ENCAPSULATE, CKA_ENCAPSULATE_TEMPLATE]
        case (CKO_PRIVATE_KEY, CKK_ML_KEM): [CKA_PARAMETER_SET, CKA_VALUE, CKA_SEED, CKA_DECAPSULATE, CKA_DECAPSULATE_TEMPLATE]
        case (CKO_SECRET_KEY, let k) where k == CKK_AES || k == CKK_GENERIC_SECRET || k == CKK_HKDF || k == CKK_CHACHA20
            || k == CKK_DES || k == CKK_DES3 || Runtime.hmacKeyType.values.contains(k):
            [CKA_VALUE, CKA_VALUE_LEN]
        default: nil
        }
    }

    /// The types an object of `cls` (and `keyType`, for keys) has, or nil
    /// when the module does not know the class or key type.
    static func types(_ cls: CK_OBJECT_CLASS, keyType: CK_KEY_TYPE?) -> Set<CK_ATTRIBUTE_TYPE>? {
        switch cls {
        case CKO_DATA: return common.union(data)
        case CKO_CERTIFICATE: return common.union(certificate)
        case CKO_PUBLIC_KEY, CKO_PRIVATE_KEY, CKO_SECRET_KEY:
            guard let keyType, let part = keyTypePart(cls, keyType) else { return nil }
            let classPart = cls == CKO_PUBLIC_KEY ? publicKey : cls == CKO_PRIVATE_KEY ? privateKey : secretKey
            return common.union(key).union(classPart).union(part)
        default: return nil
        }
    }

    /// Checks a template for an object of `cls` / `keyType`: every type must
    /// be one the object has (CKR_ATTRIBUTE_TYPE_INVALID), and the dates must
    /// be CK_DATEs (CKR_ATTRIBUTE_VALUE_INVALID). A class or key type the
    /// module does not know passes: the caller refuses it with its own code.
    static func check(_ t: AttributeMap, objectClass cls: CK_OBJECT_CLASS, keyType: CK_KEY_TYPE?) throws {
        // Membership in the parts, not in their union: `types` builds that union (four Sets
        // hashed) on every call, which was a third of the module's own work per
        // C_EncapsulateKey / C_DecapsulateKey (callgrind, docs/benchmarks.md). The key-type part
        // is built only when a type is in none of the static parts.
        var part: Set<CK_ATTRIBUTE_TYPE>?? = nil
        for type in t.keys {
            switch cls {
            case CKO_DATA:
                if !common.contains(type) && !data.contains(type) { throw PKCS11Error.attributeTypeInvalid }
            case CKO_CERTIFICATE:
                if !common.contains(type) && !certificate.contains(type) { throw PKCS11Error.attributeTypeInvalid }
            case CKO_PUBLIC_KEY, CKO_PRIVATE_KEY, CKO_SECRET_KEY:
                guard let keyType else { continue }  // `types` gives nil: the caller answers
                let classPart = cls == CKO_PUBLIC_KEY ? publicKey : cls == CKO_PRIVATE_KEY ? privateKey : secretKey
                if common.contains(type) || key.contains(type) || classPart.contains(type) { continue }
                if part == nil { part = .some(keyTypePart(cls, keyType)) }
                guard let p = part!, !p.contains(type) else { continue }  // unknown key type passes, as before
                throw PKCS11Error.attributeTypeInvalid
            default:
                continue
            }
        }
        try checkDates(t)
        try AllowedMechanisms.checkValue(t)
    }

    /// CKA_START_DATE and CKA_END_DATE are CK_DATE (§3.3: year[4],
    /// month[2], day[2], 8 bytes), or empty: the key and certificate tables
    /// give both "default empty". Any other length is
    /// CKR_ATTRIBUTE_VALUE_INVALID, as SoftHSM2 answers (length 0 or
    /// sizeof(CK_DATE)); like SoftHSM2, the digits are not checked.
    static func checkDates(_ t: AttributeMap) throws {
        for type in [CKA_START_DATE, CKA_END_DATE] {
            if let v = t[type], v.count != 0, v.count != 8 {
                throw PKCS11Error.attributeValueInvalid
            }
        }
    }
}
