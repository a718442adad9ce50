import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 3.2 §5.18.8-5.18.9: key encapsulation (ML-KEM; PKCS11/Encapsulation.swift). Reached
// through ks32_C_EncapsulateKey / ks32_C_DecapsulateKey (functions_3_2.c) in-process and inside
// the agent. Arguments in the order of the prototype: the session, then the output pointers a
// call cannot go without, then the mechanism, the key, the template, the ciphertext.

@c @implementation
public func ks_C_EncapsulateKey(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                                _ hPublicKey: CK_OBJECT_HANDLE, _ pTemplate: UnsafeMutablePointer<CK_ATTRIBUTE>?,
                                _ ulAttributeCount: CK_ULONG, _ pCiphertext: UnsafeMutablePointer<CK_BYTE>?,
                                _ pulCiphertextLen: UnsafeMutablePointer<CK_ULONG>?,
                                _ phKey: UnsafeMutablePointer<CK_OBJECT_HANDLE>?) -> CK_RV {
    entry("C_EncapsulateKey", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism)) hPublicKey=\(hPublicKey)") {
        let rt = try runtime(session: hSession)
        let cap = try capacity(pCiphertext, pulCiphertextLen)
        // The new key's handle is needed only when a key is made (not for a length query).
        if cap != nil, phKey == nil { throw PKCS11Error.argumentsBad }
        // The ciphertext goes straight into the caller's buffer (no array per call).
        let (r, handle) = try rt.encapsulateKey(session: hSession, mechanism: try mechanism(pMechanism), publicKey: hPublicKey,
                                                template: try template(pTemplate, ulAttributeCount),
                                                output: UnsafeMutableRawPointer(pCiphertext), capacity: cap)
        if let handle, let phKey { phKey.pointee = handle }
        return deliverDirect(r, pulCiphertextLen)
    }
}

@c @implementation
public func ks_C_DecapsulateKey(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                                _ hPrivateKey: CK_OBJECT_HANDLE, _ pTemplate: UnsafeMutablePointer<CK_ATTRIBUTE>?,
                                _ ulAttributeCount: CK_ULONG, _ pCiphertext: UnsafeMutablePointer<CK_BYTE>?,
                                _ ulCiphertextLen: CK_ULONG, _ phKey: UnsafeMutablePointer<CK_OBJECT_HANDLE>?) -> CK_RV {
    entry("C_DecapsulateKey", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism)) hPrivateKey=\(hPrivateKey)") {
        let rt = try runtime(session: hSession)
        guard let phKey else { throw PKCS11Error.argumentsBad }
        let m = try mechanism(pMechanism)
        let t = try template(pTemplate, ulAttributeCount)
        // The ciphertext is read in place (the caller's memory is valid for the call): no copy.
        guard let ciphertext = try rawInput(pCiphertext, ulCiphertextLen) else { throw PKCS11Error.argumentsBad }
        phKey.pointee = try rt.decapsulateKey(session: hSession, mechanism: m, privateKey: hPrivateKey, template: t,
                                              ciphertext: ciphertext)
        return CKR_OK
    }
}
