import CPKCS11
import Keychain
import KeyshareCrypto
import KeyshareTPM
import Tokens

// PKCS #11 §5.14 key generation: C_GenerateKeyPair and C_GenerateKey. The
// attribute sets come from Tokens.ObjectTemplates (what `keyshare generate`
// writes), so a token key made here is listed by `keyshare list`; wrapping
// and derivation are in Wrap.swift and Derive.swift.

/// Attributes a generated key computes itself: a template may not set them.
private let computed: Set<CK_ATTRIBUTE_TYPE> = [
    CKA_CLASS, CKA_KEY_TYPE, CKA_LOCAL, CKA_KEY_GEN_MECHANISM, CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE,
    CKA_MODULUS, CKA_EC_POINT, CKA_VALUE, CKA_PUBLIC_KEY_INFO, CKA_PRIVATE_EXPONENT, CKA_PRIME_1, CKA_PRIME_2,
    CKA_EXPONENT_1, CKA_EXPONENT_2, CKA_COEFFICIENT, CKA_UNIQUE_ID, CKA_SEED,
]

/// Generation inputs: read from the template, not stored from it.
private let inputs: Set<CK_ATTRIBUTE_TYPE> = [CKA_MODULUS_BITS, CKA_PUBLIC_EXPONENT, CKA_EC_PARAMS, CKA_VALUE_LEN,
                                              CKA_PARAMETER_SET]

enum KeyGenerationRules {
    /// What C_GenerateKeyPair makes: the mechanism and CKA_EC_PARAMS
    /// (CurveParameters.swift) decide it.
    enum PairSpec {
        case rsa(bits: Int)
        case ec(ECCurve)
        case ecx(ECXCurve)
        /// ML-DSA, ML-KEM or SLH-DSA of a parameter set (PostQuantum.swift).
        case postQuantum(KeyType)
    }

    /// The caller's attributes that a generated key keeps (label, ID, usage
    /// flags, storage); class and key type must agree when given.
    static func callerPart(_ t: AttributeMap, objectClass: CK_OBJECT_CLASS, keyType: CK_KEY_TYPE) throws -> AttributeMap {
        try checkCallerPart(t, objectClass: objectClass, keyType: keyType)
        return t.filter { keeps($0.key) }
    }

    /// Whether a checked caller attribute is kept on the new key (not computed, not an input).
    static func keeps(_ type: CK_ATTRIBUTE_TYPE) -> Bool { !computed.contains(type) && !inputs.contains(type) }

    /// `callerPart`'s checks, for a caller that copies the kept attributes itself
    /// (`Runtime.secretKeyAttributes`, straight into the new key's map).
    static func checkCallerPart(_ t: AttributeMap, objectClass: CK_OBJECT_CLASS, keyType: CK_KEY_TYPE) throws {
        if let c = try t.checkedULong(CKA_CLASS), c != objectClass { throw PKCS11Error.templateInconsistent }
        if let k = try t.checkedULong(CKA_KEY_TYPE), k != keyType { throw PKCS11Error.templateInconsistent }
        for type in t.keys where ObjectRules.hidden.contains(type) { throw PKCS11Error.attributeTypeInvalid }
        // Types the new key does not have, malformed dates (AttributeSchema.swift).
        try AttributeSchema.check(t, objectClass: objectClass, keyType: keyType)
        for type in t.keys where ObjectRules.booleans.contains(type) { _ = try t.checkedBool(type) }
        for type in t.keys where computed.contains(type) && type != CKA_CLASS && type != CKA_KEY_TYPE {
            throw PKCS11Error.attributeReadOnly
        }
        // Generation, unwrapping and derivation all need the user (the key or
        // the pair's private half is private), never the SO: so no template
        // here may mark the new key CKA_TRUSTED (ObjectRules.checkTrusted).
        try ObjectRules.checkTrusted(t, soLoggedIn: false)
    }

