import CPKCS11
import Keychain
import KeyshareCrypto

// PKCS #11 3.2 §6.1 (rsa.md) C_EncapsulateKey / C_DecapsulateKey with CKM_RSA_PKCS and
// CKM_RSA_PKCS_OAEP (issue 18): "the secret key is generated in the C_EncapsulateKey function
// and then wrapped with RSA PKCS #1 v1.5 / OAEP; C_DecapsulateKey is exactly equivalent to
// C_UnwrapKey". So the secret is fresh module randomness encrypted as C_WrapKey encrypts a
// secret key's CKA_VALUE (RSAWrap.swift's paddings and length bounds), and decapsulation is
// the RSA unwrap: the same decryption, CKR_WRAPPED_KEY_LEN_RANGE / CKR_WRAPPED_KEY_INVALID,
// KeyUsagePolicy's unwrap-template rule and storeUnwrappedKey (Wrap.swift). The key usage is
// the 3.2 function text's, not the wrap one's: "The CKA_ENCAPSULATE attribute of the public
// key ... MUST be CK_TRUE" (CKA_DECAPSULATE for the private key), else
// CKR_KEY_FUNCTION_NOT_PERMITTED. The new key has CKA_LOCAL, CKA_ALWAYS_SENSITIVE and
// CKA_NEVER_EXTRACTABLE false, as §5.18 says.
//
// CKM_RSA_X_509 "can encapsulate and decapsulate keys according to RSASVE defined in [FIPS SP
// 800-56B]" (rsa.md): no parameter; the ciphertext is k bytes (z^e mod n for a random z in
// [2, n-2]) and the shared secret Z is z as k bytes (the table's "k, k"), made by OpenSSL's
// RSASVE KEM (KeyshareCrypto/KeyEncapsulation.swift). The new key's CKA_VALUE is Z, or with
// CKA_VALUE_LEN its last bytes, as rsa.md has C_UnwrapKey take them under this mechanism (a
// CKK_AES key needs CKA_VALUE_LEN: CKR_TEMPLATE_INCOMPLETE). Decapsulation gives the raw RSA
// private operation on any input the caller picks, so the RSA unwrap rule applies to it too (no
// readable result: CKR_TEMPLATE_INCONSISTENT); a ciphertext not k bytes is
// CKR_WRAPPED_KEY_LEN_RANGE, one not in [1, n-1] CKR_WRAPPED_KEY_INVALID.

extension Mechanism {
    /// The RSA mechanisms this module encapsulates with.
    var isRSAKEM: Bool {
        switch self {
        case .rsaPKCS, .rsaOAEP, .rsaX509: true
        default: false
        }
    }
}

extension Runtime {
    private func rsaKEMKey(_ s: Session, _ h: CK_OBJECT_HANDLE, cls: CK_OBJECT_CLASS,
                           usage: CK_ATTRIBUTE_TYPE, mechanism: CK_MECHANISM_TYPE) throws -> ObjectView {
        try encapsulationKey(s, h, cls: cls, keyTypes: [CKK_RSA], usage: usage, mechanism: mechanism)
    }

    private func rsaKEMPadding(_ mechanism: Mechanism) throws -> (RSAPadding, Int, CK_MECHANISM_TYPE) {
        switch mechanism {
        case .rsaPKCS: return (.pkcs1, 11, CKM_RSA_PKCS)
        case .rsaOAEP(let o): return (.oaep(o.hash, mgf1: o.mgf1, label: o.label), 2 * o.hash.outputSize + 2, CKM_RSA_PKCS_OAEP)
        default: throw PKCS11Error.mechanismInvalid
        }
    }

    /// The secret key a template asks for: 32 bytes (the ML-KEM secret's size) unless
    /// CKA_VALUE_LEN says otherwise, at most what the padding leaves room for.
    private func rsaKEMRequest(_ t: AttributeMap, room: Int) throws -> (CK_KEY_TYPE, Int) {
        try kemSecretRequest(t, defaultLength: 32, maxLength: room, tooLong: PKCS11Error(CKR_KEY_SIZE_RANGE))
    }

    func rsaEncapsulateKey(_ s: Session, mechanism: Mechanism, publicKey h: CK_OBJECT_HANDLE, template: Template,
                           capacity: Int?) throws -> (OutputResult, CK_OBJECT_HANDLE?) {
        if case .rsaX509 = mechanism { return try rsasveEncapsulateKey(s, publicKey: h, template: template, capacity: capacity) }
        let (padding, overhead, type) = try rsaKEMPadding(mechanism)
        let view = try rsaKEMKey(s, h, cls: CKO_PUBLIC_KEY, usage: CKA_ENCAPSULATE, mechanism: type)
        let key = try publicKey(view)
        let k = (key.bits + 7) / 8
        var t = try TemplateAttributes.mergeKEM(template, key: view, encapsulate: true).map()
        let (keyType, length) = try rsaKEMRequest(t, room: k - overhead)
        if let r = OutputResult.decide(needed: k, capacity: capacity) { return (r, nil) }
        try checkWritable(s, isToken: try t.checkedBool(CKA_TOKEN) ?? false, isPrivate: try t.checkedBool(CKA_PRIVATE) ?? true)
        t[CKA_VALUE_LEN] = nil
        var secret = try SecureRandom.bytes(length)
        defer { for i in secret.indices { secret[i] = 0 } }
        let ct = try key.encrypt(secret, padding: padding)
        let a = try secretKeyAttributes(value: secret, keyType: keyType, template: t, mechanism: nil, bornSecret: false)
        return (.bytes(ct), try store(a, in: s))
    }

