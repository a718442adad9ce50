import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 3.2's signature-first verify, session validation flags and authenticated
// wrapping (issue 18). Reached only through the 3.2 function list (function_table.c): a host
// that asks for 3.0 or 2.40 sees the tables it saw before. Session first (§5.1.7), then the
// arguments in the order of the function's parameters.

@c @implementation
public func ks_C_VerifySignatureInit(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                                     _ hKey: CK_OBJECT_HANDLE, _ pSignature: UnsafeMutablePointer<CK_BYTE>?,
                                     _ ulSignatureLen: CK_ULONG) -> CK_RV {
    entry("C_VerifySignatureInit",
          "hSession=\(hSession) mechanism=\(mechanismName(pMechanism)) hKey=\(hKey) sigLen=\(ulSignatureLen)") {
        try operationInit(hSession, .verify, pMechanism) { rt, s, m, type in
            try rt.verifySignatureInit(session: s, mechanism: m, key: hKey, allowing: type,
                                       signature: try input(pSignature, ulSignatureLen))
        }
    }
}

@c @implementation
public func ks_C_VerifySignature(_ hSession: CK_SESSION_HANDLE, _ pData: UnsafeMutablePointer<CK_BYTE>?,
                                 _ ulDataLen: CK_ULONG) -> CK_RV {
    entry("C_VerifySignature", "hSession=\(hSession) len=\(ulDataLen)") {
        try operationCall(hSession, [.verify]) { rt in
            try rt.verifySignature(session: hSession, data: try input(pData, ulDataLen))
            return CKR_OK
        }
    }
}

@c @implementation
public func ks_C_VerifySignatureUpdate(_ hSession: CK_SESSION_HANDLE, _ pPart: UnsafeMutablePointer<CK_BYTE>?,
                                       _ ulPartLen: CK_ULONG) -> CK_RV {
    entry("C_VerifySignatureUpdate", "hSession=\(hSession) len=\(ulPartLen)") {
        try operationCall(hSession, [.verify]) { rt in
            try rt.verifySignatureUpdate(session: hSession, part: try input(pPart, ulPartLen))
            return CKR_OK
        }
    }
}

@c @implementation
public func ks_C_VerifySignatureFinal(_ hSession: CK_SESSION_HANDLE) -> CK_RV {
    entry("C_VerifySignatureFinal", "hSession=\(hSession)") {
        try operationCall(hSession, [.verify]) { rt in
            try rt.verifySignatureFinal(session: hSession)
            return CKR_OK
        }
    }
}

@c @implementation
public func ks_C_GetSessionValidationFlags(_ hSession: CK_SESSION_HANDLE, _ type: CK_SESSION_VALIDATION_FLAGS_TYPE,
                                           _ pFlags: UnsafeMutablePointer<CK_FLAGS>?) -> CK_RV {
    entry("C_GetSessionValidationFlags", "hSession=\(hSession) type=\(type)") {
        let rt = try runtime(session: hSession)
        guard let pFlags else { throw PKCS11Error.argumentsBad }
        pFlags.pointee = try rt.sessionValidationFlags(session: hSession, type: type)
        return CKR_OK
    }
}

@c @implementation
public func ks_C_WrapKeyAuthenticated(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                                      _ hWrappingKey: CK_OBJECT_HANDLE, _ hKey: CK_OBJECT_HANDLE,
                                      _ pAssociatedData: UnsafeMutablePointer<CK_BYTE>?, _ ulAssociatedDataLen: CK_ULONG,
                                      _ pWrappedKey: UnsafeMutablePointer<CK_BYTE>?,
                                      _ pulWrappedKeyLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_WrapKeyAuthenticated",
          "hSession=\(hSession) mechanism=\(mechanismName(pMechanism)) hWrappingKey=\(hWrappingKey) hKey=\(hKey) adLen=\(ulAssociatedDataLen)") {
        let rt = try runtime(session: hSession)
        let m = try mechanism(pMechanism)
        if let type = pMechanism?.pointee.mechanism {
            try rt.checkAllowedMechanism(session: hSession, key: hWrappingKey, mechanism: type)
        }
        let r = try rt.wrapKeyAuthenticated(session: hSession, mechanism: m, wrappingKey: hWrappingKey, key: hKey,
                                            associatedData: try input(pAssociatedData, ulAssociatedDataLen),
                                            capacity: try capacity(pWrappedKey, pulWrappedKeyLen))
        return deliver(r, pWrappedKey, pulWrappedKeyLen)
    }
}

@c @implementation
public func ks_C_UnwrapKeyAuthenticated(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                                        _ hUnwrappingKey: CK_OBJECT_HANDLE, _ pWrappedKey: UnsafeMutablePointer<CK_BYTE>?,
                                        _ ulWrappedKeyLen: CK_ULONG, _ pTemplate: UnsafeMutablePointer<CK_ATTRIBUTE>?,
                                        _ ulAttributeCount: CK_ULONG, _ pAssociatedData: UnsafeMutablePointer<CK_BYTE>?,
                                        _ ulAssociatedDataLen: CK_ULONG,
                                        _ phKey: UnsafeMutablePointer<CK_OBJECT_HANDLE>?) -> CK_RV {
    entry("C_UnwrapKeyAuthenticated",
          "hSession=\(hSession) mechanism=\(mechanismName(pMechanism)) hUnwrappingKey=\(hUnwrappingKey) adLen=\(ulAssociatedDataLen)") {
        let rt = try runtime(session: hSession)
        guard let phKey else { throw PKCS11Error.argumentsBad }
        let m = try mechanism(pMechanism)
        if let type = pMechanism?.pointee.mechanism {
            try rt.checkAllowedMechanism(session: hSession, key: hUnwrappingKey, mechanism: type)
        }
        phKey.pointee = try rt.unwrapKeyAuthenticated(
            session: hSession, mechanism: m, unwrappingKey: hUnwrappingKey,
            wrapped: try required(pWrappedKey, ulWrappedKeyLen), template: try template(pTemplate, ulAttributeCount),
            associatedData: try input(pAssociatedData, ulAssociatedDataLen))
        return CKR_OK
    }
}
