import CPKCS11
import Keychain
import KeyshareCrypto
import Tokens

// PKCS #11 3.0 §5.18 C_WrapKey / C_UnwrapKey under RSA keys (Wrap.swift
// hands these mechanisms here):
//
// - CKM_RSA_PKCS and CKM_RSA_PKCS_OAEP (Current Mechanisms §2.1.6, §2.1.8):
//   the secret key's value is RSA-encrypted to the wrapping public key. Only
//   secret keys: "this mechanism can wrap and unwrap any secret key of
//   appropriate length"; a private key's PKCS #8 (over 600 bytes for the
//   smallest RSA key, 67 for P-256 but with no room for OAEP's overhead on a
//   1024-bit modulus) does not fit a block, and the spec defines no private
//   key form for them. A private key target is CKR_KEY_NOT_WRAPPABLE, an
//   unwrap template for one CKR_TEMPLATE_INCONSISTENT.
// - CKM_RSA_AES_KEY_WRAP (§2.1.21): an ephemeral AES key wraps the target
//   with RFC 5649 and is itself OAEP-encrypted; any length fits, so private
//   keys (PKCS #8 PrivateKeyInfo) wrap too. The blob opens with OpenSSL:
//   `pkeyutl -decrypt -pkeyopt rsa_padding_mode:oaep` on the first k bytes,
//   then `enc -id-aes256-wrap-pad` on the rest (70-asymmetric.sh does).
//
// The wrapping key is an RSA public key with CKA_WRAP, the unwrapping key
// an RSA private key with CKA_UNWRAP; the rules of
// KeyUsagePolicy+PublicKeyWrap.swift decide what may leave.

extension Mechanism {
    /// The mechanisms RSAWrap.swift runs for C_WrapKey / C_UnwrapKey.
    var isRSAWrap: Bool {
        switch self {
        case .rsaPKCS, .rsaOAEP, .rsaAESKeyWrap: true
        default: false
        }
    }
}

extension Runtime {
    /// The RSA key of a wrap (public, CKA_WRAP) or unwrap (private,
    /// CKA_UNWRAP), with the spec's handle and type errors.
    private func rsaWrappingKey(_ s: Session, _ h: CK_OBJECT_HANDLE, wrapping: Bool) throws -> ObjectView {
        let view: ObjectView
        do {
            view = try resolve(s, h)
        } catch let e as PKCS11Error where e == .objectHandleInvalid {
            throw PKCS11Error(wrapping ? CKR_WRAPPING_KEY_HANDLE_INVALID : CKR_UNWRAPPING_KEY_HANDLE_INVALID)
        }
        let cls = wrapping ? CKO_PUBLIC_KEY : CKO_PRIVATE_KEY
        guard view.objectClass == cls, view.keyType == CKK_RSA, !view.isExternalKey else {
            throw PKCS11Error(wrapping ? CKR_WRAPPING_KEY_TYPE_INCONSISTENT : CKR_UNWRAPPING_KEY_TYPE_INCONSISTENT)
        }
        guard view.bool(wrapping ? CKA_WRAP : CKA_UNWRAP) == true else { throw PKCS11Error.keyFunctionNotPermitted }
        if !wrapping { try checkConsent(view, .unwrap) }  // Prompt.swift
        return view
    }

    private static func oaepPadding(_ o: OAEPParameters) -> RSAPadding {
        .oaep(o.hash, mgf1: o.mgf1, label: o.label)
    }