    /// The parameter set of a post-quantum pair: CKA_PARAMETER_SET on the public template (where
    /// PKCS #11 3.2 puts it, and Kryoptic requires it) or the private one; both must agree. None is
    /// CKR_TEMPLATE_INCOMPLETE, an unknown set CKR_PARAMETER_SET_NOT_SUPPORTED (Kryoptic's answers).
    static func postQuantumType(_ mechanism: CK_MECHANISM_TYPE, pubT: AttributeMap, privT: AttributeMap) throws -> KeyType {
        let pub = try pubT.checkedULong(CKA_PARAMETER_SET)
        let priv = try privT.checkedULong(CKA_PARAMETER_SET)
        if let pub, let priv, pub != priv { throw PKCS11Error.templateInconsistent }
        guard let set = pub ?? priv else { throw PKCS11Error.templateIncomplete }
        let ckk: UInt = switch mechanism {
        case CKM_ML_DSA_KEY_PAIR_GEN: CKK.mlDSA
        case CKM_ML_KEM_KEY_PAIR_GEN: CKK.mlKEM
        default: CKK.slhDSA
        }
        guard let t = ObjectTemplates.postQuantumType(ckk: ckk, parameterSet: set) else {
            throw PKCS11Error(CK_RV(CKR_PARAMETER_SET_NOT_SUPPORTED))
        }
        return t
    }

    static func mechanismType(_ m: Mechanism) -> CK_MECHANISM_TYPE? {
        if case .undecoded(let t, _) = m { return t }
        return nil
    }
}

