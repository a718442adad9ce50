import Keychain

/// Names and renderings of PKCS #11 attributes for `show`.
enum AttributeNames {
    static let names: [AttributeType: String] = [
        CKA.class: "CKA_CLASS", CKA.token: "CKA_TOKEN", CKA.private: "CKA_PRIVATE", CKA.label: "CKA_LABEL",
        CKA.uniqueID: "CKA_UNIQUE_ID", CKA.application: "CKA_APPLICATION", CKA.value: "CKA_VALUE",
        CKA.objectID: "CKA_OBJECT_ID", CKA.certificateType: "CKA_CERTIFICATE_TYPE", CKA.issuer: "CKA_ISSUER",
        CKA.serialNumber: "CKA_SERIAL_NUMBER", CKA.trusted: "CKA_TRUSTED", CKA.certificateCategory: "CKA_CERTIFICATE_CATEGORY",
        CKA.checkValue: "CKA_CHECK_VALUE", CKA.keyType: "CKA_KEY_TYPE", CKA.subject: "CKA_SUBJECT", CKA.id: "CKA_ID",
        CKA.sensitive: "CKA_SENSITIVE", CKA.encrypt: "CKA_ENCRYPT", CKA.decrypt: "CKA_DECRYPT", CKA.wrap: "CKA_WRAP",
        CKA.unwrap: "CKA_UNWRAP", CKA.sign: "CKA_SIGN", CKA.signRecover: "CKA_SIGN_RECOVER", CKA.verify: "CKA_VERIFY",
        CKA.verifyRecover: "CKA_VERIFY_RECOVER", CKA.derive: "CKA_DERIVE", CKA.startDate: "CKA_START_DATE",
        CKA.endDate: "CKA_END_DATE", CKA.modulus: "CKA_MODULUS", CKA.modulusBits: "CKA_MODULUS_BITS",
        CKA.publicExponent: "CKA_PUBLIC_EXPONENT", CKA.privateExponent: "CKA_PRIVATE_EXPONENT", CKA.prime1: "CKA_PRIME_1",
        CKA.prime2: "CKA_PRIME_2", CKA.exponent1: "CKA_EXPONENT_1", CKA.exponent2: "CKA_EXPONENT_2",
        CKA.coefficient: "CKA_COEFFICIENT", CKA.publicKeyInfo: "CKA_PUBLIC_KEY_INFO", CKA.valueLen: "CKA_VALUE_LEN",
        CKA.extractable: "CKA_EXTRACTABLE", CKA.local: "CKA_LOCAL", CKA.neverExtractable: "CKA_NEVER_EXTRACTABLE",
        CKA.alwaysSensitive: "CKA_ALWAYS_SENSITIVE", CKA.keyGenMechanism: "CKA_KEY_GEN_MECHANISM",
        CKA.modifiable: "CKA_MODIFIABLE", CKA.copyable: "CKA_COPYABLE", CKA.destroyable: "CKA_DESTROYABLE",
        CKA.ecParams: "CKA_EC_PARAMS", CKA.ecPoint: "CKA_EC_POINT", CKA.alwaysAuthenticate: "CKA_ALWAYS_AUTHENTICATE",
        CKA.wrapWithTrusted: "CKA_WRAP_WITH_TRUSTED", CKA.allowedMechanisms: "CKA_ALLOWED_MECHANISMS",
        // PKCS #11 3.2 (issue 18).
        CKA.parameterSet: "CKA_PARAMETER_SET", CKA.encapsulate: "CKA_ENCAPSULATE", CKA.decapsulate: "CKA_DECAPSULATE",
        CKA.seed: "CKA_SEED",
    ]

