import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 3.0 §5.18: key management. The session is checked before any
// other argument is decoded (§5.1.7), so a bad session with an unknown
// mechanism is CKR_SESSION_HANDLE_INVALID.

@c @implementation
public func ks_C_GenerateKey(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                             _ pTemplate: UnsafeMutablePointer<CK_ATTRIBUTE>?, _ ulCount: CK_ULONG,
                             _ phKey: UnsafeMutablePointer<CK_OBJECT_HANDLE>?) -> CK_RV {
    entry("C_GenerateKey", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism))") {
        let rt = try runtime(session: hSession)
        guard let phKey else { throw PKCS11Error.argumentsBad }
        phKey.pointee = try rt.generateKey(session: hSession, mechanism: try mechanism(pMechanism),
                                           template: try template(pTemplate, ulCount))
        return CKR_OK
    }
}

@c @implementation
public func ks_C_GenerateKeyPair(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                                 _ pPublicKeyTemplate: UnsafeMutablePointer<CK_ATTRIBUTE>?,
                                 _ ulPublicKeyAttributeCount: CK_ULONG,
                                 _ pPrivateKeyTemplate: UnsafeMutablePointer<CK_ATTRIBUTE>?,
                                 _ ulPrivateKeyAttributeCount: CK_ULONG,
                                 _ phPublicKey: UnsafeMutablePointer<CK_OBJECT_HANDLE>?,
                                 _ phPrivateKey: UnsafeMutablePointer<CK_OBJECT_HANDLE>?) -> CK_RV {
    entry("C_GenerateKeyPair", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism))") {
        let rt = try runtime(session: hSession)
        guard let phPublicKey, let phPrivateKey else { throw PKCS11Error.argumentsBad }
        let (pub, priv) = try rt.generateKeyPair(
            session: hSession, mechanism: try mechanism(pMechanism),
            publicTemplate: try template(pPublicKeyTemplate, ulPublicKeyAttributeCount),
            privateTemplate: try template(pPrivateKeyTemplate, ulPrivateKeyAttributeCount))
        phPublicKey.pointee = pub
        phPrivateKey.pointee = priv
        return CKR_OK
    }
}

@c @implementation
public func ks_C_WrapKey(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                         _ hWrappingKey: CK_OBJECT_HANDLE, _ hKey: CK_OBJECT_HANDLE,
                         _ pWrappedKey: UnsafeMutablePointer<CK_BYTE>?,
                         _ pulWrappedKeyLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_WrapKey", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism)) hWrappingKey=\(hWrappingKey) hKey=\(hKey)") {
        let rt = try runtime(session: hSession)
        let m = try mechanism(pMechanism)
        try checkAllowed(rt, hSession, hWrappingKey, pMechanism)
        let r = try rt.wrapKey(session: hSession, mechanism: m, wrappingKey: hWrappingKey,
                               key: hKey, capacity: try capacity(pWrappedKey, pulWrappedKeyLen))
        return deliver(r, pWrappedKey, pulWrappedKeyLen)
    }
}

@c @implementation
public func ks_C_UnwrapKey(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                           _ hUnwrappingKey: CK_OBJECT_HANDLE, _ pWrappedKey: UnsafeMutablePointer<CK_BYTE>?,
                           _ ulWrappedKeyLen: CK_ULONG, _ pTemplate: UnsafeMutablePointer<CK_ATTRIBUTE>?,
                           _ ulAttributeCount: CK_ULONG, _ phKey: UnsafeMutablePointer<CK_OBJECT_HANDLE>?) -> CK_RV {
    entry("C_UnwrapKey", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism)) hUnwrappingKey=\(hUnwrappingKey)") {
        let rt = try runtime(session: hSession)
        guard let phKey else { throw PKCS11Error.argumentsBad }
        let m = try mechanism(pMechanism)
        try checkAllowed(rt, hSession, hUnwrappingKey, pMechanism)
        phKey.pointee = try rt.unwrapKey(session: hSession, mechanism: m,
                                         unwrappingKey: hUnwrappingKey, wrapped: try required(pWrappedKey, ulWrappedKeyLen),
                                         template: try template(pTemplate, ulAttributeCount))
        return CKR_OK
    }
}

@c @implementation
public func ks_C_DeriveKey(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                           _ hBaseKey: CK_OBJECT_HANDLE, _ pTemplate: UnsafeMutablePointer<CK_ATTRIBUTE>?,
                           _ ulAttributeCount: CK_ULONG, _ phKey: UnsafeMutablePointer<CK_OBJECT_HANDLE>?) -> CK_RV {
    entry("C_DeriveKey", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism)) hBaseKey=\(hBaseKey)") {
        let rt = try runtime(session: hSession)
        guard let phKey else { throw PKCS11Error.argumentsBad }
        let m = try mechanism(pMechanism)
        try checkAllowed(rt, hSession, hBaseKey, pMechanism)
        // SP 800-108's CK_DERIVED_KEY handles: CK_INVALID_HANDLE unless every
        // key was made ("if any of the keys cannot be derived for any reason,
        // none of the keys shall be derived"; the offending template's phKey
        // is CK_INVALID_HANDLE). The addresses were checked non-NULL when the
        // parameter was decoded.
        var extra: [UnsafeMutablePointer<CK_OBJECT_HANDLE>] = []
        if case .sp800108(let p) = m {
            extra = p.additionalKeys.compactMap { UnsafeMutablePointer(bitPattern: $0.handleAddress) }
        }
        for p in extra { p.pointee = 0 }
        let handles = try rt.deriveKeys(session: hSession, mechanism: m, baseKey: hBaseKey,
                                        template: try template(pTemplate, ulAttributeCount))
        phKey.pointee = handles[0]
        for (p, h) in zip(extra, handles.dropFirst()) { p.pointee = h }
        return CKR_OK
    }
}

/// CKA_ALLOWED_MECHANISMS of the wrapping, unwrapping or base key, with the
/// caller's mechanism type (AllowedMechanisms.swift), after the mechanism
/// decoded (so a malformed one answers as before).
private func checkAllowed(_ rt: Runtime, _ hSession: CK_SESSION_HANDLE, _ key: CK_OBJECT_HANDLE,
                          _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?) throws {
    guard let type = pMechanism?.pointee.mechanism else { return }
    try rt.checkAllowedMechanism(session: hSession, key: key, mechanism: type)
}
