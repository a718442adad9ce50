import CPKCS11

extension Runtime {
    /// No decryption mechanism is implemented yet: every one is invalid here.
    public func decryptInit(session h: CK_SESSION_HANDLE, mechanism: Mechanism, key: CK_OBJECT_HANDLE) throws {
        let s = try session(h)
        guard !s.isActive(.decrypt) else { throw PKCS11Error.operationActive }
        _ = try resolveKey(s, key)
        throw PKCS11Error.mechanismInvalid
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
