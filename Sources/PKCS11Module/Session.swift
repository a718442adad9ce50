import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 §5.6: session management (and the 3.0 C_LoginUser, C_SessionCancel).

@c @implementation
public func ks_C_OpenSession(_ slotID: CK_SLOT_ID, _ flags: CK_FLAGS, _ pApplication: UnsafeMutableRawPointer?,
                             _ Notify: CK_NOTIFY?, _ phSession: UnsafeMutablePointer<CK_SESSION_HANDLE>?) -> CK_RV {
    entry("C_OpenSession", "slot=\(slotID) flags=0x\(String(flags, radix: 16))") {
        // Where no store exists yet, a call on the free slot creates it (General.swift).
        let rt = slotID == freeSlotID ? try Module.current.runtimeCreatingStore() : try runtime()
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
        let rt = try runtime(session: hSession)
        guard let pInfo else { throw PKCS11Error.argumentsBad }
        let i = try rt.sessionInfo(hSession)
        pInfo.pointee = CK_SESSION_INFO(slotID: i.slotID, state: i.state, flags: i.flags, ulDeviceError: 0)
        return CKR_OK
    }
}

/// PKCS #11 3.0 §5.6: saved states of digests, HMACs and hashed multi-part
/// signatures (Sources/PKCS11/OperationState.swift); the output convention
/// of §5.2 (NULL buffer: the length; short buffer: CKR_BUFFER_TOO_SMALL).
/// Neither call ends an active operation when it fails.
/// A NULL pOperationState is CKR_ARGUMENTS_BAD whatever its length, as a NULL
/// argument is everywhere else in the module (§5.6.x lists it, and
/// pkcs11test's NULL-state check expects it), not CKR_SAVED_STATE_INVALID.
@c @implementation
public func ks_C_GetOperationState(_ hSession: CK_SESSION_HANDLE, _ pOperationState: UnsafeMutablePointer<CK_BYTE>?,
                                   _ pulOperationStateLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_GetOperationState", "hSession=\(hSession)") {
        let rt = try runtime(session: hSession)
        let r = try rt.getOperationState(session: hSession,
                                         capacity: try capacity(pOperationState, pulOperationStateLen))
        return deliver(r, pOperationState, pulOperationStateLen)
    }
}

@c @implementation
public func ks_C_SetOperationState(_ hSession: CK_SESSION_HANDLE, _ pOperationState: UnsafeMutablePointer<CK_BYTE>?,
                                   _ ulOperationStateLen: CK_ULONG, _ hEncryptionKey: CK_OBJECT_HANDLE,
                                   _ hAuthenticationKey: CK_OBJECT_HANDLE) -> CK_RV {
    entry("C_SetOperationState", "hSession=\(hSession) len=\(ulOperationStateLen)") {
        let rt = try runtime(session: hSession)
        guard let pOperationState else { throw PKCS11Error.argumentsBad }
        try rt.setOperationState(session: hSession, state: try required(pOperationState, ulOperationStateLen),
                                 encryptionKey: hEncryptionKey, authenticationKey: hAuthenticationKey)
        return CKR_OK
    }
}

/// The PIN of C_Login / C_LoginUser. PKCS #11 3.0 §5.6.8: a NULL pPin
/// means "use the protected authentication path": nil here, and the runtime
/// asks the agent's prompt where the token shows
/// CKF_PROTECTED_AUTHENTICATION_PATH (an agent client with a display or a
/// terminal, docs/agent.md "The agent's prompt"), whatever ulPinLen says;
/// elsewhere (the in-process module, external tokens) a NULL pPin is
/// CKR_ARGUMENTS_BAD, refused before the token sees it: not a failed login,
/// not counted towards the PIN lockout.
func loginPIN(_ pPin: UnsafeMutablePointer<CK_UTF8CHAR>?, _ ulPinLen: CK_ULONG) throws -> [UInt8]? {
    guard pPin != nil else { return nil }
    return try required(pPin, ulPinLen)
}

@c @implementation
public func ks_C_Login(_ hSession: CK_SESSION_HANDLE, _ userType: CK_USER_TYPE,
                       _ pPin: UnsafeMutablePointer<CK_UTF8CHAR>?, _ ulPinLen: CK_ULONG) -> CK_RV {
    entry("C_Login", "hSession=\(hSession) userType=\(userType)") {
        let rt = try runtime(session: hSession)
        try rt.login(session: hSession, userType: userType, pin: try loginPIN(pPin, ulPinLen))
        return CKR_OK
    }
}

