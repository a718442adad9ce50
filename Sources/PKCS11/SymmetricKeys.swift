import CPKCS11
import Keychain
import KeyshareCrypto

// The secret key types of issue 13 that have one size each: CKK_DES (8
// bytes), CKK_DES2 (16 bytes: two-key 3DES, K1 K2 K1, which the CKM_DES3_*
// mechanisms take), CKK_DES3 (24 bytes, three-key) and CKK_CHACHA20 (32 bytes). Their
// generation (C_GenerateKey) and the value check C_CreateObject and
// C_UnwrapKey apply. DES and DES3 are legacy (DES.swift): offered for old
// peers, never made by anything in keyshare unless asked for.

enum SymmetricKeys {
    /// The size a key of `type` must have, for the fixed-size types.
    static func fixedSize(_ type: CK_KEY_TYPE) -> Int? {
        switch type {
        case CKK_DES: DES.Variant.des.keySize
        case CKK_DES2: DES.twoKeySize
        case CKK_DES3: DES.Variant.tripleDES.keySize
        case CKK_CHACHA20: AEADAlgorithm.chachaKeySize
        default: nil
        }
    }

    /// Whether `value` is a valid key of a fixed-size `type`. PKCS #11 3.0
    /// (DES / DES3 secret key objects): "DES keys MUST have their parity bits
    /// properly set ... Attempting to create or unwrap a DES key with
    /// incorrect parity MUST return an error" (SoftHSM2 does not check; the
    /// spec's MUST is followed).
    static func isValid(_ value: [UInt8], type: CK_KEY_TYPE) -> Bool {
        guard let n = fixedSize(type), value.count == n else { return false }
        return type == CKK_CHACHA20 || DES.hasOddParity(value)
    }

    /// The key type and a fresh value for CKM_DES_KEY_GEN, CKM_DES2_KEY_GEN, CKM_DES3_KEY_GEN
    /// or CKM_CHACHA20_KEY_GEN, or nil for another mechanism. A template's
    /// CKA_VALUE_LEN, optional here, must name the one size.
    static func generate(_ mechanism: CK_MECHANISM_TYPE, template t: AttributeMap) throws -> (CK_KEY_TYPE, [UInt8])? {
        let type: CK_KEY_TYPE
        switch mechanism {
        case CKM_DES_KEY_GEN: type = CKK_DES
        case CKM_DES2_KEY_GEN: type = CKK_DES2
        case CKM_DES3_KEY_GEN: type = CKK_DES3
        case CKM_CHACHA20_KEY_GEN: type = CKK_CHACHA20
        default: return nil
        }
        guard let n = fixedSize(type) else { return nil }
        if let len = try t.checkedULong(CKA_VALUE_LEN), len != CK_ULONG(n) { throw PKCS11Error.templateInconsistent }
        var value = try SecureRandom.bytes(n)
        if type != CKK_CHACHA20 { DES.setOddParity(&value) }
        return (type, value)
    }
}

extension Runtime {
    /// C_GenerateKey for the fixed-size types, or nil for another mechanism.
    func generateFixedSizeKey(_ s: Session, _ mechanism: Mechanism, _ t: AttributeMap) throws -> CK_OBJECT_HANDLE? {
        guard let m = KeyGenerationRules.mechanismType(mechanism),
              let (type, value) = try SymmetricKeys.generate(m, template: t) else { return nil }
        var a = try secretKeyAttributes(value: value, keyType: type, template: t, mechanism: m)
        a[CKA_LOCAL] = AttributeCoding.bool(true)
        return try store(a, in: s)
    }
}
