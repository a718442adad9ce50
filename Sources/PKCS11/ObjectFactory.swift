import CPKCS11
import Keychain
import KeyshareCrypto
import Tokens

/// C_CreateObject's templates turned into the attribute sets the CLI writes
/// too (Tokens.ObjectTemplates), so an object looks the same whoever made it.
/// The caller's template wins for everything it says, except the values that
/// are derived from the key or certificate itself.
enum ObjectFactory {
    static func privateByDefault(_ cls: CK_OBJECT_CLASS) -> Bool {
        cls == CKO_PRIVATE_KEY || cls == CKO_SECRET_KEY || cls == ItemClass.genericPassword.rawValue
    }

    static func build(_ t: AttributeMap, soLoggedIn: Bool) throws -> AttributeMap {
        guard let cls = try t.checkedULong(CKA_CLASS) else { throw PKCS11Error.templateIncomplete }
        for type in t.keys where ObjectRules.hidden.contains(type) { throw PKCS11Error.attributeTypeInvalid }
        // Types the object does not have, malformed dates (AttributeSchema.swift).
        try AttributeSchema.check(t, objectClass: cls, keyType: try t.checkedULong(CKA_KEY_TYPE))
        for type in t.keys where ObjectRules.booleans.contains(type) { _ = try t.checkedBool(type) }
        for type in t.keys where ObjectRules.setByTokenOnly.contains(type) { throw PKCS11Error.attributeReadOnly }
        try ObjectRules.checkTrusted(t, soLoggedIn: soLoggedIn)
        try ObjectRules.checkPrivacy(cls, t)
        let label = t.string(CKA_LABEL) ?? ""
        let id = t[CKA_ID] ?? []
        var out: AttributeMap
        if let ffc = try FFCRules.build(cls, t) {  // DSA and DH keys, domain parameters (FFCKeys.swift)
            out = ffc
            out[CKA_TOKEN] = AttributeCoding.bool(try t.checkedBool(CKA_TOKEN) ?? false)
            out[CKA_PRIVATE] = AttributeCoding.bool(try t.checkedBool(CKA_PRIVATE) ?? privateByDefault(cls))
            return out
        }
        switch cls {
        case CKO_DATA:
            out = t
        case CKO_CERTIFICATE:
            let type = try t.checkedULong(CKA_CERTIFICATE_TYPE) ?? CKC_X_509
            guard type == CKC_X_509 else { throw PKCS11Error.templateInconsistent }
            guard let der = t[CKA_VALUE] else { throw PKCS11Error.templateIncomplete }
            let cert: Certificate
            do { cert = try Certificate(der: der) } catch { throw PKCS11Error.attributeValueInvalid }
            out = ObjectTemplates.certificate(cert, label: label, id: id)
            out.merge(t) { _, new in new }
        case CKO_PUBLIC_KEY:
            let key = try publicKey(t)
            out = try ObjectTemplates.publicKey(key, label: label, id: id, local: false)
            // The curve and point as the key has them (OID, DER OCTET STRING),
            // whichever accepted form the caller wrote (CurveParameters.swift),
            // except explicit ECParameters of a named curve: valid DER that the
            // caller reads back as written (SoftHSM2 keeps them; python-pkcs11's
            // test_import_key_params re-encodes the key from them).
            out.merge(t.filter { $0.key != CKA_EC_PARAMS && $0.key != CKA_EC_POINT }) { _, new in new }
            if let p = t[CKA_EC_PARAMS], p.first == 0x30, key.curve != nil { out[CKA_EC_PARAMS] = p }
        case CKO_PRIVATE_KEY:
            let key = try privateKey(t)
            out = try ObjectTemplates.privateKey(key, label: label, id: id,
                                                 extractable: try t.checkedBool(CKA_EXTRACTABLE) ?? false,
                                                 local: false, sensitive: try t.checkedBool(CKA_SENSITIVE) ?? true)
            var rest = t
            for c in [CKA_PRIVATE_EXPONENT, CKA_PRIME_1, CKA_PRIME_2, CKA_EXPONENT_1, CKA_EXPONENT_2,
                      CKA_COEFFICIENT, CKA_VALUE, CKA_EC_PARAMS, CKA_SEED] { rest[c] = nil }
            out.merge(rest) { _, new in new }
        case CKO_SECRET_KEY:
            out = try secretKey(t)
        default:
            throw PKCS11Error.attributeValueInvalid
        }
        // Storage attributes follow the caller (ObjectTemplates writes token objects).
        out[CKA_TOKEN] = AttributeCoding.bool(try t.checkedBool(CKA_TOKEN) ?? false)
        out[CKA_PRIVATE] = AttributeCoding.bool(try t.checkedBool(CKA_PRIVATE) ?? privateByDefault(cls))
        return out
    }

