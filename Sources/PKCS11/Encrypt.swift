import CPKCS11

/// An active encryption or decryption. The cipher chapters add conforming
/// types (RSA PKCS #1 / OAEP, AES-CBC/GCM) and their cases in
/// `encryptInit` / `decryptInit`; the output-buffer handling is shared here.
public protocol CipherOperation: Operation {
    /// Upper bound of the output of a single-part call for `input` bytes.
    func outputLength(input: Int) -> Int
    /// Upper bound of the output of an update with `input` bytes.
    func updateOutputLength(input: Int) -> Int
    /// Upper bound of the output of the final call.
    var finalOutputLength: Int { get }
    func oneShot(_ data: [UInt8]) throws -> [UInt8]
    func update(_ part: [UInt8]) throws -> [UInt8]
    func finish() throws -> [UInt8]
}

extension Runtime {
    /// The mechanisms are in Cipher.swift (`cipherOperation`).
    public func encryptInit(session h: CK_SESSION_HANDLE, mechanism: Mechanism, key: CK_OBJECT_HANDLE) throws {
        let s = try session(h)
        guard !s.isActive(.encrypt) else { throw PKCS11Error.operationActive }
        let view = try resolveKey(s, key)
        try s.begin(.encrypt, try cipherOperation(mechanism, view, encrypting: true))
    }

    public func encrypt(session h: CK_SESSION_HANDLE, data: [UInt8]?, capacity: Int?) throws -> OutputResult {
        try cipherOneShot(.encrypt, h, data, capacity)
    }
    public func encryptUpdate(session h: CK_SESSION_HANDLE, part: [UInt8]?, capacity: Int?) throws -> OutputResult {
        try cipherUpdate(.encrypt, h, part, capacity)
    }
    public func encryptFinal(session h: CK_SESSION_HANDLE, capacity: Int?) throws -> OutputResult {
        try cipherFinal(.encrypt, h, capacity)
    }

    /// Shared by encrypt and decrypt. The output size of a cipher may be known
    /// only after the work (padding), so a length query answers the upper
    /// bound and the real length is set with the bytes.
    func cipherOneShot(_ kind: OperationKind, _ h: CK_SESSION_HANDLE, _ data: [UInt8]?, _ capacity: Int?) throws -> OutputResult {
        try session(h).step(kind, as: CipherOperation.self, phase: .single) { op, keep in
            guard let data else { throw PKCS11Error.argumentsBad }
            if let r = OutputResult.decide(needed: op.outputLength(input: data.count), capacity: capacity) {
                keep = true
                return r
            }
            return .bytes(try op.oneShot(data))
        }
    }

    func cipherUpdate(_ kind: OperationKind, _ h: CK_SESSION_HANDLE, _ part: [UInt8]?, _ capacity: Int?) throws -> OutputResult {
        try session(h).step(kind, as: CipherOperation.self, phase: .update) { op, keep in
            guard let part else { throw PKCS11Error.argumentsBad }
            keep = true
            if let r = OutputResult.decide(needed: op.updateOutputLength(input: part.count), capacity: capacity) {
                return r
            }
            return .bytes(try op.update(part))
        }
    }

    func cipherFinal(_ kind: OperationKind, _ h: CK_SESSION_HANDLE, _ capacity: Int?) throws -> OutputResult {
        try session(h).step(kind, as: CipherOperation.self, phase: .final) { op, keep in
            if let r = OutputResult.decide(needed: op.finalOutputLength, capacity: capacity) {
                keep = true
                return r
            }
            return .bytes(try op.finish())
        }
    }
}
