import CPKCS11
import Keychain
import KeyshareCrypto
import Tokens

// PKCS #11 3.0 §5.18 C_WrapKey / C_UnwrapKey with CKM_AES_KEY_WRAP (RFC 3394)
// and CKM_AES_KEY_WRAP_PAD (RFC 5649), each with the standard or an
// alternative IV, CKM_AES_GCM, and the block modes of BlockWrap.swift
// (CKM_AES_ECB, CKM_AES_CBC(_PAD), CKM_DES3_ECB, CKM_DES3_CBC(_PAD)). Secret
// keys wrap as their value, private keys as PKCS #8 PrivateKeyInfo.
//
// Policy (docs/pkcs11-conformance.md, "Wrap/decrypt separation"): a key
// leaves only when CKA_EXTRACTABLE is true (sensitive or not: that is what
// wrapping is for), and then only as KeyUsagePolicy allows: CKA_WRAP_WITH_TRUSTED
// keys only under a CKA_TRUSTED wrapping key; a sensitive key never under a
// key that can decrypt or whose value was ever known outside the token
// (KeyUsagePolicy.swift has the attacks each rule stops), and as rules 6
// 7 and 9 allow the mechanism (a sensitive key is never wrapped with GCM, nor
// with an unauthenticated block mode under a key that can unwrap, nor under a
// Triple DES key weaker than itself).

/// A wrap mechanism and its parameters.
enum WrapMethod {
    case keyWrap(pad: Bool, iv: [UInt8]?)
    case gcm(GCMParameters)
    case block(BlockWrap)

    init(_ m: Mechanism) throws {
        switch m {
        case .aesKeyWrap(let pad): self = .keyWrap(pad: pad, iv: nil)
        case .aesKeyWrapWithIV(let pad, let iv): self = .keyWrap(pad: pad, iv: iv)
        case .aesGCM(let p): self = .gcm(p)
        default:
            guard let b = BlockWrap(m) else { throw PKCS11Error.mechanismInvalid }
            self = .block(b)
        }
    }

    var protection: KeyUsagePolicy.WrapProtection {
        switch self {
        case .keyWrap: .keyWrap
        case .block: .blockMode
        case .gcm: .gcm
        }
    }

    /// The key types a wrapping key of this mechanism may have.
    var keyTypes: Set<CK_KEY_TYPE> {
        if case .block(let b) = self { return b.keyTypes }
        return [CKK_AES]
    }

    /// The cipher key of a wrapping key's value, nil for a size its type never has.
    func cipherKey(_ value: [UInt8], keyType: CK_KEY_TYPE) -> [UInt8]? {
        if case .block(let b) = self { return b.cipherKey(value, keyType: keyType) }
        return [16, 24, 32].contains(value.count) ? value : nil
    }

    /// Whether the mechanism wraps private keys (PKCS #8); the unpadded
    /// block modes wrap secret keys only.
    var wrapsPrivateKeys: Bool {
        if case .block(let b) = self { return b.pad }
        return true
    }

    /// The wrapped size of `n` bytes of key material.
    func wrappedLength(_ n: Int) throws -> Int {
        switch self {
        case .keyWrap(let pad, _):
            if !pad, n % 8 != 0 || n < 16 { throw PKCS11Error(CKR_KEY_SIZE_RANGE) }
            return pad ? (n + 7) / 8 * 8 + 8 : n + 8
        case .block(let b): return b.wrappedLength(n)
        case .gcm(let p): return n + p.tagBytes
        }
    }

    func wrap(kek: [UInt8], _ material: [UInt8]) throws -> [UInt8] {
        switch self {
        case .keyWrap(let pad, let iv): return try AESKeyWrap.wrap(kek: kek, key: material, padded: pad, iv: iv)
        case .block(let b): return try b.wrap(kek: kek, material)
        case .gcm(let p):
            let (ct, tag) = try AESGCM.encrypt(key: kek, iv: p.iv, plaintext: material, aad: p.aad, tagLength: p.tagBytes)
            return ct + tag
        }
    }

    /// The key material in `wrapped`: CKR_WRAPPED_KEY_LEN_RANGE for a size
    /// the mechanism never produces, CKR_WRAPPED_KEY_INVALID when it does
    /// not open (integrity, padding or tag).
    func unwrap(kek: [UInt8], _ wrapped: [UInt8]) throws -> [UInt8] {
        let lengthOK: Bool
        switch self {
        case .keyWrap: lengthOK = wrapped.count >= 16 && wrapped.count % 8 == 0
        case .block(let b): return try b.unwrap(kek: kek, wrapped)
        case .gcm(let p): lengthOK = wrapped.count > p.tagBytes
        }
        guard lengthOK else { throw PKCS11Error(CKR_WRAPPED_KEY_LEN_RANGE) }
        do {
            switch self {
            case .keyWrap(let pad, let iv): return try AESKeyWrap.unwrap(kek: kek, wrapped: wrapped, padded: pad, iv: iv)
            case .block(let b): return try b.unwrap(kek: kek, wrapped)
            case .gcm(let p):
                let split = wrapped.count - p.tagBytes
                return try AESGCM.decrypt(key: kek, iv: p.iv, ciphertext: Array(wrapped[..<split]),
                                          tag: Array(wrapped[split...]), aad: p.aad)
            }
        } catch {
            throw PKCS11Error(CKR_WRAPPED_KEY_INVALID)
        }
    }
}

