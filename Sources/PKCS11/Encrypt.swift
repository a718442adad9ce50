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

/// A cipher that can run a single-part call straight between the caller's
/// buffers: no copy of the input, no intermediate output array, no copy
/// out. For a 16 KiB AES-CTR message the three copies cost more than the
/// cipher itself (docs/benchmarks.md). Only where nothing unverified can
/// reach the caller's buffer: decryption of an AEAD stays on the copying
/// path, which releases plaintext after the tag check.
protocol DirectCipherOperation: CipherOperation {
    /// Writes the single-part output of `input` into `output` (which holds
    /// `outputLength(input:)` bytes) and returns its length, or nil when this
    /// call must take the copying path.
    func directOneShot(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> Int?
}

/// A stream cipher's C_EncryptUpdate / C_DecryptUpdate without copies
/// (AES-CTR): the output of an update is exactly its input's size.
protocol DirectUpdateOperation: CipherOperation {
    func directUpdate(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> Int
}

/// What a direct single-part call produced (the C layer sets *pulLen).
public enum DirectOutput: Sendable, Equatable {
    case length(Int)
    case tooSmall(Int)
    case written(Int)
}

extension Runtime {
    /// C_Encrypt / C_Decrypt without copies, for a `DirectCipherOperation`;
    /// nil when the active operation is not one (or the buffers overlap
    /// other than exactly): the caller then takes `encrypt` / `decrypt`,
    /// with the operation untouched. The rules are `cipherOneShot`'s.
    public func cipherDirect(_ kind: OperationKind, session h: CK_SESSION_HANDLE, input: UnsafeRawBufferPointer?,
                             output: UnsafeMutableRawPointer?, capacity: Int?) throws -> DirectOutput? {
        try session(h).step(kind, as: CipherOperation.self, phase: .single) { op, keep -> DirectOutput? in
            guard let direct = op as? DirectCipherOperation else {
                keep = true
                return nil
            }
            guard let input else { throw PKCS11Error.argumentsBad }
            let needed = op.outputLength(input: input.count)
            switch OutputResult.decide(needed: needed, capacity: capacity) {
            case .length(let n)?:
                keep = true
                return .length(n)
            case .tooSmall(let n)?:
                keep = true
                return .tooSmall(n)
            default:
                break
            }
            guard let output else { throw PKCS11Error.argumentsBad }
            let out = UnsafeMutableRawBufferPointer(start: output, count: needed)
            if let i = input.baseAddress, input.count > 0, i != UnsafeRawPointer(output),
               i < UnsafeRawPointer(output) + needed, UnsafeRawPointer(output) < i + input.count {
                keep = true  // partly overlapping buffers: the copying path
                return nil
            }
            guard let n = try direct.directOneShot(input, into: out) else {
                keep = true
                return nil
            }
            return .written(n)
        }
    }

    /// C_EncryptUpdate / C_DecryptUpdate without copies for a
    /// `DirectUpdateOperation`; nil (operation untouched) otherwise or for
    /// partly overlapping buffers. The rules are `cipherUpdate`'s.
    public func cipherUpdateDirect(_ kind: OperationKind, session h: CK_SESSION_HANDLE, input: UnsafeRawBufferPointer?,
                                   output: UnsafeMutableRawPointer?, capacity: Int?) throws -> DirectOutput? {
        try session(h).step(kind, as: CipherOperation.self, phase: .update) { op, keep -> DirectOutput? in
            keep = true
            guard let direct = op as? DirectUpdateOperation else { return nil }
            guard let input else { throw PKCS11Error.argumentsBad }
            let needed = op.updateOutputLength(input: input.count)
            switch OutputResult.decide(needed: needed, capacity: capacity) {
            case .length(let n)?: return .length(n)
            case .tooSmall(let n)?: return .tooSmall(n)
            default: break
            }
            guard let output else { throw PKCS11Error.argumentsBad }
            if let i = input.baseAddress, input.count > 0, i != UnsafeRawPointer(output),
               i < UnsafeRawPointer(output) + needed, UnsafeRawPointer(output) < i + input.count {
                return nil
            }
            return .written(try direct.directUpdate(input, into: UnsafeMutableRawBufferPointer(start: output, count: needed)))
        }
    }

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
