import CPKCS11
import KeyshareCrypto

/// An active signing operation. Mechanism chapters may add conforming types
/// (HMAC, for instance); `SignatureOperation` covers the public-key schemes.
public protocol SignOperation: Operation {
    /// The exact signature size, answered by a length query.
    var signatureLength: Int { get }
    func update(_ part: [UInt8]) throws
    func finish() throws -> [UInt8]
}

/// How a public-key scheme consumes its input: hashed by us (multi-part
/// friendly), or taken as is (the caller hashed, or the scheme hashes).
enum SignatureInput {
    case hashed(DigestContext)
    case raw([UInt8])
}

/// Sign and verify with one of the public-key mechanisms of `Mechanism`.
final class SignatureOperation: SignOperation, VerifyOperation {
    let algorithm: SignatureAlgorithm
    let signatureLength: Int
    let privateKey: PrivateKey?
    let publicKey: PublicKey?
    /// For schemes whose input must have an exact size (PSS on a digest).
    let rawLength: Int?
    var input: SignatureInput

    /// Decides what the mechanism means for this key, or throws the error
    /// C_SignInit / C_VerifyInit must return.
    init(_ m: Mechanism, keyType: KeyType, bits: Int, privateKey: PrivateKey?, publicKey: PublicKey?) throws {
        self.privateKey = privateKey
        self.publicKey = publicKey
        var digest: DigestAlgorithm?
        var rawLength: Int?
        let family: KeyType
        switch m {
        case .rsaPKCS:
            algorithm = .rsaPKCS1(nil); family = .rsa
        case .rsaPKCSWith(let d):
            algorithm = .rsaPKCS1(d); family = .rsa; digest = d
        case .rsaPSS(let p):
            algorithm = .rsaPSS(p.hash, mgf1: p.mgf1, saltLength: p.saltLength); family = .rsa
            rawLength = p.hash.outputSize
        case .rsaPSSWith(let d, let p):
            algorithm = .rsaPSS(p.hash, mgf1: p.mgf1, saltLength: p.saltLength); family = .rsa; digest = d
        case .rsaX509:
            algorithm = .rsaRaw; family = .rsa
        case .ecdsa:
            algorithm = .ecdsa(nil); family = .ec
        case .ecdsaWith(let d):
            algorithm = .ecdsa(d); family = .ec; digest = d
        case .eddsa, .eddsaWith:
            // Ed25519 or Ed448 by the key; the parameter decides the RFC 8032 instance.
            algorithm = try EdDSAVariant.algorithm(m, keyType: keyType); family = keyType
        default:
            throw PKCS11Error.mechanismInvalid
        }
        guard family == keyType else { throw PKCS11Error.keyTypeInconsistent }
        self.rawLength = rawLength
        let bytes = (bits + 7) / 8
        switch keyType {
        case .rsa: signatureLength = bytes
        case .ec: signatureLength = 2 * bytes
        case .ed25519, .ed448, .x25519, .x448: signatureLength = ECXCurve(keyType: keyType)?.signatureLength ?? 0
        case .mlDSA(let s): signatureLength = s.signatureLength
        case .slhDSA(let s): signatureLength = s.signatureLength
        case .mlKEM: throw PKCS11Error.keyTypeInconsistent
        }
        input = try digest.map { .hashed(try DigestContext($0)) } ?? .raw([])
    }

    // MARK: C_GetOperationState (OperationState.swift)

    /// The key's handle, which C_SetOperationState's hAuthenticationKey must name.
    var keyHandle: CK_OBJECT_HANDLE?

    private init(copying o: SignatureOperation, input: SignatureInput) {
        (algorithm, signatureLength, privateKey, publicKey, rawLength) =
            (o.algorithm, o.signatureLength, o.privateKey, o.publicKey, o.rawLength)
        self.input = input
        keyHandle = o.keyHandle
    }

    /// A copy that goes on independently: the hashed mechanisms copy their
    /// digest state; raw-input schemes (CKM_ECDSA, CKM_RSA_PKCS, CKM_EDDSA,
    /// up to 1 MiB of buffered input) are not saved.
    func duplicate() throws -> any Operation {
        guard case .hashed(let ctx) = input else { throw PKCS11Error(CKR_STATE_UNSAVEABLE) }
        return SignatureOperation(copying: self, input: .hashed(try ctx.copy()))
    }

    func update(_ part: [UInt8]) throws {
        switch input {
        case .hashed(let ctx): try ctx.update(part)
        case .raw(let buf):
            // Raw schemes sign one short input; cap what a caller can pile up.
            guard buf.count + part.count <= 1 << 20 else { throw PKCS11Error.dataLenRange }
            input = .raw(buf + part)
        }
    }

    /// The digest or raw input, and whether it is a digest.
    private func collected() throws -> (bytes: [UInt8], isDigest: Bool) {
        switch input {
        case .hashed(let ctx): return (try ctx.finish(), true)
        case .raw(let buf):
            if let rawLength, buf.count != rawLength { throw PKCS11Error.dataLenRange }
            if case .ed25519 = algorithm { return (buf, false) }
            if case .ed448 = algorithm { return (buf, false) }
            if case .eddsa = algorithm { return (buf, false) }
            return (buf, true)
        }
    }