extension Runtime {
    public func generateKeyPair(session h: CK_SESSION_HANDLE, mechanism: Mechanism,
                                publicTemplate: Template, privateTemplate: Template) throws -> (CK_OBJECT_HANDLE, CK_OBJECT_HANDLE) {
        let s = try session(h)
        let pubT = try publicTemplate.map()
        let privT = try privateTemplate.map()
        let spec: KeyGenerationRules.PairSpec
        let mechanismType = KeyGenerationRules.mechanismType(mechanism)
        // DSA and DH (FFCKeys.swift).
        if let pair = try generateFFCKeyPair(s, mechanismType, pubT: pubT, privT: privT) { return pair }
        switch mechanismType {
        case CKM_RSA_PKCS_KEY_PAIR_GEN?:
            guard let bits = try pubT.checkedULong(CKA_MODULUS_BITS) else { throw PKCS11Error.templateIncomplete }
            // The range C_GetMechanismInfo reports (MechanismCatalog.rsaSizes).
            guard let b = Int(exactly: bits), PrivateKey.rsaGenerationBits.contains(b) else {
                throw PKCS11Error(CKR_KEY_SIZE_RANGE)
            }
            spec = .rsa(bits: Int(bits))
        case CKM_EC_KEY_PAIR_GEN?, CKM_EC_EDWARDS_KEY_PAIR_GEN?, CKM_EC_MONTGOMERY_KEY_PAIR_GEN?:
            guard let p = pubT[CKA_EC_PARAMS] ?? privT[CKA_EC_PARAMS] else { throw PKCS11Error.templateIncomplete }
            if mechanismType == CKM_EC_KEY_PAIR_GEN {
                spec = .ec(try CurveParameters.weierstrass(p))
            } else {
                spec = .ecx(try CurveParameters.ecx(p, edwards: mechanismType == CKM_EC_EDWARDS_KEY_PAIR_GEN))
            }
        case CKM_ML_DSA_KEY_PAIR_GEN?, CKM_ML_KEM_KEY_PAIR_GEN?, CKM_SLH_DSA_KEY_PAIR_GEN?:
            spec = .postQuantum(try KeyGenerationRules.postQuantumType(mechanismType ?? 0, pubT: pubT, privT: privT))
        default:
            throw PKCS11Error.mechanismInvalid
        }
        // Templates before the (for RSA, slow) generation: a type the key
        // does not have (CKA_VALUE_LEN on an EC key) fails here (AttributeSchema).
        let pairType: CK_KEY_TYPE
        switch spec {
        case .rsa: pairType = CKK_RSA
        case .ec: pairType = CKK_EC
        case .ecx(let c): pairType = c.isEdwards ? CKK_EC_EDWARDS : CKK_EC_MONTGOMERY
        case .postQuantum(let t): pairType = CK_KEY_TYPE(ObjectTemplates.keyType(t))
        }
        try AttributeSchema.check(pubT, objectClass: CKO_PUBLIC_KEY, keyType: pairType)
        try AttributeSchema.check(privT, objectClass: CKO_PRIVATE_KEY, keyType: pairType)
        // Permissions first: no key is generated for a call that cannot store it.
        // The private half is always private (ObjectRules.alwaysPrivate), logged in or not.
        try ObjectRules.checkPrivacy(CKO_PRIVATE_KEY, privT)
        let privToken = try privT.checkedBool(CKA_TOKEN) ?? false
        let pubToken = try pubT.checkedBool(CKA_TOKEN) ?? false
        try checkWritable(s, isToken: privToken, isPrivate: try privT.checkedBool(CKA_PRIVATE) ?? true)
        try checkWritable(s, isToken: pubToken, isPrivate: try pubT.checkedBool(CKA_PRIVATE) ?? false)
        if TPMToken.isTPM(s.tokenID) {
            return try generateTPMKeyPair(s, h, spec, pubT: pubT, privT: privT, privToken: privToken, pubToken: pubToken)
        }

        let key: PrivateKey
        switch spec {
        case .rsa(let bits):
            let e = pubT[CKA_PUBLIC_EXPONENT].map { Array($0.drop { $0 == 0 }) } ?? [1, 0, 1]
            do { key = try PrivateKey.generateRSA(bits: bits, publicExponent: e.isEmpty ? [1, 0, 1] : e) } catch {
                throw PKCS11Error.attributeValueInvalid
            }
        case .ec(let c): key = try PrivateKey.generateEC(c)
        case .ecx(let c): key = try PrivateKey.generate(c)
        case .postQuantum(let t): key = try PrivateKey.generate(postQuantum: t)
        }
        let keyType = CK_KEY_TYPE(ObjectTemplates.keyType(key.keyType))
        let privRest = try KeyGenerationRules.callerPart(privT, objectClass: CKO_PRIVATE_KEY, keyType: keyType)
        let pubRest = try KeyGenerationRules.callerPart(pubT, objectClass: CKO_PUBLIC_KEY, keyType: keyType)
        let fallbackID = try key.publicKey.keyIdentifier()
        let id = privT[CKA_ID] ?? pubT[CKA_ID] ?? fallbackID
        let label = privT.string(CKA_LABEL) ?? pubT.string(CKA_LABEL) ?? ""
        let sensitive = try privT.checkedBool(CKA_SENSITIVE) ?? true
        let extractable = try privT.checkedBool(CKA_EXTRACTABLE) ?? false

        var priv = try ObjectTemplates.privateKey(key, label: label, id: id, extractable: extractable, local: true,
                                                  sensitive: sensitive)
        priv.merge(privRest) { _, new in new }
        var pub = try ObjectTemplates.publicKey(key.publicKey, label: label, id: id, local: true)
        pub.merge(pubRest) { _, new in new }
        priv[CKA_TOKEN] = AttributeCoding.bool(privToken)
        pub[CKA_TOKEN] = AttributeCoding.bool(pubToken)
        return try storePair(pub: pub, priv: priv, in: s, h)
    }

    /// Stores a generated pair, public half first; never leaves half a pair behind.
    private func storePair(pub: AttributeMap, priv: AttributeMap, in s: Session, _ h: CK_SESSION_HANDLE)
        throws -> (CK_OBJECT_HANDLE, CK_OBJECT_HANDLE) {
        let pubHandle = try store(pub, in: s)
        do {
            return (pubHandle, try store(priv, in: s))
        } catch {
            try? destroyObject(session: h, object: pubHandle)
            throw error
        }
    }

