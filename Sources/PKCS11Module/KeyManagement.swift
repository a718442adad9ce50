import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 §5.14: key management.

@c @implementation
public func ks_C_GenerateKey(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                             _ pTemplate: UnsafeMutablePointer<CK_ATTRIBUTE>?, _ ulCount: CK_ULONG,
                             _ phKey: UnsafeMutablePointer<CK_OBJECT_HANDLE>?) -> CK_RV {
    entry("C_GenerateKey", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism))") {
        let rt = try runtime()
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
        let rt = try runtime()
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

/// Wrapping, unwrapping and derivation have no mechanism yet.
private func unsupportedKeyMechanism(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?) throws -> CK_RV {
    _ = try runtime().session(hSession)
    _ = try mechanism(pMechanism)
    return CKR_MECHANISM_INVALID
}

@c @implementation
public func ks_C_WrapKey(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                         _ hWrappingKey: CK_OBJECT_HANDLE, _ hKey: CK_OBJECT_HANDLE,
                         _ pWrappedKey: UnsafeMutablePointer<CK_BYTE>?,
                         _ pulWrappedKeyLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_WrapKey", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism))") {
        _ = try runtime().session(hSession)
        guard pulWrappedKeyLen != nil else { throw PKCS11Error.argumentsBad }
        return try unsupportedKeyMechanism(hSession, pMechanism)
    }
}

@c @implementation
public func ks_C_UnwrapKey(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                           _ hUnwrappingKey: CK_OBJECT_HANDLE, _ pWrappedKey: UnsafeMutablePointer<CK_BYTE>?,
                           _ ulWrappedKeyLen: CK_ULONG, _ pTemplate: UnsafeMutablePointer<CK_ATTRIBUTE>?,
                           _ ulAttributeCount: CK_ULONG, _ phKey: UnsafeMutablePointer<CK_OBJECT_HANDLE>?) -> CK_RV {
    entry("C_UnwrapKey", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism))") {
        _ = try runtime().session(hSession)
        guard phKey != nil else { throw PKCS11Error.argumentsBad }
        return try unsupportedKeyMechanism(hSession, pMechanism)
    }
}

@c @implementation
public func ks_C_DeriveKey(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                           _ hBaseKey: CK_OBJECT_HANDLE, _ pTemplate: UnsafeMutablePointer<CK_ATTRIBUTE>?,
                           _ ulAttributeCount: CK_ULONG, _ phKey: UnsafeMutablePointer<CK_OBJECT_HANDLE>?) -> CK_RV {
    entry("C_DeriveKey", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism))") {
        return try unsupportedKeyMechanism(hSession, pMechanism)
    }
}
