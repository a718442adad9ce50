import CPKCS11
import KeyshareCrypto

/// An active digest. Other digest-like mechanisms can conform too.
public protocol DigestOperation: Operation {
    var digestLength: Int { get }
    func update(_ part: [UInt8]) throws
    func finish() throws -> [UInt8]
}

/// CKM_SHA_1, CKM_SHA224 .. CKM_SHA512, CKM_SHA512_224, CKM_SHA512_256,
/// CKM_SHA3_224 .. CKM_SHA3_512.
final class HashOperation: DigestOperation, SaveableOperation {
    let context: DigestContext
    let digestLength: Int
    let keyHandle: CK_OBJECT_HANDLE? = nil
    init(_ d: DigestAlgorithm) throws {
        context = try DigestContext(d)
        digestLength = d.outputSize
    }
    private init(_ context: DigestContext) {
        self.context = context
        digestLength = context.algorithm.outputSize
    }
    func update(_ part: [UInt8]) throws { try context.update(part) }
    func finish() throws -> [UInt8] { try context.finish() }
    /// C_GetOperationState: an independent copy of the digest so far.
    func duplicate() throws -> any Operation { HashOperation(try context.copy()) }
}

extension Runtime {
    public func digestInit(session h: CK_SESSION_HANDLE, mechanism: Mechanism) throws {
        let s = try session(h)
        guard !s.isActive(.digest) else { throw PKCS11Error.operationActive }
        guard case .digest(let d) = mechanism else { throw PKCS11Error.mechanismInvalid }
        try s.begin(.digest, try HashOperation(d))
    }

    public func digest(session h: CK_SESSION_HANDLE, data: [UInt8]?, capacity: Int?) throws -> OutputResult {
        try session(h).step(.digest, as: DigestOperation.self, phase: .single) { op, keep in
            guard let data else { throw PKCS11Error.argumentsBad }
            if let r = OutputResult.decide(needed: op.digestLength, capacity: capacity) {
                keep = true
                return r
            }
            try op.update(data)
            return .bytes(try op.finish())
        }
    }

    public func digestUpdate(session h: CK_SESSION_HANDLE, part: [UInt8]?) throws {
        try session(h).step(.digest, as: DigestOperation.self, phase: .update) { op, keep in
            guard let part else { throw PKCS11Error.argumentsBad }
            try op.update(part)
            keep = true
        }
    }

    /// A secret key's value goes into the digest (a digest reveals nothing a
    /// brute force of the key would not); private keys are
    /// CKR_KEY_INDIGESTIBLE, as they have no single value to digest.
    public func digestKey(session h: CK_SESSION_HANDLE, key: CK_OBJECT_HANDLE) throws {
        let s = try session(h)
        let view = try? resolveKey(s, key)
        try s.step(.digest, as: DigestOperation.self, phase: .update) { op, keep in
            guard let view else { throw PKCS11Error.keyHandleInvalid }
            guard view.objectClass == CKO_SECRET_KEY, let value = view.attributes[CKA_VALUE] else {
                throw PKCS11Error(CKR_KEY_INDIGESTIBLE)
            }
            // CKA_ALLOWED_MECHANISMS: the digest's mechanism must be in the key's list (AllowedMechanisms.swift).
            if let hash = op as? HashOperation,
               !AllowedMechanisms.permits(view, { (try? Mechanism(type: $0, parameter: nil)) == .digest(hash.context.algorithm) }) {
                throw PKCS11Error.mechanismInvalid
            }
            try op.update(value)
            keep = true
        }
    }

    public func digestFinal(session h: CK_SESSION_HANDLE, capacity: Int?) throws -> OutputResult {
        try session(h).step(.digest, as: DigestOperation.self, phase: .final) { op, keep in
            if let r = OutputResult.decide(needed: op.digestLength, capacity: capacity) {
                keep = true
                return r
            }
            return .bytes(try op.finish())
        }
    }
}