    static func publicKey(_ t: AttributeMap) throws -> PublicKey {
        guard let type = try t.checkedULong(CKA_KEY_TYPE) else { throw PKCS11Error.templateIncomplete }
        do {
            switch type {
            case CKK_RSA:
                guard let n = t[CKA_MODULUS], let e = t[CKA_PUBLIC_EXPONENT] else { throw PKCS11Error.templateIncomplete }
                return try PublicKey(rsaModulus: n, exponent: e)
            case CKK_EC:
                guard let p = t[CKA_EC_PARAMS], let q = t[CKA_EC_POINT] else { throw PKCS11Error.templateIncomplete }
                return try PublicKey(curve: try CurveParameters.weierstrass(p), point: q)
            case CKK_EC_EDWARDS, CKK_EC_MONTGOMERY:
                guard let q = t[CKA_EC_POINT] else { throw PKCS11Error.templateIncomplete }
                let curve = try ecxCurve(t, type: type, keyBytes: q)
                guard let raw = curve.rawKey(q) else { throw PKCS11Error.attributeValueInvalid }
                return try PublicKey(curve, raw: raw)
            case CKK_ML_DSA, CKK_ML_KEM, CKK_SLH_DSA:
                // PKCS #11 3.2 §6.67-6.69: CKA_PARAMETER_SET and the raw public key as CKA_VALUE.
                let pq = try postQuantumType(t, type)
                guard let raw = t[CKA_VALUE] else { throw PKCS11Error.templateIncomplete }
                return try PublicKey(postQuantum: pq, raw: raw)
            default:
                throw PKCS11Error.attributeValueInvalid
            }
        } catch let e as PKCS11Error {
            throw e
        } catch {
            throw PKCS11Error.attributeValueInvalid
        }
    }

    /// Key material from its PKCS #11 components, through the traditional DER
    /// forms OpenSSL reads (RSAPrivateKey, ECPrivateKey).
    static func privateKey(_ t: AttributeMap) throws -> PrivateKey {
        guard let type = try t.checkedULong(CKA_KEY_TYPE) else { throw PKCS11Error.templateIncomplete }
        let der: [UInt8]
        switch type {
        case CKK_RSA:
            let parts = [CKA_MODULUS, CKA_PUBLIC_EXPONENT, CKA_PRIVATE_EXPONENT, CKA_PRIME_1, CKA_PRIME_2,
                         CKA_EXPONENT_1, CKA_EXPONENT_2, CKA_COEFFICIENT]
            let values = parts.compactMap { t[$0] }
            guard values.count == parts.count else { throw PKCS11Error.templateIncomplete }
            der = DER.sequence(DER.integer([0]) + values.flatMap(DER.integer))
        case CKK_EC:
            guard let params = t[CKA_EC_PARAMS], let d = t[CKA_VALUE] else { throw PKCS11Error.templateIncomplete }
            let curve = try CurveParameters.weierstrass(params)
            der = DER.sequence(DER.integer([1]) + DER.tlv(0x04, d) + DER.tlv(0xA0, curve.paramsDER))
        case CKK_EC_EDWARDS, CKK_EC_MONTGOMERY:
            // RFC 8410 keys have no DER private form of their own here: the raw key (seed or scalar) is the key.
            guard let raw = t[CKA_VALUE] else { throw PKCS11Error.templateIncomplete }
            let curve = try ecxCurve(t, type: type, keyBytes: raw)
            do { return try PrivateKey.from(curve, privateRaw: raw) } catch { throw PKCS11Error.attributeValueInvalid }
        case CKK_ML_DSA, CKK_ML_KEM, CKK_SLH_DSA:
            return try postQuantumPrivateKey(t, type)
        default:
            throw PKCS11Error.attributeValueInvalid
        }
        do { return try PrivateKey(der: der) } catch { throw PKCS11Error.attributeValueInvalid }
    }

