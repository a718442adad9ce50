import CPKCS11
import Keychain
import KeyshareCrypto

// DSA (PKCS #11 3.0 Current Mechanisms §2.2) and PKCS #3 Diffie-Hellman
// (§2.3): CKM_DSA_PARAMETER_GEN, CKM_DSA_KEY_PAIR_GEN, CKM_DSA,
// CKM_DSA_SHA1/224/256/384/512, CKM_DH_PKCS_PARAMETER_GEN,
// CKM_DH_PKCS_KEY_PAIR_GEN, CKM_DH_PKCS_DERIVE; their key and domain
// parameter objects, made by generation or C_CreateObject. The objects hold
// the components the spec names (CKA_PRIME, CKA_SUBPRIME for DSA, CKA_BASE,
// CKA_VALUE; CKA_VALUE_BITS on a DH private key; CKA_PRIME_BITS on domain
// parameters); a private key's CKA_VALUE is sealed like every private-key
// value and shown only when the key is neither sensitive nor unextractable.
// The arithmetic is KeyshareCrypto.FFC (OpenSSL 3.0's DSA and DH).
// Legacy families: offered for old peers; `keyshare key generate` makes
// neither. DSA and DH private keys are not wrappable (CKR_KEY_NOT_WRAPPABLE:
// keyshare wraps private keys as PKCS #8 of its own PrivateKey types).

enum FFCRules {
    /// p sizes, in bits, C_GetMechanismInfo reports and every path checks:
    /// FIPS 186-4's DSA sizes (L = 1024, 2048, 3072); DH up to 4096 (NSS's limit is higher; SoftHSM2's 10000).
    static let dsaBits = 1024...3072
    static let dhBits = 1024...4096
    /// CKM_DSA's input: a digest of one of the SHA sizes (FIPS 186-4 §4.6; SoftHSM2 takes the same).
    static let dsaInputSizes: Set<Int> = [20, 28, 32, 48, 64]

    static func kind(_ keyType: CK_KEY_TYPE) -> FFC.Kind? {
        keyType == CKK_DSA ? .dsa : keyType == CKK_DH ? .dh : nil
    }

    /// The domain parameters of a template or object: CKA_PRIME, CKA_BASE,
    /// and CKA_SUBPRIME for DSA; sizes within the family's range.
    static func domain(_ t: AttributeMap, _ kind: FFC.Kind, missing: PKCS11Error = .templateIncomplete) throws -> FFC.Domain {
        guard let p = t[CKA_PRIME], let g = t[CKA_BASE] else { throw missing }
        let q = t[CKA_SUBPRIME]
        if kind == .dsa, q == nil { throw missing }
        let d = FFC.Domain(p: p, q: kind == .dsa ? q : nil, g: g)
        guard (kind == .dsa ? dsaBits : dhBits).contains(d.primeBits) else { throw PKCS11Error(CKR_KEY_SIZE_RANGE) }
        if kind == .dsa { guard let q = d.q, [20, 28, 32].contains(q.count) else { throw PKCS11Error.attributeValueInvalid } }
        return d
    }

    static func components(_ d: FFC.Domain, _ kind: FFC.Kind) -> AttributeMap {
        var a: AttributeMap = [CKA_PRIME: d.p, CKA_BASE: d.g]
        if kind == .dsa, let q = d.q { a[CKA_SUBPRIME] = q }
        return a
    }

    static let componentTypes: Set<CK_ATTRIBUTE_TYPE> = [CKA_PRIME, CKA_SUBPRIME, CKA_BASE, CKA_VALUE, CKA_VALUE_BITS,
                                                         CKA_PRIME_BITS, CKA_SUB_PRIME_BITS]

