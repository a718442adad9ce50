import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 3.0 §5.13: signing and MACing. Session first (§5.1.7); every
// call after Init ends the operation on any outcome but CKR_BUFFER_TOO_SMALL
// or a successful length query (`operationCall`, Session.swift).

@c @implementation
public func ks_C_SignInit(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                          _ hKey: CK_OBJECT_HANDLE) -> CK_RV {
    entry("C_SignInit", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism)) hKey=\(hKey)") {
        try operationInit(hSession, .sign, pMechanism) { rt, s, m, type in
            try rt.signInit(session: s, mechanism: m, key: hKey, allowing: type)
        }
    }
}

@c @implementation
public func ks_C_Sign(_ hSession: CK_SESSION_HANDLE, _ pData: UnsafeMutablePointer<CK_BYTE>?, _ ulDataLen: CK_ULONG,
                      _ pSignature: UnsafeMutablePointer<CK_BYTE>?, _ pulSignatureLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_Sign", "hSession=\(hSession) len=\(ulDataLen) out=\(pSignature == nil ? "NULL" : "buf")") {
        try operationCall(hSession, [.sign]) { rt in
            let r = try rt.sign(session: hSession, data: try input(pData, ulDataLen),
                                capacity: try capacity(pSignature, pulSignatureLen))
            return deliver(r, pSignature, pulSignatureLen)
        }
    }
}

@c @implementation
public func ks_C_SignUpdate(_ hSession: CK_SESSION_HANDLE, _ pPart: UnsafeMutablePointer<CK_BYTE>?,
                            _ ulPartLen: CK_ULONG) -> CK_RV {
    entry("C_SignUpdate", "hSession=\(hSession) len=\(ulPartLen)") {
        try operationCall(hSession, [.sign]) { rt in
            try rt.signUpdate(session: hSession, part: try input(pPart, ulPartLen))
            return CKR_OK
        }
    }
}

@c @implementation
public func ks_C_SignFinal(_ hSession: CK_SESSION_HANDLE, _ pSignature: UnsafeMutablePointer<CK_BYTE>?,
                           _ pulSignatureLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_SignFinal", "hSession=\(hSession) out=\(pSignature == nil ? "NULL" : "buf")") {
        try operationCall(hSession, [.sign]) { rt in
            let r = try rt.signFinal(session: hSession, capacity: try capacity(pSignature, pulSignatureLen))
            return deliver(r, pSignature, pulSignatureLen)
        }
    }
}

/// RSA with message recovery (CKM_RSA_PKCS, CKM_RSA_X_509; SignRecover.swift).
@c @implementation
public func ks_C_SignRecoverInit(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                                 _ hKey: CK_OBJECT_HANDLE) -> CK_RV {
    entry("C_SignRecoverInit", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism)) hKey=\(hKey)") {
        try operationInit(hSession, .signRecover, pMechanism) { rt, s, m, type in
            try rt.signRecoverInit(session: s, mechanism: m, key: hKey, allowing: type)
        }
    }
}

@c @implementation
public func ks_C_SignRecover(_ hSession: CK_SESSION_HANDLE, _ pData: UnsafeMutablePointer<CK_BYTE>?, _ ulDataLen: CK_ULONG,
                             _ pSignature: UnsafeMutablePointer<CK_BYTE>?,
                             _ pulSignatureLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_SignRecover", "hSession=\(hSession) len=\(ulDataLen) out=\(pSignature == nil ? "NULL" : "buf")") {
        try operationCall(hSession, [.signRecover]) { rt in
            let r = try rt.signRecover(session: hSession, data: try input(pData, ulDataLen),
                                       capacity: try capacity(pSignature, pulSignatureLen))
            return deliver(r, pSignature, pulSignatureLen)
        }
    }
}
