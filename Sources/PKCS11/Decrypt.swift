import CPKCS11

extension Runtime {
    /// The mechanisms are in Cipher.swift (`cipherOperation`).
    public func decryptInit(session h: CK_SESSION_HANDLE, mechanism: Mechanism, key: CK_OBJECT_HANDLE,
                            allowing type: CK_MECHANISM_TYPE? = nil) throws {
        try decryptInit(session: try session(h), mechanism: mechanism, key: key, allowing: type)
    }

    /// For a caller that has the session already (the C entry point): one
    /// session lookup per C_DecryptInit instead of two.
    /// `type`: as `encryptInit`'s.
    public func decryptInit(session s: Session, mechanism: Mechanism, key: CK_OBJECT_HANDLE,
                            allowing type: CK_MECHANISM_TYPE? = nil) throws {
        guard !s.isActive(.decrypt) else { throw PKCS11Error.operationActive }
        try s.begin(.decrypt, try cipherInitOperation(s, mechanism, key: key, allowing: type, encrypting: false))
    }

    public func decrypt(session h: CK_SESSION_HANDLE, data: [UInt8]?, capacity: Int?) throws -> OutputResult {
        try cipherOneShot(.decrypt, h, data, capacity)
    }
    public func decryptUpdate(session h: CK_SESSION_HANDLE, part: [UInt8]?, capacity: Int?) throws -> OutputResult {
        try cipherUpdate(.decrypt, h, part, capacity)
    }
    public func decryptFinal(session h: CK_SESSION_HANDLE, capacity: Int?) throws -> OutputResult {
        try cipherFinal(.decrypt, h, capacity)
    }
}