    /// Attributes of a DSA or DH key pair's halves: the spec's usage defaults
    /// (a DSA key signs and verifies, a DH key derives), then the caller's.
    static func pair(_ kind: FFC.Kind, _ d: FFC.Domain, x: [UInt8], y: [UInt8], privT: AttributeMap, pubT: AttributeMap,
                     local: Bool, mechanism: CK_MECHANISM_TYPE?) throws -> (pub: AttributeMap, priv: AttributeMap) {
        let keyType: CK_KEY_TYPE = kind == .dsa ? CKK_DSA : CKK_DH
        var privRest = try KeyGenerationRules.callerPart(privT, objectClass: CKO_PRIVATE_KEY, keyType: keyType)
        var pubRest = try KeyGenerationRules.callerPart(pubT, objectClass: CKO_PUBLIC_KEY, keyType: keyType)
        for t in componentTypes { privRest[t] = nil; pubRest[t] = nil }
        let id = privT[CKA_ID] ?? pubT[CKA_ID] ?? DigestAlgorithm.sha1.hash(y)
        let label = privT.string(CKA_LABEL) ?? pubT.string(CKA_LABEL) ?? ""
        let sensitive = try privT.checkedBool(CKA_SENSITIVE) ?? true
        let extractable = try privT.checkedBool(CKA_EXTRACTABLE) ?? false
        let gen = AttributeCoding.ulong(mechanism ?? KS_CK_UNAVAILABLE_INFORMATION)
        let dsa = kind == .dsa
        var priv = components(d, kind)
        priv.merge([
            CKA_CLASS: AttributeCoding.ulong(CKO_PRIVATE_KEY), CKA_KEY_TYPE: AttributeCoding.ulong(keyType),
            CKA_LABEL: AttributeCoding.string(label), CKA_ID: id, CKA_VALUE: x,
            CKA_SENSITIVE: AttributeCoding.bool(sensitive), CKA_EXTRACTABLE: AttributeCoding.bool(extractable),
            CKA_ALWAYS_SENSITIVE: AttributeCoding.bool(local && sensitive),
            CKA_NEVER_EXTRACTABLE: AttributeCoding.bool(local && !extractable),
            CKA_LOCAL: AttributeCoding.bool(local), CKA_KEY_GEN_MECHANISM: gen,
            CKA_SIGN: AttributeCoding.bool(dsa), CKA_SIGN_RECOVER: AttributeCoding.bool(false),
            CKA_DECRYPT: AttributeCoding.bool(false), CKA_UNWRAP: AttributeCoding.bool(false),
            CKA_DERIVE: AttributeCoding.bool(!dsa), CKA_ALWAYS_AUTHENTICATE: AttributeCoding.bool(false),
            CKA_WRAP_WITH_TRUSTED: AttributeCoding.bool(false), CKA_MODIFIABLE: AttributeCoding.bool(true),
            CKA_SUBJECT: [],
        ]) { _, new in new }
        if !dsa { priv[CKA_VALUE_BITS] = AttributeCoding.ulong(CK_ULONG(bits(x))) }
        priv.merge(privRest) { _, new in new }
        var pub = components(d, kind)
        pub.merge([
            CKA_CLASS: AttributeCoding.ulong(CKO_PUBLIC_KEY), CKA_KEY_TYPE: AttributeCoding.ulong(keyType),
            CKA_LABEL: AttributeCoding.string(label), CKA_ID: id, CKA_VALUE: y,
            CKA_LOCAL: AttributeCoding.bool(local), CKA_KEY_GEN_MECHANISM: gen,
            CKA_VERIFY: AttributeCoding.bool(dsa), CKA_VERIFY_RECOVER: AttributeCoding.bool(false),
            CKA_ENCRYPT: AttributeCoding.bool(false), CKA_WRAP: AttributeCoding.bool(false),
            CKA_DERIVE: AttributeCoding.bool(!dsa), CKA_TRUSTED: AttributeCoding.bool(false),
            CKA_MODIFIABLE: AttributeCoding.bool(true), CKA_SUBJECT: [],
        ]) { _, new in new }
        pub.merge(pubRest) { _, new in new }
        priv[CKA_TOKEN] = AttributeCoding.bool(try privT.checkedBool(CKA_TOKEN) ?? false)
        pub[CKA_TOKEN] = AttributeCoding.bool(try pubT.checkedBool(CKA_TOKEN) ?? false)
        return (pub, priv)
    }

