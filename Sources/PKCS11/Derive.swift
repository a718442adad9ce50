import CPKCS11
import Keychain
import KeyshareCrypto

// PKCS #11 §5.14 C_DeriveKey. CKM_ECDH1_DERIVE is here: CKD_NULL (the
// shared X coordinate Z itself) and CKD_SHA*_KDF (ANSI X9.63: Hash(Z ||
// counter || shared data) blocks); the result is a CKK_GENERIC_SECRET or
// CKK_AES key. The secret-key derivations (HKDF, SP 800-108, the simple
// derivations) are in KeyDerivation.swift. CKM_ECDH1_COFACTOR_DERIVE gives
// the same Z: every curve offered has cofactor 1 (ECCurve), and on
// X25519/X448 keys Z is the RFC 7748 function, whose clamped scalar
// already clears the cofactor.

enum X963KDF {
    static func derive(_ d: DigestAlgorithm, z: [UInt8], sharedInfo: [UInt8], length: Int) throws -> [UInt8] {
        var out: [UInt8] = []
        var counter: UInt32 = 1
        while out.count < length {
            let ctx = try DigestContext(d)
            try ctx.update(z)
            try ctx.update([UInt8(counter >> 24), UInt8(counter >> 16 & 0xFF), UInt8(counter >> 8 & 0xFF), UInt8(counter & 0xFF)])
            try ctx.update(sharedInfo)
            out += try ctx.finish()
            counter += 1
        }
        return Array(out.prefix(length))
    }
}

extension Runtime {
    /// C_DeriveKey's key (the one `phKey` receives).
    public func deriveKey(session h: CK_SESSION_HANDLE, mechanism: Mechanism, baseKey: CK_OBJECT_HANDLE,
                          template: Template) throws -> CK_OBJECT_HANDLE {
        try deriveKeys(session: h, mechanism: mechanism, baseKey: baseKey, template: template)[0]
    }

    /// C_DeriveKey: the key the template describes first, then those of
    /// SP 800-108's CK_DERIVED_KEY array, in its order. Either all of them
    /// exist afterwards or none does.
    public func deriveKeys(session h: CK_SESSION_HANDLE, mechanism: Mechanism, baseKey: CK_OBJECT_HANDLE,
                           template callerTemplate: Template) throws -> [CK_OBJECT_HANDLE] {
        let s = try session(h)
        // CKA_DERIVE_TEMPLATE merged into the template of the key (and of
        // SP 800-108's additional keys) before any check sees it. A base
        // handle that does not resolve is left to the mechanism's own path,
        // which gives its error in its order.
        var template = callerTemplate
        var mechanism = mechanism
        if let base = try? resolveKey(s, baseKey) {
            let stored = TemplateAttributes.stored(base, KS_CKA_DERIVE_TEMPLATE)
            if !stored.isEmpty {
                template = try TemplateAttributes.merge(callerTemplate, with: stored)
                if case .sp800108(var p) = mechanism {
                    for i in p.additionalKeys.indices {
                        p.additionalKeys[i].template = try TemplateAttributes.merge(p.additionalKeys[i].template, with: stored)
                    }
                    mechanism = .sp800108(p)
                }
            }
        }
        // A key made from a private key's material is private (issue 29; ObjectRules).
        var sources = [baseKey]
        var templates = [template]
        if case .simpleDerive(.concatenateBaseAndKey(let other)) = mechanism { sources.append(other) }
        if case .sp800108(let p) = mechanism { templates += p.additionalKeys.map(\.template) }
        try checkInheritedPrivacy(s, sources: sources, templates: templates)
        switch mechanism {
        case .ecdh(let p): return [try deriveECDH(s, p, baseKey: baseKey, template: template)]
        case .hkdf(let p, let data): return [try deriveHKDF(s, p, data: data, baseKey: baseKey, template: template)]
        case .sp800108(let p): return try deriveSP800108(s, p, baseKey: baseKey, template: template)
        case .simpleDerive(let p): return [try deriveSimple(s, p, baseKey: baseKey, template: template)]
        case .encryptData(let p): return [try deriveEncryptData(s, p, baseKey: baseKey, template: template)]
        case .dhDerive(let y): return [try deriveDH(s, peer: y, baseKey: baseKey, template: template)]
        default: throw PKCS11Error.mechanismInvalid
        }
    }

