import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 3.0 §5.8: encryption. Session first (§5.1.7); every call after
// Init ends the operation on any outcome but CKR_BUFFER_TOO_SMALL or a
// successful length query (`operationCall`, Session.swift).

@c @implementation
public func ks_C_EncryptInit(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                             _ hKey: CK_OBJECT_HANDLE) -> CK_RV {
    entry("C_EncryptInit", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism)) hKey=\(hKey)") {
        try operationInit(hSession, .encrypt, pMechanism) { rt, s, m, type in
            try rt.encryptInit(session: s, mechanism: m, key: hKey, allowing: type)
        }
    }
}

@c @implementation
public func ks_C_Encrypt(_ hSession: CK_SESSION_HANDLE, _ pData: UnsafeMutablePointer<CK_BYTE>?, _ ulDataLen: CK_ULONG,
                         _ pEncryptedData: UnsafeMutablePointer<CK_BYTE>?,
                         _ pulEncryptedDataLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_Encrypt", "hSession=\(hSession) len=\(ulDataLen)") {
        try operationCall(hSession, [.encrypt]) { rt, s in
            // Straight between the caller's buffers when the mechanism can (Encrypt.swift, DirectCipherOperation).
            let cap = try capacity(pEncryptedData, pulEncryptedDataLen)
            if let r = try rt.cipherDirect(.encrypt, session: s, input: try rawInput(pData, ulDataLen),
                                           output: pEncryptedData, capacity: cap) {
                return deliverDirect(r, pulEncryptedDataLen)
            }
            let r = try rt.encrypt(session: hSession, data: try input(pData, ulDataLen), capacity: cap)
            return deliver(r, pEncryptedData, pulEncryptedDataLen)
        }
    }
}

@c @implementation
public func ks_C_EncryptUpdate(_ hSession: CK_SESSION_HANDLE, _ pPart: UnsafeMutablePointer<CK_BYTE>?, _ ulPartLen: CK_ULONG,
                               _ pEncryptedPart: UnsafeMutablePointer<CK_BYTE>?,
                               _ pulEncryptedPartLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_EncryptUpdate", "hSession=\(hSession) len=\(ulPartLen)") {
        try operationCall(hSession, [.encrypt]) { rt, s in
            let cap = try capacity(pEncryptedPart, pulEncryptedPartLen)
            if let r = try rt.cipherUpdateDirect(.encrypt, session: s, input: try rawInput(pPart, ulPartLen),
                                                 output: pEncryptedPart, capacity: cap) {
                return deliverDirect(r, pulEncryptedPartLen)
            }
            let r = try rt.encryptUpdate(session: hSession, part: try input(pPart, ulPartLen), capacity: cap)
            return deliver(r, pEncryptedPart, pulEncryptedPartLen)
        }
    }
}

@c @implementation
public func ks_C_EncryptFinal(_ hSession: CK_SESSION_HANDLE, _ pLastEncryptedPart: UnsafeMutablePointer<CK_BYTE>?,
                              _ pulLastEncryptedPartLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_EncryptFinal", "hSession=\(hSession)") {
        try operationCall(hSession, [.encrypt]) { rt in
            let r = try rt.encryptFinal(session: hSession, capacity: try capacity(pLastEncryptedPart, pulLastEncryptedPartLen))
            return deliver(r, pLastEncryptedPart, pulLastEncryptedPartLen)
        }
    }
}