    static func bits(_ v: [UInt8]) -> Int {
        let t = v.drop { $0 == 0 }
        guard let f = t.first else { return 0 }
        return (t.count - 1) * 8 + (8 - f.leadingZeroBitCount)
    }

    /// C_CreateObject of a CKK_DSA / CKK_DH key or a CKO_DOMAIN_PARAMETERS
    /// object, or nil for anything else. The values are checked as OpenSSL
    /// imports them (a private key's x against its y when both are given).
    static func build(_ cls: CK_OBJECT_CLASS, _ t: AttributeMap) throws -> AttributeMap? {
        guard let keyType = try t.checkedULong(CKA_KEY_TYPE), let kind = kind(keyType) else {
            if cls == CKO_DOMAIN_PARAMETERS { throw PKCS11Error.templateInconsistent }
            return nil
        }
        let d = try domain(t, kind, missing: .templateIncomplete)
        switch cls {
        case CKO_DOMAIN_PARAMETERS:
            try FFCRules.checkSessionOnly(t)
            do { try FFC.validate(kind, d, x: nil, y: nil) } catch { throw PKCS11Error.attributeValueInvalid }
            var a = t
            a.merge(components(d, kind)) { _, new in new }
            a[CKA_PRIME_BITS] = AttributeCoding.ulong(CK_ULONG(d.primeBits))
            if kind == .dsa, let q = d.q { a[CKA_SUB_PRIME_BITS] = AttributeCoding.ulong(CK_ULONG(bits(q))) }
            a[CKA_LOCAL] = AttributeCoding.bool(false)
            return a
        case CKO_PUBLIC_KEY:
            guard let y = t[CKA_VALUE] else { throw PKCS11Error.templateIncomplete }
            do { try FFC.validate(kind, d, x: nil, y: y) } catch { throw PKCS11Error.attributeValueInvalid }
            var rest = t
            rest[CKA_VALUE] = nil
            return try pair(kind, d, x: [], y: y, privT: [:], pubT: createRest(rest), local: false, mechanism: nil).pub
        case CKO_PRIVATE_KEY:
            guard let x = t[CKA_VALUE] else { throw PKCS11Error.templateIncomplete }
            let y: [UInt8]
            do {
                y = try FFC.publicValue(d, x: x)
                try FFC.validate(kind, d, x: x, y: y)
            } catch {
                throw PKCS11Error.attributeValueInvalid
            }
            if let vb = try t.checkedULong(CKA_VALUE_BITS), vb != CK_ULONG(bits(x)) { throw PKCS11Error.templateInconsistent }
            var rest = t
            rest[CKA_VALUE] = nil
            return try pair(kind, d, x: x, y: y, privT: createRest(rest), pubT: [:], local: false, mechanism: nil).priv
        default:
            throw PKCS11Error.templateInconsistent
        }
    }

    /// Domain parameters are session objects: the store keeps keys,
    /// certificates, data and passwords, and a domain is public values a
    /// caller keeps or regenerates (C_CreateObject takes it back).
    static func checkSessionOnly(_ t: AttributeMap) throws {
        if try t.checkedBool(CKA_TOKEN) == true { throw PKCS11Error.templateInconsistent }
    }

    /// A creating template as callerPart reads it (the computed attributes
    /// are refused there; the caller's components are replaced by the checked ones).
    static func createRest(_ t: AttributeMap) -> AttributeMap {
        t.filter { !componentTypes.contains($0.key) }
    }
}

