import CPKCS11

// C_SessionCancel (PKCS #11 3.0 §5.6.5): "terminates active session based
// operations". `flags` is an OR of CK_MECHANISM_INFO flags; "If no flags are
// set, the session state will not be modified and CKR_OK will be returned",
// and "If a flag is set for an operation that has not been initialized in
// the session, the operation flag will be ignored" — so a flag that names no
// operation kind (CKF_GENERATE, CKF_HW, an undefined bit) is ignored too:
// the function's return values list no CKR_ARGUMENTS_BAD, and Kryoptic
// ignores such bits. Every operation here can be cancelled, so
// CKR_OPERATION_CANCEL_FAILED is never returned. Cancelling one half of a
// dual-function pair leaves the other active, as the spec prefers.
// OpenSSL 3's pkcs11-provider calls it to abandon an operation it will not
// finish.

extension OperationKind {
    /// The CK_MECHANISM_INFO flag that names this kind of operation to
    /// C_SessionCancel (and tags it in a saved operation state).
    var cancelFlag: CK_FLAGS {
        switch self {
        case .find: CKF_FIND_OBJECTS
        case .encrypt: CKF_ENCRYPT
        case .decrypt: CKF_DECRYPT
        case .digest: CKF_DIGEST
        case .sign: CKF_SIGN
        case .verify: CKF_VERIFY
        case .signRecover: CKF_SIGN_RECOVER
        case .verifyRecover: CKF_VERIFY_RECOVER
        // Message-based processes (MessageCrypto.swift), with any message in progress.
        case .messageEncrypt: CKF_MESSAGE_ENCRYPT
        case .messageDecrypt: CKF_MESSAGE_DECRYPT
        }
    }
}

extension Runtime {
    public func sessionCancel(session h: CK_SESSION_HANDLE, flags: CK_FLAGS) throws {
        let s = try session(h)
        s.endOperations(OperationKind.allCases.filter { flags & $0.cancelFlag != 0 })
    }
}
