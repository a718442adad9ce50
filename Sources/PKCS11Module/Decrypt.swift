import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 3.0 §5.10: decryption. Session first (§5.1.7); every call after
// Init ends the operation on any outcome but CKR_BUFFER_TOO_SMALL or a
// successful length query (`operationCall`, Session.swift).

@c @implementation
public func ks_C_DecryptInit(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                             _ hKey: CK_OBJECT_HANDLE) -> CK_RV {
    entry("C_DecryptInit", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism)) hKey=\(hKey)") {
        try operationInit(hSession, .decrypt, pMechanism) { rt, s, m, type in
            try rt.decryptInit(session: s, mechanism: m, key: hKey, allowing: type)
        }
    }
}

@c @implementation
public func ks_C_Decrypt(_ hSession: CK_SESSION_HANDLE, _ pEncryptedData: UnsafeMutablePointer<CK_BYTE>?,
                         _ ulEncryptedDataLen: CK_ULONG, _ pData: UnsafeMutablePointer<CK_BYTE>?,
                         _ pulDataLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_Decrypt", "hSession=\(hSession) len=\(ulEncryptedDataLen)") {
        try operationCall(hSession, [.decrypt]) { rt, s in
            // Straight between the caller's buffers when the mechanism can (Encrypt.swift, DirectCipherOperation).
            let cap = try capacity(pData, pulDataLen)
            if let r = try rt.cipherDirect(.decrypt, session: s, input: try rawInput(pEncryptedData, ulEncryptedDataLen),
                                           output: pData, capacity: cap) {
                return deliverDirect(r, pulDataLen)
            }
            let r = try rt.decrypt(session: hSession, data: try input(pEncryptedData, ulEncryptedDataLen), capacity: cap)
            return deliver(r, pData, pulDataLen)
        }
    }
}

@c @implementation
public func ks_C_DecryptUpdate(_ hSession: CK_SESSION_HANDLE, _ pEncryptedPart: UnsafeMutablePointer<CK_BYTE>?,
                               _ ulEncryptedPartLen: CK_ULONG, _ pPart: UnsafeMutablePointer<CK_BYTE>?,
                               _ pulPartLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_DecryptUpdate", "hSession=\(hSession) len=\(ulEncryptedPartLen)") {
        try operationCall(hSession, [.decrypt]) { rt, s in
            let cap = try capacity(pPart, pulPartLen)
            if let r = try rt.cipherUpdateDirect(.decrypt, session: s, input: try rawInput(pEncryptedPart, ulEncryptedPartLen),
                                                 output: pPart, capacity: cap) {
                return deliverDirect(r, pulPartLen)
            }
            let r = try rt.decryptUpdate(session: hSession, part: try input(pEncryptedPart, ulEncryptedPartLen), capacity: cap)
            return deliver(r, pPart, pulPartLen)
        }
    }
}

@c @implementation
public func ks_C_DecryptFinal(_ hSession: CK_SESSION_HANDLE, _ pLastPart: UnsafeMutablePointer<CK_BYTE>?,
                              _ pulLastPartLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_DecryptFinal", "hSession=\(hSession)") {
        try operationCall(hSession, [.decrypt]) { rt in
            let r = try rt.decryptFinal(session: hSession, capacity: try capacity(pLastPart, pulLastPartLen))
            return deliver(r, pLastPart, pulLastPartLen)
        }
    }
}