    func rsaWrapKey(_ s: Session, _ mechanism: Mechanism, wrappingKey: CK_OBJECT_HANDLE, key: CK_OBJECT_HANDLE,
                    capacity: Int?) throws -> OutputResult {
        let wrapperView = try rsaWrappingKey(s, wrappingKey, wrapping: true)
        let wrapper = try publicKey(wrapperView)
        let target = try resolveKey(s, key)
        guard target.bool(CKA_EXTRACTABLE) == true else { throw PKCS11Error(CKR_KEY_UNEXTRACTABLE) }
        try TemplateAttributes.checkWrap(wrapper: wrapperView, target: target)  // CKA_WRAP_TEMPLATE
        try KeyUsagePolicy.checkPublicKeyWrap(wrapper: wrapperView, target: target) {
            try rsaPrivateHalfPresent(s, modulus: wrapper.rsaModulus ?? [])
        }
        let k = (wrapper.bits + 7) / 8
        var material: [UInt8]
        switch target.objectClass {
        case CKO_SECRET_KEY:
            guard let v = target.attributes[CKA_VALUE] else { throw PKCS11Error(CKR_KEY_NOT_WRAPPABLE) }
            material = v
        case CKO_PRIVATE_KEY:
            // DSA and DH keys are components, not PKCS #8 of a PrivateKey (FFCKeys.swift).
            guard case .rsaAESKeyWrap = mechanism, target.attributes[CKA.keyshareExternal] == nil,
                  target.keyType != CKK_DSA, target.keyType != CKK_DH else {
                throw PKCS11Error(CKR_KEY_NOT_WRAPPABLE)
            }
            try checkConsent(target, .export)  // Prompt.swift
            material = try privateKey(target).pkcs8DER()
        default:
            throw PKCS11Error(CKR_KEY_NOT_WRAPPABLE)
        }
        defer { for i in material.indices { material[i] = 0 } }
        let needed: Int
        switch mechanism {
        case .rsaPKCS:
            guard material.count <= k - 11 else { throw PKCS11Error(CKR_KEY_SIZE_RANGE) }
            needed = k
        case .rsaOAEP(let o):
            guard material.count <= k - 2 * o.hash.outputSize - 2 else { throw PKCS11Error(CKR_KEY_SIZE_RANGE) }
            needed = k
        case .rsaAESKeyWrap(let p):
            // The OAEP block must hold the AES key.
            guard p.aesKeyBytes <= k - 2 * p.oaep.hash.outputSize - 2 else { throw PKCS11Error.mechanismParamInvalid }
            needed = k + (material.count + 7) / 8 * 8 + 8
        default:
            throw PKCS11Error.mechanismInvalid
        }
        if let r = OutputResult.decide(needed: needed, capacity: capacity) { return r }
        switch mechanism {
        case .rsaPKCS: return .bytes(try wrapper.encrypt(material, padding: .pkcs1))
        case .rsaOAEP(let o): return .bytes(try wrapper.encrypt(material, padding: Self.oaepPadding(o)))
        case .rsaAESKeyWrap(let p):
            return .bytes(try RSAAESKeyWrap.wrap(material, to: wrapper, aesKeyBytes: p.aesKeyBytes,
                                                 oaep: Self.oaepPadding(p.oaep)))
        default: throw PKCS11Error.mechanismInvalid
        }
    }

    func rsaUnwrapKey(_ s: Session, _ mechanism: Mechanism, unwrappingKey: CK_OBJECT_HANDLE, wrapped: [UInt8],
                      template: Template) throws -> CK_OBJECT_HANDLE {
        let unwrapperView = try rsaWrappingKey(s, unwrappingKey, wrapping: false)
        let unwrapper = try privateKey(unwrapperView)
        // CKA_UNWRAP_TEMPLATE merged in first: the checks below see the merged template.
        let t = try TemplateAttributes.merge(template, with: TemplateAttributes.stored(unwrapperView, KS_CKA_UNWRAP_TEMPLATE)).map()
        if !KeyUsagePolicy.decryptOpens(unwrapperView, mechanism) { try KeyUsagePolicy.checkPrivateKeyUnwrapTemplate(t) }
        guard let cls = try t.checkedULong(CKA_CLASS), let keyType = try t.checkedULong(CKA_KEY_TYPE) else {
            throw PKCS11Error.templateIncomplete
        }
        let k = (unwrapper.bits + 7) / 8
        var material: [UInt8]
        switch mechanism {
        case .rsaPKCS, .rsaOAEP:
            guard cls == CKO_SECRET_KEY else { throw PKCS11Error.templateInconsistent }
            guard wrapped.count == k else { throw PKCS11Error(CKR_WRAPPED_KEY_LEN_RANGE) }
            let padding: RSAPadding
            if case .rsaOAEP(let o) = mechanism { padding = Self.oaepPadding(o) } else { padding = .pkcs1 }
            do { material = try unwrapper.decrypt(wrapped, padding: padding) } catch {
                throw PKCS11Error(CKR_WRAPPED_KEY_INVALID)
            }
        case .rsaAESKeyWrap(let p):
            guard wrapped.count >= k + 16, (wrapped.count - k) % 8 == 0 else { throw PKCS11Error(CKR_WRAPPED_KEY_LEN_RANGE) }
            do { material = try RSAAESKeyWrap.unwrap(wrapped, with: unwrapper, oaep: Self.oaepPadding(p.oaep)) } catch {
                throw PKCS11Error(CKR_WRAPPED_KEY_INVALID)
            }
        default:
            throw PKCS11Error.mechanismInvalid
        }
        defer { for i in material.indices { material[i] = 0 } }
        return try storeUnwrappedKey(material, cls: cls, keyType: keyType, template: t, in: s)
    }
}
