import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 §5.6: session management (and the 3.0 C_LoginUser, C_SessionCancel).

@c @implementation
public func ks_C_OpenSession(_ slotID: CK_SLOT_ID, _ flags: CK_FLAGS, _ pApplication: UnsafeMutableRawPointer?,
                             _ Notify: CK_NOTIFY?, _ phSession: UnsafeMutablePointer<CK_SESSION_HANDLE>?) -> CK_RV {
    entry("C_OpenSession", "slot=\(slotID) flags=0x\(String(flags, radix: 16))") {
        let rt = try runtime()
        guard let phSession else { throw PKCS11Error.argumentsBad }
        // Notify callbacks are accepted and never called: the module does not
        // surrender control during a call (CKN_SURRENDER is optional).
        phSession.pointee = try rt.openSession(slot: slotID, flags: flags)
        return CKR_OK
    }
}

@c @implementation
public func ks_C_CloseSession(_ hSession: CK_SESSION_HANDLE) -> CK_RV {
    entry("C_CloseSession", "hSession=\(hSession)") {
        try runtime().closeSession(hSession)
        return CKR_OK
    }
}

@c @implementation
public func ks_C_CloseAllSessions(_ slotID: CK_SLOT_ID) -> CK_RV {
    entry("C_CloseAllSessions", "slot=\(slotID)") {
        try runtime().closeAllSessions(slot: slotID)
        return CKR_OK
    }
}

@c @implementation
public func ks_C_GetSessionInfo(_ hSession: CK_SESSION_HANDLE, _ pInfo: UnsafeMutablePointer<CK_SESSION_INFO>?) -> CK_RV {
    entry("C_GetSessionInfo", "hSession=\(hSession)") {
        let rt = try runtime()
        guard let pInfo else { throw PKCS11Error.argumentsBad }
        let i = try rt.sessionInfo(hSession)
        pInfo.pointee = CK_SESSION_INFO(slotID: i.slotID, state: i.state, flags: i.flags, ulDeviceError: 0)
        return CKR_OK
    }
}

/// Operation state is never saved: it holds unlocked key material.
@c @implementation
public func ks_C_GetOperationState(_ hSession: CK_SESSION_HANDLE, _ pOperationState: UnsafeMutablePointer<CK_BYTE>?,
                                   _ pulOperationStateLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_GetOperationState", "hSession=\(hSession)") {
        _ = try runtime().session(hSession)
        guard pulOperationStateLen != nil else { throw PKCS11Error.argumentsBad }
        return CKR_STATE_UNSAVEABLE
    }
}

@c @implementation
public func ks_C_SetOperationState(_ hSession: CK_SESSION_HANDLE, _ pOperationState: UnsafeMutablePointer<CK_BYTE>?,
                                   _ ulOperationStateLen: CK_ULONG, _ hEncryptionKey: CK_OBJECT_HANDLE,
                                   _ hAuthenticationKey: CK_OBJECT_HANDLE) -> CK_RV {
    entry("C_SetOperationState", "hSession=\(hSession)") {
        _ = try runtime().session(hSession)
        return CKR_SAVED_STATE_INVALID
    }
}

@c @implementation
public func ks_C_Login(_ hSession: CK_SESSION_HANDLE, _ userType: CK_USER_TYPE,
                       _ pPin: UnsafeMutablePointer<CK_UTF8CHAR>?, _ ulPinLen: CK_ULONG) -> CK_RV {
    entry("C_Login", "hSession=\(hSession) userType=\(userType)") {
        let rt = try runtime()
        // No protected authentication path: a NULL PIN is a bad argument.
        try rt.login(session: hSession, userType: userType, pin: try required(pPin, ulPinLen))
        return CKR_OK
    }
}

@c @implementation
public func ks_C_LoginUser(_ hSession: CK_SESSION_HANDLE, _ userType: CK_USER_TYPE,
                           _ pPin: UnsafeMutablePointer<CK_UTF8CHAR>?, _ ulPinLen: CK_ULONG,
                           _ pUsername: UnsafeMutablePointer<CK_UTF8CHAR>?, _ ulUsernameLen: CK_ULONG) -> CK_RV {
    entry("C_LoginUser", "hSession=\(hSession) userType=\(userType)") {
        let rt = try runtime()
        // Tokens have one user: a user name is accepted and has no effect.
        _ = try input(pUsername, ulUsernameLen)
        try rt.login(session: hSession, userType: userType, pin: try required(pPin, ulPinLen))
        return CKR_OK
    }
}

@c @implementation
public func ks_C_Logout(_ hSession: CK_SESSION_HANDLE) -> CK_RV {
    entry("C_Logout", "hSession=\(hSession)") {
        try runtime().logout(session: hSession)
        return CKR_OK
    }
}

/// Message-based operations are not supported, so there is never one to cancel.
@c @implementation
public func ks_C_SessionCancel(_ hSession: CK_SESSION_HANDLE, _ flags: CK_FLAGS) -> CK_RV {
    entry("C_SessionCancel", "hSession=\(hSession) flags=0x\(String(flags, radix: 16))") {
        _ = try runtime().session(hSession)
        return CKR_FUNCTION_NOT_SUPPORTED
    }
}
