import CPKCS11

// PKCS #11 3.2 C_VerifySignatureInit / C_VerifySignature / C_VerifySignatureUpdate /
// C_VerifySignatureFinal: a verification whose signature is given at the start, so the
// result is known at the last call without a second buffer (the pattern a streaming
// verifier needs, and what ML-DSA's "external mu" hosts use).
//
// It is the verification operation of the session (OperationKind.verify), as in Kryoptic,
// which checks the same slot: C_VerifyInit and C_VerifySignatureInit exclude each other
// (CKR_OPERATION_ACTIVE), C_SessionCancel(CKF_VERIFY) ends either, and a call of the
// other family (C_Verify on a signature-first operation, C_VerifySignature on a C_VerifyInit
// one) is CKR_OPERATION_NOT_INITIALIZED and, like every error, ends the operation.
// The mechanism and key checks are C_VerifyInit's own (`verifyOperation`), so every verify
// mechanism the module has, and each one added later (ML-DSA), serves both; the §5.2 rules
// are the same `step` phases C_Verify uses: C_VerifySignature only before any update, and
// C_VerifySignature / C_VerifySignatureFinal always end the operation.

/// A verification fed the signature at its start.
final class SignatureFirstVerifyOperation: Operation {
    let inner: any VerifyOperation
    let signature: [UInt8]

    init(_ inner: any VerifyOperation, signature: [UInt8]) {
        self.inner = inner
        self.signature = signature
    }
}

extension Runtime {
    /// `signature` nil: a NULL pointer with a non-zero length (CKR_ARGUMENTS_BAD, nothing started).
    public func verifySignatureInit(session h: CK_SESSION_HANDLE, mechanism: Mechanism, key: CK_OBJECT_HANDLE,
                                    signature: [UInt8]?) throws {
        try verifySignatureInit(session: try session(h), mechanism: mechanism, key: key, signature: signature)
    }

    /// `type`: the caller's mechanism number, checked against the key's CKA_ALLOWED_MECHANISMS
    /// where the key is resolved (as C_VerifyInit's).
    public func verifySignatureInit(session s: Session, mechanism: Mechanism, key: CK_OBJECT_HANDLE,
                                    allowing type: CK_MECHANISM_TYPE? = nil, signature: [UInt8]?) throws {
        guard !s.isActive(.verify) else { throw PKCS11Error.operationActive }
        // The key's errors first (hKey comes before pSignature), then the signature pointer's.
        let inner = try verifyOperation(s, mechanism: mechanism, key: key, allowing: type)
        guard let signature else { throw PKCS11Error.argumentsBad }
        try s.begin(.verify, SignatureFirstVerifyOperation(inner, signature: signature))
    }

    public func verifySignature(session h: CK_SESSION_HANDLE, data: [UInt8]?) throws {
        try session(h).step(.verify, as: SignatureFirstVerifyOperation.self, phase: .single) { op, _ in
            guard let data else { throw PKCS11Error.argumentsBad }
            try op.inner.update(data)
            try op.inner.finish(signature: op.signature)
        }
    }

    public func verifySignatureUpdate(session h: CK_SESSION_HANDLE, part: [UInt8]?) throws {
        try session(h).step(.verify, as: SignatureFirstVerifyOperation.self, phase: .update) { op, keep in
            guard let part else { throw PKCS11Error.argumentsBad }
            try op.inner.update(part)
            keep = true
        }
    }

    public func verifySignatureFinal(session h: CK_SESSION_HANDLE) throws {
        try session(h).step(.verify, as: SignatureFirstVerifyOperation.self, phase: .final) { op, _ in
            try op.inner.finish(signature: op.signature)
        }
    }
}
