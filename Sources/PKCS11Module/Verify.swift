import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 3.0 §5.15: verifying signatures and MACs. Session first
// (§5.1.7); C_Verify and C_VerifyFinal always end the operation, and any
// error of C_VerifyUpdate does (`operationCall`, Session.swift).

@c @implementation
public func ks_C_VerifyInit(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                            _ hKey: CK_OBJECT_HANDLE) -> CK_RV {
    entry("C_VerifyInit", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism)) hKey=\(hKey)") {
        try operationInit(hSession, .verify, pMechanism) { rt, s, m, type in
            try rt.verifyInit(session: s, mechanism: m, key: hKey, allowing: type)
        }
    }
}

@c @implementation
public func ks_C_Verify(_ hSession: CK_SESSION_HANDLE, _ pData: UnsafeMutablePointer<CK_BYTE>?, _ ulDataLen: CK_ULONG,
                        _ pSignature: UnsafeMutablePointer<CK_BYTE>?, _ ulSignatureLen: CK_ULONG) -> CK_RV {
    entry("C_Verify", "hSession=\(hSession) len=\(ulDataLen) sigLen=\(ulSignatureLen)") {
        try operationCall(hSession, [.verify]) { rt in
            try rt.verify(session: hSession, data: try input(pData, ulDataLen),
                          signature: try input(pSignature, ulSignatureLen))
            return CKR_OK
        }
    }
}

@c @implementation
public func ks_C_VerifyUpdate(_ hSession: CK_SESSION_HANDLE, _ pPart: UnsafeMutablePointer<CK_BYTE>?,
                              _ ulPartLen: CK_ULONG) -> CK_RV {
    entry("C_VerifyUpdate", "hSession=\(hSession) len=\(ulPartLen)") {
        try operationCall(hSession, [.verify]) { rt in
            try rt.verifyUpdate(session: hSession, part: try input(pPart, ulPartLen))
            return CKR_OK
        }
    }
}

@c @implementation
public func ks_C_VerifyFinal(_ hSession: CK_SESSION_HANDLE, _ pSignature: UnsafeMutablePointer<CK_BYTE>?,
                             _ ulSignatureLen: CK_ULONG) -> CK_RV {
    entry("C_VerifyFinal", "hSession=\(hSession) sigLen=\(ulSignatureLen)") {
        try operationCall(hSession, [.verify]) { rt in
            try rt.verifyFinal(session: hSession, signature: try input(pSignature, ulSignatureLen))
            return CKR_OK
        }
    }
}

/// RSA with message recovery (CKM_RSA_PKCS, CKM_RSA_X_509; SignRecover.swift).
@c @implementation
public func ks_C_VerifyRecoverInit(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                                   _ hKey: CK_OBJECT_HANDLE) -> CK_RV {
    entry("C_VerifyRecoverInit", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism)) hKey=\(hKey)") {
        try operationInit(hSession, .verifyRecover, pMechanism) { rt, s, m, type in
            try rt.verifyRecoverInit(session: s, mechanism: m, key: hKey, allowing: type)
        }
    }
}

@c @implementation
public func ks_C_VerifyRecover(_ hSession: CK_SESSION_HANDLE, _ pSignature: UnsafeMutablePointer<CK_BYTE>?,
                               _ ulSignatureLen: CK_ULONG, _ pData: UnsafeMutablePointer<CK_BYTE>?,
                               _ pulDataLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_VerifyRecover", "hSession=\(hSession) len=\(ulSignatureLen) out=\(pData == nil ? "NULL" : "buf")") {
        try operationCall(hSession, [.verifyRecover]) { rt in
            let r = try rt.verifyRecover(session: hSession, signature: try input(pSignature, ulSignatureLen),
                                         capacity: try capacity(pData, pulDataLen))
            return deliver(r, pData, pulDataLen)
        }
    }
}