    static let booleans: Set<AttributeType> = [
        CKA.token, CKA.private, CKA.trusted, CKA.sensitive, CKA.encrypt, CKA.decrypt, CKA.wrap, CKA.unwrap, CKA.sign,
        CKA.signRecover, CKA.verify, CKA.verifyRecover, CKA.derive, CKA.extractable, CKA.local, CKA.neverExtractable,
        CKA.alwaysSensitive, CKA.modifiable, CKA.copyable, CKA.destroyable, CKA.alwaysAuthenticate, CKA.wrapWithTrusted,
        CKA.encapsulate, CKA.decapsulate,
    ]
    static let numbers: Set<AttributeType> = [CKA.modulusBits, CKA.valueLen, CKA.parameterSet]
    static let texts: Set<AttributeType> = [CKA.label, CKA.application, CKA.uniqueID]
    static let dates: Set<AttributeType> = [CKA.startDate, CKA.endDate]

    /// CK_UNAVAILABLE_INFORMATION: the token cannot tell (an imported key's
    /// CKA_KEY_GEN_MECHANISM). Shown as a word, not as 18446744073709551615.
    static let unavailable: UInt = ~0

    static func name(_ t: AttributeType) -> String {
        names[t] ?? Hex.constant(t)
    }

    /// Key material and password data; everything else of an item may be shown.
    static func isSecret(_ t: AttributeType, of c: ItemClass) -> Bool {
        switch t {
        // CKA_SEED: a post-quantum private key's seed is the key (PKCS #11 3.2 makes it sensitive).
        case CKA.keysharePKCS8, CKA.privateExponent, CKA.prime1, CKA.prime2, CKA.exponent1, CKA.exponent2, CKA.coefficient,
             CKA.seed:
            return true
        case CKA.value:
            return c == .privateKey || c == .secretKey || c == .genericPassword
        default:
            return t >= CKA.vendorDefined
        }
    }

    /// Booleans as true/false, enumerations by their PKCS #11 names,
    /// CK_DATE as ISO 8601 (YYYY-MM-DD), CK_UNAVAILABLE_INFORMATION as
    /// "unavailable", text as text, the rest as hex.
    static func render(_ t: AttributeType, _ v: [UInt8]) -> String {
        if booleans.contains(t), let b = AttributeCoding.decodeBool(v) { return b ? "true" : "false" }
        if texts.contains(t) { return String(decoding: v, as: UTF8.self) }
        if dates.contains(t) { return date(v) }
        if let names = enumerations[t], let n = AttributeCoding.decodeULong(v) {
            if n == unavailable { return "unavailable" }
            return names(n)
        }
        if numbers.contains(t), let n = AttributeCoding.decodeULong(v) { return n == unavailable ? "unavailable" : String(n) }
        if t == CKA.allowedMechanisms {
            guard !v.isEmpty, v.count % 8 == 0 else { return v.isEmpty ? "none" : Hex.upper(v) }
            return stride(from: 0, to: v.count, by: 8).compactMap { AttributeCoding.decodeULong(Array(v[$0..<($0 + 8)])) }
                .map(mechanism).joined(separator: ", ")
        }
        return Hex.upper(v)
    }

    /// CK_DATE is eight ASCII digits; empty means "not set" (PKCS #11 §4.4).
    static func date(_ v: [UInt8]) -> String {
        if v.isEmpty { return "not set" }
        guard v.count == 8, v.allSatisfy({ (0x30...0x39).contains($0) }) else { return Hex.upper(v) }
        let s = String(decoding: v, as: UTF8.self)
        return "\(s.prefix(4))-\(s.dropFirst(4).prefix(2))-\(s.suffix(2))"
    }

    static let enumerations: [AttributeType: @Sendable (UInt) -> String] = [
        CKA.class: objectClass, CKA.keyType: keyType, CKA.certificateType: certificateType,
        CKA.certificateCategory: certificateCategory, CKA.keyGenMechanism: mechanism,
    ]

    @Sendable static func objectClass(_ n: UInt) -> String {
        switch n {
        case CKO.data: "CKO_DATA"
        case CKO.certificate: "CKO_CERTIFICATE"
        case CKO.publicKey: "CKO_PUBLIC_KEY"
        case CKO.privateKey: "CKO_PRIVATE_KEY"
        case CKO.secretKey: "CKO_SECRET_KEY"
        case ItemClass.genericPassword.rawValue: "CKO_VENDOR_DEFINED|0x4B50 (keyshare generic password)"
        default: Hex.constant(n)
        }
    }