    func rsaDecapsulateKey(_ s: Session, mechanism: Mechanism, privateKey h: CK_OBJECT_HANDLE, template: Template,
                           ciphertext: [UInt8]) throws -> CK_OBJECT_HANDLE {
        if case .rsaX509 = mechanism { return try rsasveDecapsulateKey(s, privateKey: h, template: template, ciphertext: ciphertext) }
        let (padding, _, type) = try rsaKEMPadding(mechanism)
        let view = try rsaKEMKey(s, h, cls: CKO_PRIVATE_KEY, usage: CKA_DECAPSULATE, mechanism: type)
        let key = try privateKey(view)
        var t = try TemplateAttributes.mergeKEM(template, key: view, encapsulate: false).map()
        try KeyUsagePolicy.checkPrivateKeyUnwrapTemplate(t)
        let cls = try t.checkedULong(CKA_CLASS) ?? CKO_SECRET_KEY
        guard cls == CKO_SECRET_KEY else { throw PKCS11Error.templateInconsistent }
        let keyType = try t.checkedULong(CKA_KEY_TYPE) ?? CKK_GENERIC_SECRET
        t[CKA_CLASS] = AttributeCoding.ulong(cls)
        t[CKA_KEY_TYPE] = AttributeCoding.ulong(keyType)
        guard ciphertext.count == (key.bits + 7) / 8 else { throw PKCS11Error(CKR_WRAPPED_KEY_LEN_RANGE) }
        try checkWritable(s, isToken: try t.checkedBool(CKA_TOKEN) ?? false, isPrivate: try t.checkedBool(CKA_PRIVATE) ?? true)
        var material: [UInt8]
        do { material = try key.decrypt(ciphertext, padding: padding) } catch { throw PKCS11Error(CKR_WRAPPED_KEY_INVALID) }
        defer { for i in material.indices { material[i] = 0 } }
        return try storeUnwrappedKey(material, cls: cls, keyType: keyType, template: t, in: s)
    }

    // MARK: CKM_RSA_X_509 (RSASVE)

    /// The key type and length (1...k bytes) an RSASVE template asks for: all k bytes of Z
    /// unless CKA_VALUE_LEN says otherwise; an AES key must say it.
    private func rsasveRequest(_ t: AttributeMap, k: Int) throws -> (CK_KEY_TYPE, Int) {
        try kemSecretRequest(t, defaultLength: k, maxLength: k, tooLong: PKCS11Error(CKR_KEY_SIZE_RANGE), aesNeedsLength: true)
    }

    private func rsasveEncapsulateKey(_ s: Session, publicKey h: CK_OBJECT_HANDLE, template: Template,
                                      capacity: Int?) throws -> (OutputResult, CK_OBJECT_HANDLE?) {
        let view = try rsaKEMKey(s, h, cls: CKO_PUBLIC_KEY, usage: CKA_ENCAPSULATE, mechanism: CKM_RSA_X_509)
        let key = try publicKey(view)
        let k = (key.bits + 7) / 8
        var t = try TemplateAttributes.mergeKEM(template, key: view, encapsulate: true).map()
        let (keyType, length) = try rsasveRequest(t, k: k)
        if let r = OutputResult.decide(needed: k, capacity: capacity) { return (r, nil) }
        try checkWritable(s, isToken: try t.checkedBool(CKA_TOKEN) ?? false, isPrivate: try t.checkedBool(CKA_PRIVATE) ?? true)
        t[CKA_VALUE_LEN] = nil
        var (ct, z) = try key.rsasveEncapsulate()
        defer { for i in z.indices { z[i] = 0 } }
        let a = try secretKeyAttributes(value: Array(z.suffix(length)), keyType: keyType, template: t, mechanism: nil,
                                        bornSecret: false)
        return (.bytes(ct), try store(a, in: s))
    }

    private func rsasveDecapsulateKey(_ s: Session, privateKey h: CK_OBJECT_HANDLE, template: Template,
                                      ciphertext: [UInt8]) throws -> CK_OBJECT_HANDLE {
        let view = try rsaKEMKey(s, h, cls: CKO_PRIVATE_KEY, usage: CKA_DECAPSULATE, mechanism: CKM_RSA_X_509)
        let key = try privateKey(view)
        let k = (key.bits + 7) / 8
        var t = try TemplateAttributes.mergeKEM(template, key: view, encapsulate: false).map()
        try KeyUsagePolicy.checkPrivateKeyUnwrapTemplate(t)
        let (keyType, length) = try rsasveRequest(t, k: k)
        guard ciphertext.count == k else { throw PKCS11Error(CKR_WRAPPED_KEY_LEN_RANGE) }
        try checkWritable(s, isToken: try t.checkedBool(CKA_TOKEN) ?? false, isPrivate: try t.checkedBool(CKA_PRIVATE) ?? true)
        t[CKA_VALUE_LEN] = nil
        var z: [UInt8]
        do { z = try key.rsasveDecapsulate(ciphertext) } catch { throw PKCS11Error(CKR_WRAPPED_KEY_INVALID) }
        defer { for i in z.indices { z[i] = 0 } }
        let a = try secretKeyAttributes(value: Array(z.suffix(length)), keyType: keyType, template: t, mechanism: nil,
                                        bornSecret: false)
        return try store(a, in: s)
    }
}