    /// C_GenerateKeyPair on a TPM token: the key is created in the TPM; it can
    /// never be extractable or non-sensitive (CKR_TEMPLATE_INCONSISTENT if asked).
    private func generateTPMKeyPair(_ s: Session, _ h: CK_SESSION_HANDLE, _ spec: KeyGenerationRules.PairSpec,
                                    pubT: AttributeMap, privT: AttributeMap, privToken: Bool, pubToken: Bool)
        throws -> (CK_OBJECT_HANDLE, CK_OBJECT_HANDLE) {
        let kind: TPMKeyKind
        switch spec {
        case .rsa(2048): kind = .rsa2048
        case .rsa(3072): kind = .rsa3072
        case .rsa: throw PKCS11Error(CKR_KEY_SIZE_RANGE)
        case .ec(.p256): kind = .p256
        case .ec(.p384): kind = .p384
        case .ec, .ecx: throw PKCS11Error(CKR_CURVE_NOT_SUPPORTED)
        // A TPM 2.0 has no post-quantum algorithms.
        case .postQuantum: throw PKCS11Error.mechanismInvalid
        }
        if let e = pubT[CKA_PUBLIC_EXPONENT], Array(e.drop { $0 == 0 }) != [1, 0, 1] { throw PKCS11Error.templateInconsistent }
        guard try privT.checkedBool(CKA_EXTRACTABLE) != true, try privT.checkedBool(CKA_SENSITIVE) != false else {
            throw PKCS11Error.templateInconsistent
        }
        let auth = try tpmAuth(s.tokenID)
        let tcti = store.tpmSite()
        let blob = try Runtime.tpmCall {
            try TPM.with(tcti) { c -> [UInt8] in
                guard c.supports(kind) else { throw PKCS11Error(CKR_KEY_SIZE_RANGE) }
                return try c.createKey(kind, auth: auth)
            }
        }
        let keyType: CK_KEY_TYPE = kind.isRSA ? CKK_RSA : CKK_EC
        let privRest = try KeyGenerationRules.callerPart(privT, objectClass: CKO_PRIVATE_KEY, keyType: keyType)
        let pubRest = try KeyGenerationRules.callerPart(pubT, objectClass: CKO_PUBLIC_KEY, keyType: keyType)
        let id = privT[CKA_ID] ?? pubT[CKA_ID]
        let label = privT.string(CKA_LABEL) ?? pubT.string(CKA_LABEL) ?? ""
        var (priv, pub) = try TPMToken.keyAttributes(blob: blob, label: label, id: id, local: true)
        priv.merge(privRest.filter { $0.key != CKA.keyshareTPM }) { _, new in new }
        pub.merge(pubRest) { _, new in new }
        priv[CKA_TOKEN] = AttributeCoding.bool(privToken)
        pub[CKA_TOKEN] = AttributeCoding.bool(pubToken)
        let pair = try storePair(pub: pub, priv: priv, in: s, h)
        // The key's attestation, made now (docs/tpm.md "Key attestation"): a CKO_DATA object
        // beside a token key; best effort, the pair stands without it.
        if privToken, let data = TPMToken.generationAttestation(blob: blob, auth: auth, token: s.tokenID, label: label,
                                                                id: priv[CKA_ID] ?? [], site: tcti) {
            _ = try? store(data, in: s)
        }
        return pair
    }

    public func generateKey(session h: CK_SESSION_HANDLE, mechanism: Mechanism, template: Template) throws -> CK_OBJECT_HANDLE {
        let s = try session(h)
        let t = try template.map()
        // HMAC and HKDF key types, CKM_PKCS5_PBKD2 (SecretKeyGeneration.swift).
        if let k = try generateSecretKey(s, mechanism: mechanism, template: t) { return k }
        // DES, 3DES and ChaCha20: one size each (SymmetricKeys.swift).
        if let fixed = try generateFixedSizeKey(s, mechanism, t) { return fixed }
        // DSA and DH domain parameters (FFCKeys.swift).
        if let d = try generateFFCDomain(s, KeyGenerationRules.mechanismType(mechanism), t) { return d }
        let keyType: CK_KEY_TYPE
        let sizes: ClosedRange<CK_ULONG>
        switch KeyGenerationRules.mechanismType(mechanism) {
        case CKM_AES_KEY_GEN?: keyType = CKK_AES; sizes = 16...32
        case CKM_GENERIC_SECRET_KEY_GEN?: keyType = CKK_GENERIC_SECRET; sizes = 1...512
        default: throw PKCS11Error.mechanismInvalid
        }
        try ObjectRules.checkPrivacy(CKO_SECRET_KEY, t)
        guard let len = try t.checkedULong(CKA_VALUE_LEN) else { throw PKCS11Error.templateIncomplete }
        guard sizes.contains(len), keyType != CKK_AES || len % 8 == 0 else { throw PKCS11Error.attributeValueInvalid }
        guard let m = KeyGenerationRules.mechanismType(mechanism) else { throw PKCS11Error.mechanismInvalid }
        var a = try secretKeyAttributes(value: try SecureRandom.bytes(Int(len)), keyType: keyType, template: t,
                                        mechanism: m)
        a[CKA_LOCAL] = AttributeCoding.bool(true)
        return try store(a, in: s)
    }