/// CKM_DSA (the input is the digest) and CKM_DSA_SHA* (hashed here, multi-part).
final class DSAOperation: SignOperation, VerifyOperation {
    let domain: FFC.Domain
    let x: [UInt8]?
    let y: [UInt8]?
    let signatureLength: Int
    var digest: DigestContext?
    var raw: [UInt8] = []

    init(_ hash: DigestAlgorithm?, domain: FFC.Domain, x: [UInt8]?, y: [UInt8]?) throws {
        self.domain = domain
        self.x = x
        self.y = y
        signatureLength = 2 * domain.subprimeBytes
        digest = try hash.map { try DigestContext($0) }
    }

    func update(_ part: [UInt8]) throws {
        if let digest { return try digest.update(part) }
        guard raw.count + part.count <= 64 else { throw PKCS11Error.dataLenRange }
        raw += part
    }

    private func input() throws -> [UInt8] {
        if let digest { return try digest.finish() }
        guard FFCRules.dsaInputSizes.contains(raw.count) else { throw PKCS11Error.dataLenRange }
        return raw
    }

    func finish() throws -> [UInt8] {
        guard let x else { throw PKCS11Error.generalError }
        return try FFC.dsaSign(domain, x: x, digest: try input())
    }

    func finish(signature: [UInt8]) throws {
        let d = try input()
        guard signature.count == signatureLength else { throw PKCS11Error.signatureLenRange }
        let pub = try y ?? FFC.publicValue(domain, x: x ?? [])
        guard try FFC.dsaVerify(domain, y: pub, digest: d, signature: signature) else { throw PKCS11Error.signatureInvalid }
    }
}

extension Runtime {
    /// C_SignInit / C_VerifyInit with CKM_DSA*: a CKK_DSA private key with
    /// CKA_SIGN, or for verification a public key with CKA_VERIFY.
    func dsaOperation(_ hash: DigestAlgorithm?, _ view: ObjectView, signing: Bool) throws -> DSAOperation {
        guard view.keyType == CKK_DSA, view.objectClass == CKO_PRIVATE_KEY || (!signing && view.objectClass == CKO_PUBLIC_KEY) else {
            throw PKCS11Error.keyTypeInconsistent
        }
        let usage = view.objectClass == CKO_PUBLIC_KEY ? CKA_VERIFY : CKA_SIGN
        guard view.bool(usage) == true else { throw PKCS11Error.keyFunctionNotPermitted }
        let d = try FFCRules.domain(view.attributes, .dsa, missing: .keyHandleInvalid)
        guard let v = view.attributes[CKA_VALUE] else { throw PKCS11Error.keyHandleInvalid }
        return try DSAOperation(hash, domain: d, x: view.objectClass == CKO_PRIVATE_KEY ? v : nil,
                                y: view.objectClass == CKO_PUBLIC_KEY ? v : nil)
    }

