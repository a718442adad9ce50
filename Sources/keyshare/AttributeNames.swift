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
    ]

    static let booleans: Set<AttributeType> = [
        CKA.token, CKA.private, CKA.trusted, CKA.sensitive, CKA.encrypt, CKA.decrypt, CKA.wrap, CKA.unwrap, CKA.sign,
        CKA.signRecover, CKA.verify, CKA.verifyRecover, CKA.derive, CKA.extractable, CKA.local, CKA.neverExtractable,
        CKA.alwaysSensitive, CKA.modifiable, CKA.copyable, CKA.destroyable, CKA.alwaysAuthenticate, CKA.wrapWithTrusted,
    ]
    static let numbers: Set<AttributeType> = [
        CKA.class, CKA.certificateType, CKA.certificateCategory, CKA.keyType, CKA.modulusBits, CKA.valueLen, CKA.keyGenMechanism,
    ]
    static let texts: Set<AttributeType> = [CKA.label, CKA.application, CKA.uniqueID]

    static func name(_ t: AttributeType) -> String {
        names[t] ?? String(format: "0x%08lX", t)
    }

    /// Key material and password data; everything else of an item may be shown.
    static func isSecret(_ t: AttributeType, of c: ItemClass) -> Bool {
        switch t {
        case CKA.keysharePKCS8, CKA.privateExponent, CKA.prime1, CKA.prime2, CKA.exponent1, CKA.exponent2, CKA.coefficient:
            return true
        case CKA.value:
            return c == .privateKey || c == .secretKey || c == .genericPassword
        default:
            return t >= CKA.vendorDefined
        }
    }

    static func render(_ t: AttributeType, _ v: [UInt8]) -> String {
        if booleans.contains(t), let b = AttributeCoding.decodeBool(v) { return b ? "true" : "false" }
        if numbers.contains(t), let n = AttributeCoding.decodeULong(v) { return String(n) }
        if texts.contains(t) { return String(decoding: v, as: UTF8.self) }
        return Hex.upper(v)
    }
}