extension Runtime {
    /// The wrapping or unwrapping key's cipher key, after its type and flag
    /// checks (`method` nil: an AES mechanism).
    func kek(_ s: Session, _ h: CK_OBJECT_HANDLE, usage: CK_ATTRIBUTE_TYPE,
             method: WrapMethod? = nil) throws -> (ObjectView, [UInt8]) {
        let view: ObjectView
        do {
            view = try resolve(s, h)
        } catch let e as PKCS11Error where e == .objectHandleInvalid {
            throw PKCS11Error(usage == CKA_WRAP ? CKR_WRAPPING_KEY_HANDLE_INVALID : CKR_UNWRAPPING_KEY_HANDLE_INVALID)
        }
        let types = method?.keyTypes ?? [CKK_AES]
        guard view.objectClass == CKO_SECRET_KEY, let type = view.keyType, types.contains(type) else {
            throw PKCS11Error(usage == CKA_WRAP ? CKR_WRAPPING_KEY_TYPE_INCONSISTENT : CKR_UNWRAPPING_KEY_TYPE_INCONSISTENT)
        }
        guard view.bool(usage) == true else { throw PKCS11Error.keyFunctionNotPermitted }
        guard let v = view.attributes[CKA_VALUE],
              let key = (method ?? .keyWrap(pad: false, iv: nil)).cipherKey(v, keyType: type) else {
            throw PKCS11Error(usage == CKA_WRAP ? CKR_WRAPPING_KEY_SIZE_RANGE : CKR_UNWRAPPING_KEY_SIZE_RANGE)
        }
        return (view, key)
    }

    public func wrapKey(session h: CK_SESSION_HANDLE, mechanism: Mechanism, wrappingKey: CK_OBJECT_HANDLE,
                        key: CK_OBJECT_HANDLE, capacity: Int?) throws -> OutputResult {
        let s = try session(h)
        if mechanism.isRSAWrap { return try rsaWrapKey(s, mechanism, wrappingKey: wrappingKey, key: key, capacity: capacity) }
        return try wrapKey(s, method: try WrapMethod(mechanism), wrappingKey: wrappingKey, key: key, capacity: capacity)
    }

    /// C_WrapKey's AES path, shared with the 3.2 C_WrapKeyAuthenticated (WrapAuthenticated.swift):
    /// one place for the extractability and wrap/decrypt separation rules.
    func wrapKey(_ s: Session, method: WrapMethod, wrappingKey: CK_OBJECT_HANDLE, key: CK_OBJECT_HANDLE,
                 capacity: Int?) throws -> OutputResult {
        let (wrapper, kekValue) = try kek(s, wrappingKey, usage: CKA_WRAP, method: method)
        let target = try resolveKey(s, key)
        guard target.bool(CKA_EXTRACTABLE) == true else { throw PKCS11Error(CKR_KEY_UNEXTRACTABLE) }
        try TemplateAttributes.checkWrap(wrapper: wrapper, target: target)  // CKA_WRAP_TEMPLATE
        try KeyUsagePolicy.checkWrap(wrapper: wrapper, target: target)
        try KeyUsagePolicy.checkWrapMechanism(method.protection, wrapper: wrapper, target: target)
        var material: [UInt8]
        switch target.objectClass {
        case CKO_SECRET_KEY:
            guard let v = target.attributes[CKA_VALUE] else { throw PKCS11Error(CKR_KEY_NOT_WRAPPABLE) }
            material = v
        case CKO_PRIVATE_KEY:
            guard method.wrapsPrivateKeys, target.attributes[CKA.keyshareExternal] == nil else { throw PKCS11Error(CKR_KEY_NOT_WRAPPABLE) }
            // DSA and DH keys are components, not PKCS #8 of a PrivateKey (FFCKeys.swift).
            guard target.keyType != CKK_DSA, target.keyType != CKK_DH else { throw PKCS11Error(CKR_KEY_NOT_WRAPPABLE) }
            try checkConsent(target, .export)  // Prompt.swift
            material = try privateKey(target).pkcs8DER()
        default:
            throw PKCS11Error(CKR_KEY_NOT_WRAPPABLE)
        }
        defer { for i in material.indices { material[i] = 0 } }
        let needed = try method.wrappedLength(material.count)
        if let r = OutputResult.decide(needed: needed, capacity: capacity) { return r }
        return .bytes(try method.wrap(kek: kekValue, material))
    }