    func finish() throws -> [UInt8] {
        guard let privateKey else { throw PKCS11Error.generalError }
        let (bytes, isDigest) = try collected()
        if case .rsaPKCS1(nil) = algorithm, bytes.count > signatureLength - 11 { throw PKCS11Error.dataLenRange }
        return isDigest ? try privateKey.sign(digest: bytes, algorithm: algorithm)
            : try privateKey.sign(message: bytes, algorithm: algorithm)
    }

    func finish(signature: [UInt8]) throws {
        guard let publicKey else { throw PKCS11Error.generalError }
        guard signature.count == signatureLength else { throw PKCS11Error.signatureLenRange }
        let (bytes, isDigest) = try collected()
        let ok: Bool
        do {
            ok = isDigest ? try publicKey.verify(signature: signature, digest: bytes, algorithm: algorithm)
                : try publicKey.verify(signature: signature, message: bytes, algorithm: algorithm)
        } catch let e as PKCS11Error {
            throw e
        } catch {
            throw PKCS11Error.signatureInvalid
        }
        guard ok else { throw PKCS11Error.signatureInvalid }
    }
}

extension Runtime {
    /// A key handle as an Init call sees it: a bad handle is CKR_KEY_HANDLE_INVALID.
    func resolveKey(_ s: Session, _ h: CK_OBJECT_HANDLE) throws -> ObjectView {
        do {
            return try resolveMemoized(s, h)
        } catch let e as PKCS11Error where e == .objectHandleInvalid {
            throw PKCS11Error.keyHandleInvalid
        }
    }

    public func signInit(session h: CK_SESSION_HANDLE, mechanism: Mechanism, key: CK_OBJECT_HANDLE,
                         allowing type: CK_MECHANISM_TYPE? = nil) throws {
        try signInit(session: try session(h), mechanism: mechanism, key: key, allowing: type)
    }

    /// For a caller that has the session already (the C entry point);
    /// `type` as `encryptInit`'s.
    public func signInit(session s: Session, mechanism: Mechanism, key: CK_OBJECT_HANDLE,
                         allowing type: CK_MECHANISM_TYPE? = nil) throws {
        guard !s.isActive(.sign) else { throw PKCS11Error.operationActive }
        let view = try resolveKey(s, key, allowing: type)
        if let op = try hmacOperation(mechanism, view, usage: CKA_SIGN) { return try s.begin(.sign, op) }
        if case .aesCMAC(let n) = mechanism { return try s.begin(.sign, try cmacOperation(n, view, usage: CKA_SIGN)) }
        if case .cbcMAC(let m) = mechanism { return try s.begin(.sign, try cbcMACOperation(m, view, usage: CKA_SIGN)) }
        if case .dsa(let d) = mechanism { return try s.begin(.sign, try dsaOperation(d, view, signing: true)) }
        // DSA and DH keys hold components, not a PrivateKey: no other mechanism takes them (FFCKeys.swift).
        if view.keyType == CKK_DSA || view.keyType == CKK_DH { throw PKCS11Error.keyTypeInconsistent }
        guard view.objectClass == CKO_PRIVATE_KEY else { throw PKCS11Error.keyTypeInconsistent }
        guard view.bool(CKA_SIGN) == true else { throw PKCS11Error.keyFunctionNotPermitted }
        try checkConsent(view, .sign)  // the person's consent, where the token asks (Prompt.swift)
        // A key of an external token: signed on the card (ExternalTokens.swift).
        if view.isExternalKey {
            return try s.begin(.sign, try externalSignOperation(s, view, mechanism))
        }
        // A key of a TPM token: signed in the TPM (TPMKeys.swift).
        if let blob = view.tpmBlob { return try s.begin(.sign, try tpmSignOperation(s, view, blob: blob, mechanism)) }
        let k = try privateKey(view)
        if case .pqSign(let m) = mechanism {
            return try s.begin(.sign, try PQSignatureOperation(m, keyType: k.keyType, privateKey: k, publicKey: nil))
        }
        let op = try SignatureOperation(mechanism, keyType: k.keyType, bits: k.bits, privateKey: k, publicKey: nil)
        op.keyHandle = key
        try s.begin(.sign, op)
    }

    /// Single-part C_Sign: a NULL buffer or a short one leaves the operation
    /// active; anything else ends it.
    public func sign(session h: CK_SESSION_HANDLE, data: [UInt8]?, capacity: Int?) throws -> OutputResult {
        try session(h).step(.sign, as: SignOperation.self, phase: .single) { op, keep in
            guard let data else { throw PKCS11Error.argumentsBad }
            if let r = OutputResult.decide(needed: op.signatureLength, capacity: capacity) {
                keep = true
                return r
            }
            try op.update(data)
            return .bytes(try op.finish())
        }
    }

    public func signUpdate(session h: CK_SESSION_HANDLE, part: [UInt8]?) throws {
        try session(h).step(.sign, as: SignOperation.self, phase: .update) { op, keep in
            guard let part else { throw PKCS11Error.argumentsBad }
            try op.update(part)
            keep = true
        }
    }

    public func signFinal(session h: CK_SESSION_HANDLE, capacity: Int?) throws -> OutputResult {
        try session(h).step(.sign, as: SignOperation.self, phase: .final) { op, keep in
            if let r = OutputResult.decide(needed: op.signatureLength, capacity: capacity) {
                keep = true
                return r
            }
            return .bytes(try op.finish())
        }
    }
}