    /// The post-quantum key type a template names: CKA_PARAMETER_SET is required (3.2 footnote 1);
    /// a set this engine lacks, or an engine without post-quantum, is CKR_ATTRIBUTE_VALUE_INVALID
    /// (Kryoptic's answer for an unknown set).
    static func postQuantumType(_ t: AttributeMap, _ type: CK_KEY_TYPE) throws -> KeyType {
        guard let set = try t.checkedULong(CKA_PARAMETER_SET) else { throw PKCS11Error.templateIncomplete }
        guard CryptoEngine.hasPostQuantum, let pq = ObjectTemplates.postQuantumType(ckk: UInt(type), parameterSet: UInt(set)) else {
            throw PKCS11Error.attributeValueInvalid
        }
        return pq
    }

    /// An ML-DSA / ML-KEM private key from CKA_SEED (ξ, or d || z) and/or CKA_VALUE (the FIPS 204
    /// sk / FIPS 203 dk); an SLH-DSA one from CKA_VALUE only (its 3.2 table has no CKA_SEED).
    /// "At least one of CKA_SEED and CKA_VALUE must be specified on C_CreateObject" (3.2 ML-DSA /
    /// ML-KEM private key objects): neither is CKR_TEMPLATE_INCOMPLETE. With both, the key is made
    /// from the seed and its encoded private key must equal CKA_VALUE, else
    /// CKR_ATTRIBUTE_VALUE_INVALID (the text names no code for the mismatch; Kryoptic hands both to
    /// OpenSSL, whose import check fails the same way), so no object holds two different keys.
    static func postQuantumPrivateKey(_ t: AttributeMap, _ type: CK_KEY_TYPE) throws -> PrivateKey {
        let pq = try postQuantumType(t, type)
        let seed = t[CKA_SEED], value = t[CKA_VALUE]
        let key: PrivateKey
        do {
            switch pq {
            case .mlDSA(let s):
                if let seed { key = try PrivateKey.generateMLDSA(s, seed: seed) }
                else if let value { key = try PrivateKey(MLDSAKey(privateKey: value, s)) }
                else { throw PKCS11Error.templateIncomplete }
            case .mlKEM(let s):
                if let seed { key = try PrivateKey.generateMLKEM(s, seed: seed) }
                else if let value { key = try PrivateKey(MLKEMKey(decapsulationKey: value, s)) }
                else { throw PKCS11Error.templateIncomplete }
            case .slhDSA(let s):
                guard seed == nil else { throw PKCS11Error.attributeTypeInvalid }
                guard let value else { throw PKCS11Error.templateIncomplete }
                key = try PrivateKey(SLHDSAKey(privateKey: value, s))
            default:
                throw PKCS11Error.attributeValueInvalid
            }
        } catch let e as PKCS11Error {
            throw e
        } catch {
            throw PKCS11Error.attributeValueInvalid
        }
        if seed != nil, let value {
            guard var derived = try? key.postQuantumPrivateBytes() else { throw PKCS11Error.attributeValueInvalid }
            defer { for i in derived.indices { derived[i] = 0 } }
            guard derived == value else { throw PKCS11Error.attributeValueInvalid }
        }
        return key
    }