@c @implementation
public func ks_C_LoginUser(_ hSession: CK_SESSION_HANDLE, _ userType: CK_USER_TYPE,
                           _ pPin: UnsafeMutablePointer<CK_UTF8CHAR>?, _ ulPinLen: CK_ULONG,
                           _ pUsername: UnsafeMutablePointer<CK_UTF8CHAR>?, _ ulUsernameLen: CK_ULONG) -> CK_RV {
    entry("C_LoginUser", "hSession=\(hSession) userType=\(userType)") {
        let rt = try runtime(session: hSession)
        // Tokens have one user: a user name is accepted and has no effect.
        _ = try input(pUsername, ulUsernameLen)
        try rt.login(session: hSession, userType: userType, pin: try loginPIN(pPin, ulPinLen))
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

/// PKCS #11 3.0 §5.6.5: ends the operations `flags` names (Sources/PKCS11/SessionCancel.swift).
@c @implementation
public func ks_C_SessionCancel(_ hSession: CK_SESSION_HANDLE, _ flags: CK_FLAGS) -> CK_RV {
    entry("C_SessionCancel", "hSession=\(hSession) flags=0x\(String(flags, radix: 16))") {
        try runtime().sessionCancel(session: hSession, flags: flags)
        return CKR_OK
    }
}

// MARK: - Argument order and operation termination, shared by the C wrappers

/// The runtime, after the session handle is checked. PKCS #11 3.0 §5.1.7:
/// the session-handle errors of §5.1.2 take precedence over those of §5.1.6
/// (CKR_ARGUMENTS_BAD, CKR_MECHANISM_INVALID, ...), so every entry point
/// that takes a session checks it before it decodes any other argument:
/// CKR_CRYPTOKI_NOT_INITIALIZED, then CKR_SESSION_HANDLE_INVALID, then the rest.
func runtime(session hSession: CK_SESSION_HANDLE) throws -> Runtime {
    let rt = try runtime()
    _ = try rt.session(hSession)
    return rt
}

/// One call of an active operation (C_Encrypt, C_SignUpdate, C_DigestFinal,
/// a dual function, ...). PKCS #11 3.0 §5.2 and §5.8 (C_Encrypt: "always
/// terminates the active encryption operation unless it returns
/// CKR_BUFFER_TOO_SMALL or is a successful call ... to determine the length";
/// C_EncryptUpdate: "an error other than CKR_BUFFER_TOO_SMALL terminates the
/// current encryption operation"): any other outcome ends the operations of
/// `kinds`, including an argument error found here before the operation is
/// reached (a NULL length pointer, a length no buffer can have).
func operationCall(_ hSession: CK_SESSION_HANDLE, _ kinds: [OperationKind],
                   _ body: (Runtime) throws -> CK_RV) throws -> CK_RV {
    let rt = try runtime()
    let s = try rt.session(hSession)
    do {
        let rv = try body(rt)
        if rv != CKR_OK, rv != CKR_BUFFER_TOO_SMALL { s.endOperations(kinds) }
        return rv
    } catch {
        s.endOperations(kinds)
        throw error
    }
}

/// `operationCall` with the session handed to the body too, for the
/// per-message cipher calls (Encrypt.swift, Decrypt.swift), which would
/// otherwise look the session up a second time.
func operationCall(_ hSession: CK_SESSION_HANDLE, _ kinds: [OperationKind],
                   _ body: (Runtime, Session) throws -> CK_RV) throws -> CK_RV {
    let rt = try runtime()
    let s = try rt.session(hSession)
    do {
        let rv = try body(rt, s)
        if rv != CKR_OK, rv != CKR_BUFFER_TOO_SMALL { s.endOperations(kinds) }
        return rv
    } catch {
        s.endOperations(kinds)
        throw error
    }
}

/// C_EncryptInit, C_DecryptInit, C_DigestInit, C_SignInit and C_VerifyInit.
/// PKCS #11 3.0 §5.8 (and §5.10, §5.12, §5.13, §5.15): "can be called with
/// pMechanism set to NULL_PTR to terminate an active ... operation". An
/// Init that fails never ends the operation already active (its error is
/// CKR_OPERATION_ACTIVE).
func operationInit(_ hSession: CK_SESSION_HANDLE, _ kind: OperationKind, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                   _ body: (Runtime, Mechanism) throws -> Void) throws -> CK_RV {
    try operationInit(hSession, kind, pMechanism) { rt, _, m, _ in try body(rt, m) }
}

/// `operationInit` with the session handed to the body too (one session
/// lookup per Init: an application may call them for every message), and
/// the caller's mechanism number, which the key-taking Inits check against
/// the key's CKA_ALLOWED_MECHANISMS where they resolve the key
/// (AllowedMechanisms.swift, `resolveKey(_:_:allowing:)`).
func operationInit(_ hSession: CK_SESSION_HANDLE, _ kind: OperationKind, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                   _ body: (Runtime, Session, Mechanism, CK_MECHANISM_TYPE) throws -> Void) throws -> CK_RV {
    let rt = try runtime()
    let s = try rt.session(hSession)
    guard let pMechanism else {
        s.endOperations([kind])
        return CKR_OK
    }
    let m = try mechanism(pMechanism)
    try body(rt, s, m, pMechanism.pointee.mechanism)
    return CKR_OK
}
