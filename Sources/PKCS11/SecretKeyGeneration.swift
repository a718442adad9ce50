import CPKCS11
import Keychain
import KeyshareCrypto

// C_GenerateKey for the HMAC and HKDF key types and CKM_PKCS5_PBKD2:
//   - CKM_GENERIC_SECRET_KEY_GEN with CKA_KEY_TYPE one of the CKK_SHA*_HMAC
//     types or CKK_HKDF (the generic mechanism makes any generic-length
//     secret key type; without CKA_KEY_TYPE it stays KeyManagement.swift's
//     CKK_GENERIC_SECRET path);
//   - the per-type mechanisms CKM_SHA_1_KEY_GEN .. CKM_SHA512_256_KEY_GEN,
//     CKM_SHA3_*_KEY_GEN and CKM_HKDF_KEY_GEN, each making its own type;
//   - CKM_PKCS5_PBKD2 (Current Mechanisms §2.43): "new key templates must
//     contain the CKA_KEY_TYPE and CKA_VALUE_LEN attributes".
// CKA_VALUE_LEN is required for the random keys (1 to 512 bytes, as
// CKM_GENERIC_SECRET_KEY_GEN); they are local and born secret. A PBKDF2 key
// is not local and never "always sensitive": whoever knows the password
// knows the key.

extension Runtime {
    /// The key generations of this file, or nil for a mechanism KeyManagement.swift handles.
    func generateSecretKey(_ s: Session, mechanism: Mechanism, template t: AttributeMap) throws -> CK_OBJECT_HANDLE? {
        let keyType: CK_KEY_TYPE
        let mechanismType: CK_MECHANISM_TYPE
        switch mechanism {
        case .pbkdf2(let p): return try generatePBKDF2(s, p, template: t)
        case .undecoded(CKM_GENERIC_SECRET_KEY_GEN, _):
            guard let k = try t.checkedULong(CKA_KEY_TYPE), k != CKK_GENERIC_SECRET else { return nil }
            guard Runtime.hmacKeyType.values.contains(k) || k == CKK_HKDF else { throw PKCS11Error.templateInconsistent }
            (keyType, mechanismType) = (k, CKM_GENERIC_SECRET_KEY_GEN)
        case .undecoded(let m, _):
            guard let k = Mechanism.secretKeyGen[m] else { return nil }
            (keyType, mechanismType) = (k, m)
        default:
            return nil
        }
        guard let len = try t.checkedULong(CKA_VALUE_LEN) else { throw PKCS11Error.templateIncomplete }
        guard KDFLimits.generatedSecret.contains(len) else { throw PKCS11Error.attributeValueInvalid }
        var value = try SecureRandom.bytes(Int(len))
        defer { for i in value.indices { value[i] = 0 } }
        var a = try secretKeyAttributes(value: value, keyType: keyType, template: t, mechanism: mechanismType)
        a[CKA_LOCAL] = AttributeCoding.bool(true)
        return try store(a, in: s)
    }

    func generatePBKDF2(_ s: Session, _ p: PBKDF2Parameters, template t: AttributeMap) throws -> CK_OBJECT_HANDLE {
        guard t[CKA_KEY_TYPE] != nil else { throw PKCS11Error.templateIncomplete }
        let r = try DerivedKeyRequest(t)
        let length = try r.resolvedLength(natural: nil)
        // The work bound counts every output block (KDFLimits.pbkdf2Work).
        let blocks = (length + p.prf.outputSize - 1) / p.prf.outputSize
        guard p.iterations * blocks <= KDFLimits.pbkdf2Work else {  // both small: iterations <= the bound, blocks <= 1024
            throw PKCS11Error.mechanismParamInvalid
        }
        var value: [UInt8]
        do {
            value = try KDF.pbkdf2(p.prf, password: p.password, salt: p.salt, iterations: p.iterations, length: length)
        } catch {
            throw PKCS11Error.generalError
        }
        defer { for i in value.indices { value[i] = 0 } }
        // The password is an input the caller knows: the key was never only in the token.
        let known = KeyProtection(sensitive: false, extractable: true, alwaysSensitive: false, neverExtractable: false)
        return try store(try derivedSecret(value: value, r, mechanism: CKM_PKCS5_PBKD2, inputs: [known], defaults: nil),
                         in: s)
    }
}
