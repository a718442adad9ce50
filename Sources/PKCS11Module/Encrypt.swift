import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 §5.8: encryption.

@c @implementation
public func ks_C_EncryptInit(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                             _ hKey: CK_OBJECT_HANDLE) -> CK_RV {
    entry("C_EncryptInit", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism)) hKey=\(hKey)") {
        let rt = try runtime()
        try rt.encryptInit(session: hSession, mechanism: try mechanism(pMechanism), key: hKey)
        return CKR_OK
    }
}

@c @implementation
public func ks_C_Encrypt(_ hSession: CK_SESSION_HANDLE, _ pData: UnsafeMutablePointer<CK_BYTE>?, _ ulDataLen: CK_ULONG,
                         _ pEncryptedData: UnsafeMutablePointer<CK_BYTE>?,
                         _ pulEncryptedDataLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_Encrypt", "hSession=\(hSession) len=\(ulDataLen)") {
        let rt = try runtime()
        let r = try rt.encrypt(session: hSession, data: try input(pData, ulDataLen),
                               capacity: try capacity(pEncryptedData, pulEncryptedDataLen))
        return deliver(r, pEncryptedData, pulEncryptedDataLen)
    }
}

@c @implementation
public func ks_C_EncryptUpdate(_ hSession: CK_SESSION_HANDLE, _ pPart: UnsafeMutablePointer<CK_BYTE>?, _ ulPartLen: CK_ULONG,
                               _ pEncryptedPart: UnsafeMutablePointer<CK_BYTE>?,
                               _ pulEncryptedPartLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_EncryptUpdate", "hSession=\(hSession) len=\(ulPartLen)") {
        let rt = try runtime()
        let r = try rt.encryptUpdate(session: hSession, part: try input(pPart, ulPartLen),
                                     capacity: try capacity(pEncryptedPart, pulEncryptedPartLen))
        return deliver(r, pEncryptedPart, pulEncryptedPartLen)
    }
}

@c @implementation
public func ks_C_EncryptFinal(_ hSession: CK_SESSION_HANDLE, _ pLastEncryptedPart: UnsafeMutablePointer<CK_BYTE>?,
                              _ pulLastEncryptedPartLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_EncryptFinal", "hSession=\(hSession)") {
        let rt = try runtime()
        let r = try rt.encryptFinal(session: hSession, capacity: try capacity(pLastEncryptedPart, pulLastEncryptedPartLen))
        return deliver(r, pLastEncryptedPart, pulLastEncryptedPartLen)
    }
}