    /// A secret key's attribute set, for generation, unwrapping and derivation:
    /// the caller's usage flags and storage, the computed ALWAYS_SENSITIVE /
    /// NEVER_EXTRACTABLE (true only for keys born inside the module, i.e.
    /// `mechanism` is a generation or derivation from a sensitive base).
    ///
    /// Built on a copy of `KeyUsagePolicy.secretKeyBase` (the usage defaults, in storage sized for
    /// a whole key) with the caller's kept attributes laid over it: the same set as "the caller's
    /// part, then each default it does not name, then the 12 below", in one allocation and one
    /// hash per attribute. This runs per C_EncapsulateKey / C_DecapsulateKey / C_DeriveKey / C_GenerateKey
    /// (docs/benchmarks.md, "Module work per KEM call").
    func secretKeyAttributes(value: [UInt8], keyType: CK_KEY_TYPE, template t: AttributeMap,
                             mechanism: CK_MECHANISM_TYPE?, bornSecret: Bool = true) throws -> AttributeMap {
        // The same template as the last key's: its checked set again (SecretKeyTemplateMemo.swift).
        if var a = secretKeyMemo.attributes(template: t, keyType: keyType, mechanism: mechanism, bornSecret: bornSecret) {
            a[CKA_VALUE] = value
            a[CKA_VALUE_LEN] = AttributeCoding.ulong(CK_ULONG(value.count))
            return a
        }
        try KeyGenerationRules.checkCallerPart(t, objectClass: CKO_SECRET_KEY, keyType: keyType)
        try ObjectRules.checkPrivacy(CKO_SECRET_KEY, t)
        var a = KeyUsagePolicy.secretKeyBase
        let room = t.count + KeyUsagePolicy.secretKeyDefaults.count + 12
        if room > a.capacity { a.reserveCapacity(room) }
        for (type, v) in t where KeyGenerationRules.keeps(type) { a[type] = v }
        let sensitive = try t.checkedBool(CKA_SENSITIVE) ?? true
        let extractable = try t.checkedBool(CKA_EXTRACTABLE) ?? false
        a[CKA_CLASS] = AttributeCoding.ulong(CKO_SECRET_KEY)
        a[CKA_KEY_TYPE] = AttributeCoding.ulong(keyType)
        a[CKA_SENSITIVE] = AttributeCoding.bool(sensitive)
        a[CKA_EXTRACTABLE] = AttributeCoding.bool(extractable)
        a[CKA_ALWAYS_SENSITIVE] = AttributeCoding.bool(bornSecret && sensitive)
        a[CKA_NEVER_EXTRACTABLE] = AttributeCoding.bool(bornSecret && !extractable)
        a[CKA_LOCAL] = AttributeCoding.bool(false)
        a[CKA_KEY_GEN_MECHANISM] = AttributeCoding.ulong(mechanism ?? KS_CK_UNAVAILABLE_INFORMATION)
        a[CKA_PRIVATE] = AttributeCoding.bool(try t.checkedBool(CKA_PRIVATE) ?? true)
        a[CKA_TOKEN] = AttributeCoding.bool(try t.checkedBool(CKA_TOKEN) ?? false)
        // Remembered without the value; the caller's copy gets it.
        secretKeyMemo.remember(template: t, keyType: keyType, mechanism: mechanism, bornSecret: bornSecret, attributes: a)
        a[CKA_VALUE] = value
        a[CKA_VALUE_LEN] = AttributeCoding.ulong(CK_ULONG(value.count))
        return a
    }
}
