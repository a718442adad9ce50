import CPKCS11
import KeyshareCrypto

// Key derivation by data encryption (PKCS #11 3.0 Current Mechanisms §2.16):
// CKM_AES_ECB_ENCRYPT_DATA and CKM_DES3_ECB_ENCRYPT_DATA
// (CK_KEY_DERIVATION_STRING_DATA), CKM_AES_CBC_ENCRYPT_DATA
// (CK_AES_CBC_ENCRYPT_DATA_PARAMS) and CKM_DES3_CBC_ENCRYPT_DATA
// (CK_DES_CBC_ENCRYPT_DATA_PARAMS). The new key's value is the encryption of
// the data under the base key, no padding (the data is whole blocks), cut to
// CKA_VALUE_LEN, or to the key type's size, or the whole ciphertext for a
// generic secret. Base: CKK_AES (or CKK_DES3 / CKK_DES2) with CKA_DERIVE.
// New key types: generic secret, the HMAC types, AES, DES, DES2, DES3 (a DES
// key gets odd parity, as every DES key here must have).
//
// These derivations are an encryption oracle of the base key for whoever
// picks the data, so the new key is as secret as the base key: sensitive when
// the base key is sensitive, unextractable when it is unextractable,
// whatever the template says (the rule of the simple derivations, §2.42),
// and a key derived from a sensitive key can never be read back to learn
// E_K(data). Its other attributes follow KeyDerivation.swift's rules.

extension Runtime {
    static let encryptDataKeyTypes: Set<CK_KEY_TYPE> = [CKK_DES, CKK_DES2, CKK_DES3]

    func deriveEncryptData(_ s: Session, _ p: EncryptDataDerivation, baseKey: CK_OBJECT_HANDLE,
                           template: Template) throws -> CK_OBJECT_HANDLE {
        let baseTypes: Set<CK_KEY_TYPE> = p.cipher == .aes ? [CKK_AES] : [CKK_DES3, CKK_DES2]
        let (base, _) = try derivationKey(s, baseKey, types: baseTypes)
        let r = try DerivedKeyRequest(try template.map(), also: Self.encryptDataKeyTypes)
        var ciphertext: [UInt8]
        switch p.cipher {
        case .aes:
            let key = try aesKey(base, encrypting: true)
            ciphertext = try p.iv.map { try AESCBC.encrypt(key: key, iv: $0, data: p.data, padding: false) }
                ?? AESMode.ecb.context(key: key, iv: nil, encrypt: true).update(p.data)
        case .tripleDES:
            let key = try desKey(base, .tripleDES)
            let ctx = try DES.context(.tripleDES, p.iv == nil ? .ecb : .cbc, key: key, iv: p.iv, encrypt: true, padding: false)
            ciphertext = try ctx.update(p.data) + ctx.finish()
        }
        defer { for i in ciphertext.indices { ciphertext[i] = 0 } }
        let natural = SymmetricKeys.fixedSize(r.keyType) ?? (r.keyType == CKK_AES ? min(32, ciphertext.count) : ciphertext.count)
        let n = try r.resolvedLength(natural: natural)
        // Data too short for the key asked for: the parameter is what falls short (its data
        // makes the key), so CKR_MECHANISM_PARAM_INVALID, as python-pkcs11's negative tests
        // expect (they accept it or CKR_FUNCTION_FAILED, SoftHSM2's answer).
        guard n <= ciphertext.count else { throw PKCS11Error.mechanismParamInvalid }
        var value = Array(ciphertext.prefix(n))
        defer { for i in value.indices { value[i] = 0 } }
        if Self.encryptDataKeyTypes.contains(r.keyType) { DES.setOddParity(&value) }
        let input = KeyProtection(base)
        let a = try derivedSecret(value: value, r, mechanism: p.mechanismType, inputs: [input], defaults: nil,
                                  forceSensitive: input.sensitive, forceUnextractable: !input.extractable)
        return try store(a, in: s)
    }
}
