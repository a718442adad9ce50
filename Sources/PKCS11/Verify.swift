import CPKCS11
import KeyshareCrypto

/// An active verification. C_Verify and C_VerifyFinal always end it.
public protocol VerifyOperation: Operation {
    func update(_ part: [UInt8]) throws
    /// Throws CKR_SIGNATURE_INVALID or CKR_SIGNATURE_LEN_RANGE.
    func finish(signature: [UInt8]) throws
}

extension Runtime {
    /// The public half of a key object: a public key from its SPKI or
    /// components, or a private key's own public key (after login).
    func publicKey(_ view: ObjectView) throws -> PublicKey {
        switch view.objectClass {
        case CKO_PRIVATE_KEY:
            return try privateKey(view).publicKey
        case CKO_PUBLIC_KEY:
            if let k = lock.withLock({ objects.publicKeyCache[view.handle] }) { return k }
            let k: PublicKey
            if let spki = view.attributes[CKA_PUBLIC_KEY_INFO], !spki.isEmpty, let parsed = try? PublicKey(spkiDER: spki) {
                k = parsed
            } else {
                k = try ObjectFactory.publicKey(view.attributes)
            }
            lock.withLock { if objects.entries[view.handle] != nil { objects.publicKeyCache[view.handle] = k } }
            return k
        default:
            throw PKCS11Error.keyTypeInconsistent
        }
    }

    public func verifyInit(session h: CK_SESSION_HANDLE, mechanism: Mechanism, key: CK_OBJECT_HANDLE,
                           allowing type: CK_MECHANISM_TYPE? = nil) throws {
        try verifyInit(session: try session(h), mechanism: mechanism, key: key, allowing: type)
    }

    /// For a caller that has the session already (the C entry point);
    /// `type` as `encryptInit`'s.
    public func verifyInit(session s: Session, mechanism: Mechanism, key: CK_OBJECT_HANDLE,
                           allowing type: CK_MECHANISM_TYPE? = nil) throws {
        guard !s.isActive(.verify) else { throw PKCS11Error.operationActive }
        try s.begin(.verify, try verifyOperation(s, mechanism: mechanism, key: key, allowing: type))
    }

    /// The verification `mechanism` with `key` would run: shared by C_VerifyInit and the 3.2
    /// signature-first C_VerifySignatureInit (VerifySignature.swift), so every verify mechanism,
    /// and each one added later, serves both with the same key checks.
    func verifyOperation(_ s: Session, mechanism: Mechanism, key: CK_OBJECT_HANDLE,
                         allowing type: CK_MECHANISM_TYPE? = nil) throws -> any VerifyOperation {
        let view = try resolveKey(s, key, allowing: type)
        if let op = try hmacOperation(mechanism, view, usage: CKA_VERIFY) { return op }
        if case .aesCMAC(let n) = mechanism { return try cmacOperation(n, view, usage: CKA_VERIFY) }
        if case .cbcMAC(let m) = mechanism { return try cbcMACOperation(m, view, usage: CKA_VERIFY) }
        if case .dsa(let d) = mechanism { return try dsaOperation(d, view, signing: false) }
        if view.keyType == CKK_DSA || view.keyType == CKK_DH { throw PKCS11Error.keyTypeInconsistent }
        let permitted = view.objectClass == CKO_PUBLIC_KEY ? view.bool(CKA_VERIFY) : view.bool(CKA_SIGN)
        guard view.objectClass == CKO_PUBLIC_KEY || view.objectClass == CKO_PRIVATE_KEY else {
            throw PKCS11Error.keyTypeInconsistent
        }
        guard permitted == true else { throw PKCS11Error.keyFunctionNotPermitted }
        let k = try publicKey(view)
        if case .pqSign(let m) = mechanism {
            return try PQSignatureOperation(m, keyType: k.keyType, privateKey: nil, publicKey: k)
        }
        let op = try SignatureOperation(mechanism, keyType: k.keyType, bits: k.bits, privateKey: nil, publicKey: k)
        op.keyHandle = key
        return op
    }

    public func verify(session h: CK_SESSION_HANDLE, data: [UInt8]?, signature: [UInt8]?) throws {
        try session(h).step(.verify, as: VerifyOperation.self, phase: .single) { op, _ in
            guard let data, let signature else { throw PKCS11Error.argumentsBad }
            try op.update(data)
            try op.finish(signature: signature)
        }
    }

    public func verifyUpdate(session h: CK_SESSION_HANDLE, part: [UInt8]?) throws {
        try session(h).step(.verify, as: VerifyOperation.self, phase: .update) { op, keep in
            guard let part else { throw PKCS11Error.argumentsBad }
            try op.update(part)
            keep = true
        }
    }

    public func verifyFinal(session h: CK_SESSION_HANDLE, signature: [UInt8]?) throws {
        try session(h).step(.verify, as: VerifyOperation.self, phase: .final) { op, _ in
            guard let signature else { throw PKCS11Error.argumentsBad }
            try op.finish(signature: signature)
        }
    }
}
