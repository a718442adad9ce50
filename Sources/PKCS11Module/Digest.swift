import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 3.0 §5.12: message digesting. Session first (§5.1.7); every call
// after Init ends the operation on any outcome but CKR_BUFFER_TOO_SMALL or a
// successful length query (`operationCall`, Session.swift).

@c @implementation
public func ks_C_DigestInit(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?) -> CK_RV {
    entry("C_DigestInit", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism))") {
        try operationInit(hSession, .digest, pMechanism) { rt, m in
            try rt.digestInit(session: hSession, mechanism: m)
        }
    }
}

@c @implementation
public func ks_C_Digest(_ hSession: CK_SESSION_HANDLE, _ pData: UnsafeMutablePointer<CK_BYTE>?, _ ulDataLen: CK_ULONG,
                        _ pDigest: UnsafeMutablePointer<CK_BYTE>?, _ pulDigestLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_Digest", "hSession=\(hSession) len=\(ulDataLen)") {
        try operationCall(hSession, [.digest]) { rt in
            let r = try rt.digest(session: hSession, data: try input(pData, ulDataLen),
                                  capacity: try capacity(pDigest, pulDigestLen))
            return deliver(r, pDigest, pulDigestLen)
        }
    }
}

@c @implementation
public func ks_C_DigestUpdate(_ hSession: CK_SESSION_HANDLE, _ pPart: UnsafeMutablePointer<CK_BYTE>?,
                              _ ulPartLen: CK_ULONG) -> CK_RV {
    entry("C_DigestUpdate", "hSession=\(hSession) len=\(ulPartLen)") {
        try operationCall(hSession, [.digest]) { rt in
            try rt.digestUpdate(session: hSession, part: try input(pPart, ulPartLen))
            return CKR_OK
        }
    }
}

@c @implementation
public func ks_C_DigestKey(_ hSession: CK_SESSION_HANDLE, _ hKey: CK_OBJECT_HANDLE) -> CK_RV {
    entry("C_DigestKey", "hSession=\(hSession) hKey=\(hKey)") {
        try operationCall(hSession, [.digest]) { rt in
            try rt.digestKey(session: hSession, key: hKey)
            return CKR_OK
        }
    }
}

@c @implementation
public func ks_C_DigestFinal(_ hSession: CK_SESSION_HANDLE, _ pDigest: UnsafeMutablePointer<CK_BYTE>?,
                             _ pulDigestLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_DigestFinal", "hSession=\(hSession)") {
        try operationCall(hSession, [.digest]) { rt in
            let r = try rt.digestFinal(session: hSession, capacity: try capacity(pDigest, pulDigestLen))
            return deliver(r, pDigest, pulDigestLen)
        }
    }
}