    func deriveECDH(_ s: Session, _ p: ECDHParameters, baseKey: CK_OBJECT_HANDLE,
                    template: Template) throws -> CK_OBJECT_HANDLE {
        // An empty pPublicData is how C_EncapsulateKey / C_DecapsulateKey take the mechanism
        // (ECDHEncapsulation.swift); C_DeriveKey needs the other party's key.
        guard !p.publicData.isEmpty else { throw PKCS11Error.mechanismParamInvalid }
        let base = try resolveKey(s, baseKey)
        // EC keys, and X25519/X448 keys (RFC 7748 through the same mechanisms, as Kryoptic does).
        guard base.objectClass == CKO_PRIVATE_KEY, base.keyType == CKK_EC || base.keyType == CKK_EC_MONTGOMERY else {
            throw PKCS11Error.keyTypeInconsistent
        }
        guard base.bool(CKA_DERIVE) == true else { throw PKCS11Error.keyFunctionNotPermitted }
        let t = try template.map()
        let request = try ecdhKeyRequest(t)
        try checkConsent(base, .derive)  // Prompt.swift

        var z: [UInt8]
        if base.isExternalKey {
            // A key of an external token: Z is computed on the card (ExternalTokens.swift).
            z = try externalDeriveECDH(s, base, publicData: p.publicData)
        } else {
            do {
                z = try privateKey(base).deriveECDH(peerPoint: p.publicData)
            } catch {
                throw PKCS11Error.mechanismParamInvalid
            }
        }
        defer { for i in z.indices { z[i] = 0 } }
        // Derived from a key that never left the module: as secret as its base.
        let bornSecret = base.bool(CKA_ALWAYS_SENSITIVE) == true && base.bool(CKA_NEVER_EXTRACTABLE) == true
        let a = try ecdhKeyAttributes(z: z, p, request: request, template: t, bornSecret: bornSecret)
        return try store(a, in: s)
    }

    /// The secret key an ECDH template asks for: CKO_SECRET_KEY, CKK_GENERIC_SECRET (the default)
    /// or CKK_AES. Checked before Z is computed.
    func ecdhKeyRequest(_ t: AttributeMap) throws -> CK_KEY_TYPE {
        let cls = try t.checkedULong(CKA_CLASS) ?? CKO_SECRET_KEY
        guard cls == CKO_SECRET_KEY else { throw PKCS11Error.templateInconsistent }
        let keyType = try t.checkedULong(CKA_KEY_TYPE) ?? CKK_GENERIC_SECRET
        guard keyType == CKK_GENERIC_SECRET || keyType == CKK_AES else { throw PKCS11Error.templateInconsistent }
        return keyType
    }

    /// The new key's attributes from Z: the KDF of the parameter (X9.63) or CKD_NULL's truncation,
    /// to CKA_VALUE_LEN (default: Z's length, 32 bytes for AES when Z is longer). Shared by
    /// C_DeriveKey and ECDH's C_EncapsulateKey / C_DecapsulateKey.
    func ecdhKeyAttributes(z: [UInt8], _ p: ECDHParameters, request keyType: CK_KEY_TYPE, template t: AttributeMap,
                           bornSecret: Bool) throws -> AttributeMap {
        let defaultLength = keyType == CKK_AES && z.count > 32 ? 32 : z.count
        var wanted = defaultLength
        if let n = try t.checkedULong(CKA_VALUE_LEN) {
            guard let i = Int(exactly: n) else { throw PKCS11Error.attributeValueInvalid }
            wanted = i
        }
        if keyType == CKK_AES, ![16, 24, 32].contains(wanted) { throw PKCS11Error.attributeValueInvalid }
        guard wanted > 0 else { throw PKCS11Error.attributeValueInvalid }
        var value: [UInt8]
        if let kdf = p.kdf {
            guard wanted <= 1024 else { throw PKCS11Error.attributeValueInvalid }
            value = try X963KDF.derive(kdf, z: z, sharedInfo: p.sharedData, length: wanted)
        } else {
            // CKD_NULL: Z truncated on the left-most bytes, as SP 800-56A does.
            guard wanted <= z.count else { throw PKCS11Error.attributeValueInvalid }
            value = Array(z.prefix(wanted))
        }
        defer { for i in value.indices { value[i] = 0 } }
        var t2 = t
        t2[CKA_VALUE_LEN] = nil
        let m = p.cofactor ? CKM_ECDH1_COFACTOR_DERIVE : CKM_ECDH1_DERIVE
        return try secretKeyAttributes(value: value, keyType: keyType, template: t2, mechanism: m, bornSecret: bornSecret)
    }
}