    public func unwrapKey(session h: CK_SESSION_HANDLE, mechanism: Mechanism, unwrappingKey: CK_OBJECT_HANDLE,
                          wrapped: [UInt8], template: Template) throws -> CK_OBJECT_HANDLE {
        let s = try session(h)
        // A key unwrapped with a private key is private (issue 29; ObjectRules).
        try checkInheritedPrivacy(s, sources: [unwrappingKey], templates: [template], stored: KS_CKA_UNWRAP_TEMPLATE)
        if mechanism.isRSAWrap { return try rsaUnwrapKey(s, mechanism, unwrappingKey: unwrappingKey, wrapped: wrapped, template: template) }
        return try unwrapKey(s, method: try WrapMethod(mechanism), unwrappingKey: unwrappingKey, wrapped: wrapped,
                             template: template)
    }

    /// C_UnwrapKey's AES path, shared with the 3.2 C_UnwrapKeyAuthenticated.
    func unwrapKey(_ s: Session, method: WrapMethod, unwrappingKey: CK_OBJECT_HANDLE, wrapped: [UInt8],
                   template: Template) throws -> CK_OBJECT_HANDLE {
        let (unwrapper, kekValue) = try kek(s, unwrappingKey, usage: CKA_UNWRAP, method: method)
        // CKA_UNWRAP_TEMPLATE merged in first: the checks below see the merged template.
        let t = try TemplateAttributes.merge(template, with: TemplateAttributes.stored(unwrapper, KS_CKA_UNWRAP_TEMPLATE)).map()
        try KeyUsagePolicy.checkUnwrapTemplate(unwrapper: unwrapper, t)
        guard let cls = try t.checkedULong(CKA_CLASS), let keyType = try t.checkedULong(CKA_KEY_TYPE) else {
            throw PKCS11Error.templateIncomplete
        }
        if cls != CKO_SECRET_KEY, !method.wrapsPrivateKeys { throw PKCS11Error.templateInconsistent }
        var material = try method.unwrap(kek: kekValue, wrapped)
        defer { for i in material.indices { material[i] = 0 } }
        if case .block(let b) = method, !b.pad {
            let cut = try b.truncate(material, keyType: keyType, valueLength: try t.checkedULong(CKA_VALUE_LEN))
            for i in material.indices { material[i] = 0 }
            material = cut
        }
        return try storeUnwrappedKey(material, cls: cls, keyType: keyType, template: t, in: s)
    }

    /// The object an unwrap makes from the opened material, whichever family
    /// opened it (AES key wrap here, RSA in RSAWrap.swift): a secret key from
    /// its value, a private key from its PKCS #8. An unwrapped key was outside
    /// the module: never "always sensitive".
    func storeUnwrappedKey(_ material: [UInt8], cls: CK_OBJECT_CLASS, keyType: CK_KEY_TYPE, template t: AttributeMap,
                           in s: Session) throws -> CK_OBJECT_HANDLE {
        switch cls {
        case CKO_SECRET_KEY:
            switch keyType {
            case CKK_AES: guard [16, 24, 32].contains(material.count) else { throw PKCS11Error(CKR_WRAPPED_KEY_INVALID) }
            case CKK_GENERIC_SECRET: guard !material.isEmpty else { throw PKCS11Error(CKR_WRAPPED_KEY_INVALID) }
            case CKK_DES, CKK_DES2, CKK_DES3, CKK_CHACHA20:  // one size each; DES parity (SymmetricKeys.swift)
                guard SymmetricKeys.isValid(material, type: keyType) else { throw PKCS11Error(CKR_WRAPPED_KEY_INVALID) }
            default: throw PKCS11Error.templateInconsistent
            }
            if let len = try t.checkedULong(CKA_VALUE_LEN), len != material.count { throw PKCS11Error.templateInconsistent }
            let a = try secretKeyAttributes(value: material, keyType: keyType, template: t, mechanism: nil, bornSecret: false)
            return try store(a, in: s)
        case CKO_PRIVATE_KEY:
            let k: PrivateKey
            do { k = try PrivateKey(der: material) } catch { throw PKCS11Error(CKR_WRAPPED_KEY_INVALID) }
            guard CK_KEY_TYPE(ObjectTemplates.keyType(k.keyType)) == keyType else { throw PKCS11Error.templateInconsistent }
            // A post-quantum key's parameter set comes from the PKCS #8; a template naming another
            // one cannot be honoured ("the precise template", §5.18): refused, not ignored.
            if let want = try t.checkedULong(CKA_PARAMETER_SET), ObjectTemplates.parameterSet(k.keyType).map({ CK_ULONG($0) }) != want {
                throw PKCS11Error.templateInconsistent
            }
            let fallbackID = try k.publicKey.keyIdentifier()
            var a = try ObjectTemplates.privateKey(
                k, label: t.string(CKA_LABEL) ?? "", id: t[CKA_ID] ?? fallbackID,
                extractable: try t.checkedBool(CKA_EXTRACTABLE) ?? false, local: false,
                sensitive: try t.checkedBool(CKA_SENSITIVE) ?? true)
            a.merge(try KeyGenerationRules.callerPart(t, objectClass: CKO_PRIVATE_KEY, keyType: keyType)) { _, new in new }
            a[CKA_TOKEN] = AttributeCoding.bool(try t.checkedBool(CKA_TOKEN) ?? false)
            return try store(a, in: s)
        default:
            throw PKCS11Error.templateInconsistent
        }
    }
}
