import CPKCS11
import Keychain
import KeyshareCrypto

// PKCS #11 3.2 elliptic_curves.md: C_EncapsulateKey / C_DecapsulateKey with CKM_ECDH1_DERIVE and
// CKM_ECDH1_COFACTOR_DERIVE (issue 18). The parameter is C_DeriveKey's CK_ECDH1_DERIVE_PARAMS
// with pPublicData NULL and ulPublicDataLen 0 (anything else: CKR_MECHANISM_PARAM_INVALID);
// its kdf and pSharedData apply as in C_DeriveKey. Encapsulation makes an ephemeral key pair on
// the recipient's curve; "the value of the generated public key is returned as the ciphertext"
// in C_DeriveKey's pPublicData format: the raw uncompressed point (CKK_EC) or the RFC 7748 bytes
// (CKK_EC_MONTGOMERY). Decapsulation is C_DeriveKey with the ciphertext as pPublicData (so a
// compressed or DER-wrapped point is taken too). Key types per the spec's tables: CKK_EC or
// CKK_EC_MONTGOMERY for ECDH, CKK_EC only for cofactor ECDH. Usage per §5.18: CKA_ENCAPSULATE
// on the public key, CKA_DECAPSULATE on the private key (CKA_DERIVE is not asked). The new key
// is built as C_DeriveKey builds it (Derive.swift `ecdhKeyAttributes`), with CKA_ALWAYS_SENSITIVE
// and CKA_NEVER_EXTRACTABLE false and CKA_LOCAL false, as §5.18 says for both functions.

extension Mechanism {
    /// ECDH through C_EncapsulateKey / C_DecapsulateKey.
    var ecdhKEM: ECDHParameters? {
        if case .ecdh(let p) = self { return p }
        return nil
    }
}

extension Runtime {
    private func ecdhKEMKey(_ s: Session, _ h: CK_OBJECT_HANDLE, _ p: ECDHParameters, cls: CK_OBJECT_CLASS,
                            usage: CK_ATTRIBUTE_TYPE) throws -> ObjectView {
        guard p.publicData.isEmpty else { throw PKCS11Error.mechanismParamInvalid }
        return try encapsulationKey(s, h, cls: cls, keyTypes: p.cofactor ? [CKK_EC] : [CKK_EC, CKK_EC_MONTGOMERY],
                                    usage: usage, mechanism: p.cofactor ? CKM_ECDH1_COFACTOR_DERIVE : CKM_ECDH1_DERIVE)
    }

    private func ecdhKEMTemplate(_ t: AttributeMap) throws -> CK_KEY_TYPE {
        let keyType = try ecdhKeyRequest(t)
        if t[CKA_VALUE] != nil { throw PKCS11Error.attributeReadOnly }
        return keyType
    }

    func ecdhEncapsulateKey(_ s: Session, _ p: ECDHParameters, publicKey h: CK_OBJECT_HANDLE, template: Template,
                            capacity: Int?) throws -> (OutputResult, CK_OBJECT_HANDLE?) {
        let view = try ecdhKEMKey(s, h, p, cls: CKO_PUBLIC_KEY, usage: CKA_ENCAPSULATE)
        let key = try publicKey(view)
        let t = try TemplateAttributes.mergeKEM(template, key: view, encapsulate: true).map()
        let keyType = try ecdhKEMTemplate(t)
        let needed: Int
        if let c = key.ecxCurve { needed = c.keyLength } else if let c = key.curve { needed = 1 + 2 * c.byteSize } else {
            throw PKCS11Error.keyTypeInconsistent
        }
        if let r = OutputResult.decide(needed: needed, capacity: capacity) { return (r, nil) }
        try checkWritable(s, isToken: try t.checkedBool(CKA_TOKEN) ?? false, isPrivate: try t.checkedBool(CKA_PRIVATE) ?? true)
        var (ct, z) = try key.ecdhEncapsulate()
        defer { for i in z.indices { z[i] = 0 } }
        let a = try ecdhKeyAttributes(z: z, p, request: keyType, template: t, bornSecret: false)
        return (.bytes(ct), try store(a, in: s))
    }

    func ecdhDecapsulateKey(_ s: Session, _ p: ECDHParameters, privateKey h: CK_OBJECT_HANDLE, template: Template,
                            ciphertext: [UInt8]) throws -> CK_OBJECT_HANDLE {
        let view = try ecdhKEMKey(s, h, p, cls: CKO_PRIVATE_KEY, usage: CKA_DECAPSULATE)
        let key = try privateKey(view)
        let t = try TemplateAttributes.mergeKEM(template, key: view, encapsulate: false).map()
        let keyType = try ecdhKEMTemplate(t)
        // C_DeriveKey's public-value forms: raw, compressed (EC), or either in a DER OCTET STRING.
        let raw: [Int]
        if let c = key.publicKey.ecxCurve { raw = [c.keyLength] } else if let c = key.curve {
            raw = [1 + 2 * c.byteSize, 1 + c.byteSize]
        } else {
            throw PKCS11Error.keyTypeInconsistent
        }
        guard raw.contains(ciphertext.count) || raw.contains(where: { ciphertext.count == $0 + ($0 < 128 ? 2 : 3) }) else {
            throw PKCS11Error(CKR_WRAPPED_KEY_LEN_RANGE)
        }
        try checkWritable(s, isToken: try t.checkedBool(CKA_TOKEN) ?? false, isPrivate: try t.checkedBool(CKA_PRIVATE) ?? true)
        var z: [UInt8]
        do { z = try key.deriveECDH(peerPoint: ciphertext) } catch { throw PKCS11Error(CKR_WRAPPED_KEY_INVALID) }
        defer { for i in z.indices { z[i] = 0 } }
        let a = try ecdhKeyAttributes(z: z, p, request: keyType, template: t, bornSecret: false)
        return try store(a, in: s)
    }
}
