import CPKCS11
import KeyshareCrypto

// PKCS #11 3.0 §5.13 C_SignRecoverInit / C_SignRecover and §5.15
// C_VerifyRecoverInit / C_VerifyRecover, with the two mechanisms that
// recover data (Current Mechanisms §2.1.6, §2.1.8):
//
// - CKM_RSA_PKCS: the data (at most k-11 bytes) in a PKCS #1 v1.5 type-1
//   block; verify-recover returns the data.
// - CKM_RSA_X_509: raw RSA on a block of at most k bytes (left-padded with
//   zeros); verify-recover returns the whole k-byte block.
//
// Both are single-part (the spec gives them no Update/Final). The key must
// carry CKA_SIGN_RECOVER / CKA_VERIFY_RECOVER, which keyshare sets false by
// default on every key it makes (a caller asks for them in the template, or
// sets them later): a key certified for signing is not thereby a key that
// signs arbitrary k-11-byte blocks for a recovering verifier.

/// One recovery operation: signing (privateKey set) or verifying (publicKey set).
final class RecoverOperation: Operation {
    let algorithm: SignatureAlgorithm
    let privateKey: PrivateKey?
    let publicKey: PublicKey?
    let modulusBytes: Int

    init(_ m: Mechanism, bits: Int, privateKey: PrivateKey?, publicKey: PublicKey?) throws {
        switch m {
        case .rsaPKCS: algorithm = .rsaPKCS1(nil)
        case .rsaX509: algorithm = .rsaRaw
        default: throw PKCS11Error.mechanismInvalid
        }
        self.privateKey = privateKey
        self.publicKey = publicKey
        modulusBytes = (bits + 7) / 8
    }

    /// C_SignRecover's input limit: k-11 for PKCS #1, k for raw RSA.
    var maxData: Int {
        if case .rsaRaw = algorithm { return modulusBytes }
        return modulusBytes - 11
    }

    func sign(_ data: [UInt8]) throws -> [UInt8] {
        guard let privateKey else { throw PKCS11Error.generalError }
        guard data.count <= maxData else { throw PKCS11Error.dataLenRange }
        do {
            return try privateKey.sign(digest: data, algorithm: algorithm)
        } catch {
            // Raw RSA of a block not below the modulus is the only input left to fail.
            throw PKCS11Error(CKR_DATA_INVALID)
        }
    }

    func recover(_ signature: [UInt8]) throws -> [UInt8] {
        guard let publicKey else { throw PKCS11Error.generalError }
        guard signature.count == modulusBytes else { throw PKCS11Error.signatureLenRange }
        do {
            return try publicKey.recover(signature: signature, algorithm: algorithm)
        } catch {
            throw PKCS11Error.signatureInvalid
        }
    }
}

extension Runtime {
    /// The RSA key of a recovery Init, after its class, type and usage
    /// checks (class or type wrong: CKR_KEY_TYPE_INCONSISTENT; flag not set:
    /// CKR_KEY_FUNCTION_NOT_PERMITTED). A key on an external card is not
    /// offered recovery (the card's module is asked only for C_Sign).
    private func recoverKey(_ s: Session, _ h: CK_OBJECT_HANDLE, signing: Bool,
                            allowing type: CK_MECHANISM_TYPE?) throws -> ObjectView {
        let view = try resolveKey(s, h, allowing: type)
        let cls = signing ? CKO_PRIVATE_KEY : CKO_PUBLIC_KEY
        guard view.objectClass == cls, view.keyType == CKK_RSA else { throw PKCS11Error.keyTypeInconsistent }
        guard view.bool(signing ? CKA_SIGN_RECOVER : CKA_VERIFY_RECOVER) == true else {
            throw PKCS11Error.keyFunctionNotPermitted
        }
        if view.isExternalKey { throw PKCS11Error.keyFunctionNotPermitted }
        if signing { try checkConsent(view, .sign) }  // Prompt.swift
        return view
    }

    public func signRecoverInit(session h: CK_SESSION_HANDLE, mechanism: Mechanism, key: CK_OBJECT_HANDLE,
                            allowing type: CK_MECHANISM_TYPE? = nil) throws {
        try signRecoverInit(session: try session(h), mechanism: mechanism, key: key, allowing: type)
    }

    /// `type` as `encryptInit`'s.
    public func signRecoverInit(session s: Session, mechanism: Mechanism, key: CK_OBJECT_HANDLE,
                            allowing type: CK_MECHANISM_TYPE? = nil) throws {
        guard !s.isActive(.signRecover) else { throw PKCS11Error.operationActive }
        guard mechanism == .rsaPKCS || mechanism == .rsaX509 else { throw PKCS11Error.mechanismInvalid }
        let k = try privateKey(try recoverKey(s, key, signing: true, allowing: type))
        try s.begin(.signRecover, try RecoverOperation(mechanism, bits: k.bits, privateKey: k, publicKey: nil))
    }

    /// A NULL buffer or a short one leaves the operation active (the
    /// signature is always k bytes); anything else ends it.
    public func signRecover(session h: CK_SESSION_HANDLE, data: [UInt8]?, capacity: Int?) throws -> OutputResult {
        try session(h).step(.signRecover, as: RecoverOperation.self, phase: .single) { op, keep in
            guard let data else { throw PKCS11Error.argumentsBad }
            if let r = OutputResult.decide(needed: op.modulusBytes, capacity: capacity) {
                keep = true
                return r
            }
            return .bytes(try op.sign(data))
        }
    }

    public func verifyRecoverInit(session h: CK_SESSION_HANDLE, mechanism: Mechanism, key: CK_OBJECT_HANDLE,
                            allowing type: CK_MECHANISM_TYPE? = nil) throws {
        try verifyRecoverInit(session: try session(h), mechanism: mechanism, key: key, allowing: type)
    }

    /// `type` as `encryptInit`'s.
    public func verifyRecoverInit(session s: Session, mechanism: Mechanism, key: CK_OBJECT_HANDLE,
                            allowing type: CK_MECHANISM_TYPE? = nil) throws {
        guard !s.isActive(.verifyRecover) else { throw PKCS11Error.operationActive }
        guard mechanism == .rsaPKCS || mechanism == .rsaX509 else { throw PKCS11Error.mechanismInvalid }
        let k = try publicKey(try recoverKey(s, key, signing: false, allowing: type))
        try s.begin(.verifyRecover, try RecoverOperation(mechanism, bits: k.bits, privateKey: nil, publicKey: k))
    }

    /// The length query answers the modulus size (an upper bound, as §5.2
    /// allows: the true length is known only after the signature is opened);
    /// a buffer shorter than the recovered data is CKR_BUFFER_TOO_SMALL with
    /// the exact length, and keeps the operation.
    public func verifyRecover(session h: CK_SESSION_HANDLE, signature: [UInt8]?, capacity: Int?) throws -> OutputResult {
        try session(h).step(.verifyRecover, as: RecoverOperation.self, phase: .single) { op, keep in
            guard let signature else { throw PKCS11Error.argumentsBad }
            guard let capacity else {
                keep = true
                return .length(op.modulusBytes)
            }
            let data = try op.recover(signature)
            if capacity < data.count {
                keep = true
                return .tooSmall(data.count)
            }
            return .bytes(data)
        }
    }
}