    /// C_GenerateKeyPair with CKM_DSA_KEY_PAIR_GEN / CKM_DH_PKCS_KEY_PAIR_GEN,
    /// or nil for another mechanism. The domain comes from the public
    /// template (CKA_PRIME, CKA_SUBPRIME, CKA_BASE), as the spec puts it.
    func generateFFCKeyPair(_ s: Session, _ m: CK_MECHANISM_TYPE?, pubT: AttributeMap,
                            privT: AttributeMap) throws -> (CK_OBJECT_HANDLE, CK_OBJECT_HANDLE)? {
        let kind: FFC.Kind
        switch m {
        case CKM_DSA_KEY_PAIR_GEN?: kind = .dsa
        case CKM_DH_PKCS_KEY_PAIR_GEN?: kind = .dh
        default: return nil
        }
        let d = try FFCRules.domain(pubT, kind)
        var privateBits: Int?
        if kind == .dh, let vb = try privT.checkedULong(CKA_VALUE_BITS) {
            guard let b = Int(exactly: vb), b >= 160, b < d.primeBits else { throw PKCS11Error.attributeValueInvalid }
            privateBits = b
        }
        try ObjectRules.checkPrivacy(CKO_PRIVATE_KEY, privT)
        let privToken = try privT.checkedBool(CKA_TOKEN) ?? false
        let pubToken = try pubT.checkedBool(CKA_TOKEN) ?? false
        try checkWritable(s, isToken: privToken, isPrivate: try privT.checkedBool(CKA_PRIVATE) ?? true)
        try checkWritable(s, isToken: pubToken, isPrivate: try pubT.checkedBool(CKA_PRIVATE) ?? false)
        // A template may name the components (they are the inputs) but not the key values.
        var pubIn = pubT, privIn = privT
        for t in [CKA_PRIME, CKA_SUBPRIME, CKA_BASE] { pubIn[t] = nil; privIn[t] = nil }
        privIn[CKA_VALUE_BITS] = nil
        if pubIn[CKA_VALUE] != nil || privIn[CKA_VALUE] != nil { throw PKCS11Error.attributeReadOnly }
        var key: (x: [UInt8], y: [UInt8])
        do {
            try FFC.validate(kind, d, x: nil, y: nil)
            key = try FFC.generateKey(kind, d, privateBits: privateBits)
        } catch {
            throw PKCS11Error.attributeValueInvalid  // domain parameters OpenSSL refuses
        }
        defer { for i in key.x.indices { key.x[i] = 0 } }
        let (pub, priv) = try FFCRules.pair(kind, d, x: key.x, y: key.y, privT: privIn, pubT: pubIn, local: true,
                                            mechanism: m)
        let pubHandle = try store(pub, in: s)
        do {
            return (pubHandle, try store(priv, in: s))
        } catch {
            try? destroyObject(session: s.handle, object: pubHandle)
            throw error
        }
    }

    /// C_GenerateKey with CKM_DSA_PARAMETER_GEN (CKA_PRIME_BITS, optional
    /// CKA_SUB_PRIME_BITS) or CKM_DH_PKCS_PARAMETER_GEN (CKA_PRIME_BITS): a
    /// CKO_DOMAIN_PARAMETERS object. Nil for another mechanism.
    func generateFFCDomain(_ s: Session, _ m: CK_MECHANISM_TYPE?, _ t: AttributeMap) throws -> CK_OBJECT_HANDLE? {
        let kind: FFC.Kind
        switch m {
        case CKM_DSA_PARAMETER_GEN?: kind = .dsa
        case CKM_DH_PKCS_PARAMETER_GEN?: kind = .dh
        default: return nil
        }
        let keyType: CK_KEY_TYPE = kind == .dsa ? CKK_DSA : CKK_DH
        if let c = try t.checkedULong(CKA_CLASS), c != CKO_DOMAIN_PARAMETERS { throw PKCS11Error.templateInconsistent }
        if let k = try t.checkedULong(CKA_KEY_TYPE), k != keyType { throw PKCS11Error.templateInconsistent }
        for a in [CKA_PRIME, CKA_SUBPRIME, CKA_BASE, CKA_LOCAL] where t[a] != nil { throw PKCS11Error.attributeReadOnly }
        guard let pb = try t.checkedULong(CKA_PRIME_BITS) else { throw PKCS11Error.templateIncomplete }
        guard let bits = Int(exactly: pb), (kind == .dsa ? FFCRules.dsaBits : FFCRules.dhBits).contains(bits) else {
            throw PKCS11Error.attributeValueInvalid
        }
        var qbits: Int?
        if let sb = try t.checkedULong(CKA_SUB_PRIME_BITS) {
            guard kind == .dsa, [160, 224, 256].contains(sb) else { throw PKCS11Error.attributeValueInvalid }
            qbits = Int(sb)
        }
        // FIPS 186-4 §4.2's (L, N) pairs.
        if kind == .dsa, let q = qbits {
            let ok = (bits == 1024 && q == 160) || (bits == 2048 && (q == 224 || q == 256)) || (bits == 3072 && q == 256)
            guard ok else { throw PKCS11Error.templateInconsistent }
        }
        if kind == .dsa, ![1024, 2048, 3072].contains(bits) { throw PKCS11Error.attributeValueInvalid }
        try FFCRules.checkSessionOnly(t)
        try checkWritable(s, isToken: try t.checkedBool(CKA_TOKEN) ?? false, isPrivate: try t.checkedBool(CKA_PRIVATE) ?? false)
        let d: FFC.Domain
        do { d = try FFC.generateDomain(kind, primeBits: bits, subprimeBits: qbits) } catch { throw PKCS11Error.generalError }
        var a = t.filter { !ObjectRules.hidden.contains($0.key) }
        a.merge(FFCRules.components(d, kind)) { _, new in new }
        a[CKA_CLASS] = AttributeCoding.ulong(CKO_DOMAIN_PARAMETERS)
        a[CKA_KEY_TYPE] = AttributeCoding.ulong(keyType)
        a[CKA_PRIME_BITS] = AttributeCoding.ulong(CK_ULONG(d.primeBits))
        if kind == .dsa, let q = d.q { a[CKA_SUB_PRIME_BITS] = AttributeCoding.ulong(CK_ULONG(FFCRules.bits(q))) }
        a[CKA_LOCAL] = AttributeCoding.bool(true)
        a[CKA_TOKEN] = AttributeCoding.bool(try t.checkedBool(CKA_TOKEN) ?? false)
        return try store(a, in: s)
    }