    /// The Edwards or Montgomery curve of a key template: CKA_EC_PARAMS when
    /// given (required by PKCS #11 3.0, and then it must name a curve of the
    /// key type), else the one whose key length `keyBytes` has (raw or in an
    /// OCTET STRING), as older callers that only knew Ed25519 omit it.
    static func ecxCurve(_ t: AttributeMap, type: CK_KEY_TYPE, keyBytes: [UInt8]) throws -> ECXCurve {
        let edwards = type == CKK_EC_EDWARDS
        if let p = t[CKA_EC_PARAMS] { return try CurveParameters.ecx(p, edwards: edwards) }
        guard let c = ECXCurve.allCases.first(where: { $0.isEdwards == edwards && $0.rawKey(keyBytes) != nil }) else {
            throw PKCS11Error.attributeValueInvalid
        }
        return c
    }

    static func secretKey(_ t: AttributeMap) throws -> AttributeMap {
        guard let type = try t.checkedULong(CKA_KEY_TYPE), let value = t[CKA_VALUE] else {
            throw PKCS11Error.templateIncomplete
        }
        switch type {
        case CKK_AES: guard [16, 24, 32].contains(value.count) else { throw PKCS11Error.attributeValueInvalid }
        case CKK_GENERIC_SECRET: guard !value.isEmpty else { throw PKCS11Error.attributeValueInvalid }
        case let k where Runtime.hmacKeyType.values.contains(k) || k == CKK_HKDF:  // HMACSign.swift, KeyDerivation.swift
            guard !value.isEmpty else { throw PKCS11Error.attributeValueInvalid }
        case CKK_DES, CKK_DES2, CKK_DES3, CKK_CHACHA20:  // one size each; DES parity (SymmetricKeys.swift)
            guard SymmetricKeys.isValid(value, type: type) else { throw PKCS11Error.attributeValueInvalid }
        default: throw PKCS11Error.attributeValueInvalid
        }
        if let len = try t.checkedULong(CKA_VALUE_LEN), len != value.count { throw PKCS11Error.templateInconsistent }
        var out = t
        KeyUsagePolicy.applySecretKeyDefaults(&out)  // usage defaults (KeyUsagePolicy.swift)
        out[CKA_VALUE_LEN] = AttributeCoding.ulong(CK_ULONG(value.count))
        out[CKA_LOCAL] = AttributeCoding.bool(false)
        let sensitive = try t.checkedBool(CKA_SENSITIVE) ?? true
        let extractable = try t.checkedBool(CKA_EXTRACTABLE) ?? false
        out[CKA_SENSITIVE] = AttributeCoding.bool(sensitive)
        out[CKA_EXTRACTABLE] = AttributeCoding.bool(extractable)
        out[CKA_ALWAYS_SENSITIVE] = AttributeCoding.bool(false)
        out[CKA_NEVER_EXTRACTABLE] = AttributeCoding.bool(false)
        out[CKA_KEY_GEN_MECHANISM] = AttributeCoding.ulong(KS_CK_UNAVAILABLE_INFORMATION)
        return out
    }
}

/// Just enough DER to wrap key components for OpenSSL.
enum DER {
    static func length(_ n: Int) -> [UInt8] {
        if n < 0x80 { return [UInt8(n)] }
        var bytes: [UInt8] = []
        var v = n
        while v > 0 { bytes.insert(UInt8(v & 0xFF), at: 0); v >>= 8 }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] { [tag] + length(content.count) + content }

    static func sequence(_ content: [UInt8]) -> [UInt8] { tlv(0x30, content) }

    /// A non-negative INTEGER from big-endian magnitude bytes.
    static func integer(_ magnitude: [UInt8]) -> [UInt8] {
        var m = Array(magnitude.drop { $0 == 0 })
        if m.isEmpty { m = [0] }
        if m[0] & 0x80 != 0 { m.insert(0, at: 0) }
        return tlv(0x02, m)
    }
}