    @Sendable static func keyType(_ n: UInt) -> String {
        switch n {
        case CKK.rsa: "CKK_RSA"
        case CKK.dsa: "CKK_DSA"
        case CKK.dh: "CKK_DH"
        case CKK.ec: "CKK_EC"
        case CKK.ecEdwards: "CKK_EC_EDWARDS"
        case CKK.aes: "CKK_AES"
        case CKK.genericSecret: "CKK_GENERIC_SECRET"
        case CKK.des: "CKK_DES"
        case CKK.des2: "CKK_DES2"
        case CKK.des3: "CKK_DES3"
        case CKK.chacha20: "CKK_CHACHA20"
        case CKK.mlKEM: "CKK_ML_KEM"
        case CKK.mlDSA: "CKK_ML_DSA"
        case CKK.slhDSA: "CKK_SLH_DSA"
        default: Hex.constant(n)
        }
    }

    @Sendable static func certificateType(_ n: UInt) -> String {
        n == CKC.x509 ? "CKC_X_509" : Hex.constant(n)
    }

    @Sendable static func certificateCategory(_ n: UInt) -> String {
        switch n {
        case CertificateCategory.unspecified: "unspecified (0)"
        case CertificateCategory.tokenUser: "token user (1)"
        case CertificateCategory.authority: "authority (2)"
        case CertificateCategory.otherEntity: "other entity (3)"
        default: String(n)
        }
    }

    /// The mechanisms keyshare makes or allows keys with.
    static let mechanisms: [UInt: String] = [
        0x0000: "CKM_RSA_PKCS_KEY_PAIR_GEN", 0x0001: "CKM_RSA_PKCS", 0x0003: "CKM_RSA_X_509", 0x0009: "CKM_RSA_PKCS_OAEP",
        0x000D: "CKM_RSA_PKCS_PSS", 0x0040: "CKM_SHA256_RSA_PKCS", 0x0041: "CKM_SHA384_RSA_PKCS", 0x0042: "CKM_SHA512_RSA_PKCS",
        0x0043: "CKM_SHA256_RSA_PKCS_PSS", 0x0044: "CKM_SHA384_RSA_PKCS_PSS", 0x0045: "CKM_SHA512_RSA_PKCS_PSS",
        0x0251: "CKM_SHA256_HMAC", 0x0261: "CKM_SHA384_HMAC", 0x0271: "CKM_SHA512_HMAC",
        0x0350: "CKM_GENERIC_SECRET_KEY_GEN", 0x1040: "CKM_EC_KEY_PAIR_GEN", 0x1041: "CKM_ECDSA", 0x1042: "CKM_ECDSA_SHA1",
        0x1044: "CKM_ECDSA_SHA256", 0x1045: "CKM_ECDSA_SHA384", 0x1046: "CKM_ECDSA_SHA512", 0x1050: "CKM_ECDH1_DERIVE",
        0x1055: "CKM_EC_EDWARDS_KEY_PAIR_GEN", 0x1057: "CKM_EDDSA", 0x1080: "CKM_AES_KEY_GEN", 0x1082: "CKM_AES_CBC",
        0x1085: "CKM_AES_CBC_PAD", 0x1087: "CKM_AES_GCM", 0x2109: "CKM_AES_KEY_WRAP", 0x210A: "CKM_AES_KEY_WRAP_PAD",
        CKM.mlKEMKeyPairGen: "CKM_ML_KEM_KEY_PAIR_GEN", CKM.mlKEM: "CKM_ML_KEM", CKM.mlDSAKeyPairGen: "CKM_ML_DSA_KEY_PAIR_GEN",
        CKM.mlDSA: "CKM_ML_DSA", CKM.hashMLDSA: "CKM_HASH_ML_DSA", CKM.slhDSAKeyPairGen: "CKM_SLH_DSA_KEY_PAIR_GEN",
        CKM.slhDSA: "CKM_SLH_DSA",
    ]

    @Sendable static func mechanism(_ n: UInt) -> String {
        if n == unavailable { return "unavailable" }
        return mechanisms[n] ?? Hex.constant(n)
    }
}
