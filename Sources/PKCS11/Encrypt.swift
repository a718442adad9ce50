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
    /// The copy-free single-part call: writes the output of `input` into
    /// `output` (which holds `outputLength(input:)` bytes) and returns its
    /// length, or nil when this operation (or this call) must take the
    /// copying path. See `DirectCipherOperation`.
    func directOneShot(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> Int?
    /// The copy-free update of a stream cipher (its output is exactly the
    /// input's size), or nil for the copying path.
    func directUpdate(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> Int?
    /// Hands an encryption its session's keyed-context cache
    /// (KeyedCipherCache.swift); the AEAD ciphers use it, the rest ignore it.
    func attach(_ cache: KeyedCipherCache)
}

/// The copying path everywhere unless a cipher says otherwise. Requirements
/// with defaults rather than a second protocol to cast to: a Swift protocol
/// cast looks the conformance up in a hash table on every call, which cost
/// more than the copies a 16 KiB AES-CTR update saves.
extension CipherOperation {
    public var asCipher: (any CipherOperation)? { self }
    func attach(_ cache: KeyedCipherCache) {}
    func directOneShot(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> Int? { nil }
    func directUpdate(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> Int? { nil }
}

/// A cipher that runs calls straight between the caller's buffers: no copy
/// of the input, no intermediate output array, no copy out. For a 16 KiB
/// AES-CTR message the three copies cost more than the cipher itself
/// (docs/benchmarks.md). Only where nothing unverified can reach the
/// caller's buffer: decryption of an AEAD stays on the copying path, which
/// releases plaintext after the tag check. Conformers implement
/// `directOneShot`, and a stream cipher `directUpdate`.
protocol DirectCipherOperation: CipherOperation {}

/// What a direct call produced (the C layer sets *pulLen).
public enum DirectOutput: Sendable, Equatable {
    case length(Int)
    case tooSmall(Int)
    case written(Int)
}

/// Whether two buffers overlap other than by starting at the same byte
/// (in place is fine for OpenSSL; a partial overlap is not).
private func partlyOverlapping(_ input: UnsafeRawBufferPointer, _ output: UnsafeMutableRawPointer, _ n: Int) -> Bool {
    guard let i = input.baseAddress, input.count > 0, n > 0 else { return false }
    let o = UnsafeRawPointer(output)
    return i != o && i < o + n && o < i + input.count
}

extension Runtime {
    /// C_Encrypt / C_Decrypt without copies when the operation can
    /// (`directOneShot`); nil otherwise or for partly overlapping buffers,
    /// with the operation untouched: the caller then takes `encrypt` /
    /// `decrypt`. The rules (and the length answers) are `cipherOneShot`'s.
    public func cipherDirect(_ kind: OperationKind, session s: Session, input: UnsafeRawBufferPointer?,
                             output: UnsafeMutableRawPointer?, capacity: Int?) throws -> DirectOutput? {
        try s.cipherStep(kind, phase: .single) { op, keep -> DirectOutput? in
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
            guard !partlyOverlapping(input, output, needed),
                  let n = try op.directOneShot(input, into: UnsafeMutableRawBufferPointer(start: output, count: needed)) else {
                keep = true
                return nil
            }
            return .written(n)
        }
    }

    /// C_EncryptUpdate / C_DecryptUpdate without copies when the operation
    /// can (`directUpdate`); nil (operation untouched) otherwise or for
    /// partly overlapping buffers. The rules are `cipherUpdate`'s.
    public func cipherUpdateDirect(_ kind: OperationKind, session s: Session, input: UnsafeRawBufferPointer?,
                                   output: UnsafeMutableRawPointer?, capacity: Int?) throws -> DirectOutput? {
        try s.cipherStep(kind, phase: .update) { op, keep -> DirectOutput? in
            keep = true
            guard let input else { throw PKCS11Error.argumentsBad }
            let needed = op.updateOutputLength(input: input.count)
            switch OutputResult.decide(needed: needed, capacity: capacity) {
            case .length(let n)?: return .length(n)
            case .tooSmall(let n)?: return .tooSmall(n)
            default: break
            }
            guard let output else { throw PKCS11Error.argumentsBad }
            guard !partlyOverlapping(input, output, needed) else { return nil }
            return try op.directUpdate(input, into: UnsafeMutableRawBufferPointer(start: output, count: needed)).map { .written($0) }
        }
    }

    /// The mechanisms are in Cipher.swift (`cipherOperation`).
    public func encryptInit(session h: CK_SESSION_HANDLE, mechanism: Mechanism, key: CK_OBJECT_HANDLE,
                            allowing type: CK_MECHANISM_TYPE? = nil) throws {
        try encryptInit(session: try session(h), mechanism: mechanism, key: key, allowing: type)
    }

    /// For a caller that has the session already (the C entry point): one
    /// session lookup (a lock and the store's change counter) per
    /// C_EncryptInit instead of two.
    /// `type`: the caller's mechanism number for CKA_ALLOWED_MECHANISMS
    /// (AllowedMechanisms.swift, `resolveKey(_:_:allowing:)`).
    public func encryptInit(session s: Session, mechanism: Mechanism, key: CK_OBJECT_HANDLE,
                            allowing type: CK_MECHANISM_TYPE? = nil) throws {
        guard !s.isActive(.encrypt) else { throw PKCS11Error.operationActive }
        let op = try cipherInitOperation(s, mechanism, key: key, allowing: type, encrypting: true)
        op.attach(s.cipherCache)
        try s.begin(.encrypt, op)
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