    /// CKM_DH_PKCS_DERIVE: the parameter is the other party's public value.
    /// The new key's value is Z (padded to the size of p), cut to
    /// CKA_VALUE_LEN from the left end kept as SoftHSM2 keeps it: the
    /// trailing bytes (see docs/pkcs11-conformance.md, "DSA and DH").
    func deriveDH(_ s: Session, peer: [UInt8], baseKey: CK_OBJECT_HANDLE, template: Template) throws -> CK_OBJECT_HANDLE {
        let base = try resolveKey(s, baseKey)
        guard base.objectClass == CKO_PRIVATE_KEY, base.keyType == CKK_DH else { throw PKCS11Error.keyTypeInconsistent }
        guard base.bool(CKA_DERIVE) == true else { throw PKCS11Error.keyFunctionNotPermitted }
        try checkConsent(base, .derive)  // Prompt.swift
        let d = try FFCRules.domain(base.attributes, .dh, missing: .keyHandleInvalid)
        guard let x = base.attributes[CKA_VALUE] else { throw PKCS11Error.keyHandleInvalid }
        let r = try DerivedKeyRequest(try template.map(), also: Runtime.encryptDataKeyTypes)
        var z: [UInt8]
        do { z = try FFC.dhDerive(d, x: x, peer: peer) } catch { throw PKCS11Error.mechanismParamInvalid }
        defer { for i in z.indices { z[i] = 0 } }
        let natural = SymmetricKeys.fixedSize(r.keyType) ?? (r.keyType == CKK_AES ? 32 : z.count)
        let n = try r.resolvedLength(natural: natural)
        guard n <= z.count else { throw PKCS11Error.templateInconsistent }
        var value = Array(z.suffix(n))
        defer { for i in value.indices { value[i] = 0 } }
        if Runtime.encryptDataKeyTypes.contains(r.keyType) { DES.setOddParity(&value) }
        let bornSecret = base.bool(CKA_ALWAYS_SENSITIVE) == true && base.bool(CKA_NEVER_EXTRACTABLE) == true
        let a = try secretKeyAttributes(value: value, keyType: r.keyType, template: r.template, mechanism: CKM_DH_PKCS_DERIVE,
                                        bornSecret: bornSecret)
        return try store(a, in: s)
    }
}
