import CPKCS11

/// The kinds of operation a session can have active at once, one of each.
public enum OperationKind: Sendable, Hashable, CaseIterable {
    case find, encrypt, decrypt, digest, sign, verify, signRecover, verifyRecover
    /// Message-based encryption and decryption (PKCS #11 3.0 §5.13-5.14, MessageCrypto.swift).
    case messageEncrypt, messageDecrypt
}

/// A set of operation kinds as one bit each: the session's phase sets
/// (`Session.multipart`, `singlePart`) are touched by every step, and a
/// `Set` hashes the kind each time (SipHash: more than the bit test).
struct OperationKindSet: Equatable {
    private var bits: UInt16 = 0
    init() {}
    init<S: Sequence>(_ kinds: S) where S.Element == OperationKind { for k in kinds { insert(k) } }
    private static func bit(_ k: OperationKind) -> UInt16 {
        switch k {
        case .find: 1 << 0
        case .encrypt: 1 << 1
        case .decrypt: 1 << 2
        case .digest: 1 << 3
        case .sign: 1 << 4
        case .verify: 1 << 5
        case .signRecover: 1 << 6
        case .verifyRecover: 1 << 7
        case .messageEncrypt: 1 << 8
        case .messageDecrypt: 1 << 9
        }
    }
    func contains(_ k: OperationKind) -> Bool { bits & Self.bit(k) != 0 }
    mutating func insert(_ k: OperationKind) { bits |= Self.bit(k) }
    mutating func remove(_ k: OperationKind) { bits &= ~Self.bit(k) }
    mutating func removeAll() { bits = 0 }
}

/// Marker for the state of an active operation. The mechanism chapters
/// (sign, verify, encrypt, decrypt, digest) add protocols refining it; a
/// session stores one per `OperationKind`.
public protocol Operation: AnyObject {
    /// This operation as a cipher, or nil: what `as? any CipherOperation`
    /// answers, without the runtime's conformance lookup (a hash table
    /// search on every C_Encrypt). CipherOperation's extension supplies it.
    var asCipher: (any CipherOperation)? { get }
}

extension Operation {
    public var asCipher: (any CipherOperation)? { nil }
}

/// What a call with an output buffer produced: the C layer turns this into
/// the buffer convention (NULL buffer: length only; short buffer:
/// CKR_BUFFER_TOO_SMALL with the length; else the bytes).
public enum OutputResult: Sendable, Equatable {
    /// A length query (NULL buffer): CKR_OK, and the operation goes on.
    case length(Int)
    /// The buffer was too small: CKR_BUFFER_TOO_SMALL, and the operation goes on.
    case tooSmall(Int)
    /// The output; the operation ended if this was its last step.
    case bytes([UInt8])

    /// The common decision for an output of known size.
    static func decide(needed: Int, capacity: Int?) -> OutputResult? {
        guard let capacity else { return .length(needed) }
        return capacity < needed ? .tooSmall(needed) : nil
    }

    var keepsOperation: Bool {
        if case .bytes = self { return false }
        return true
    }
}

/// Which kind of call a step is. PKCS #11 3.0 §5.8 (and the same text in
/// §5.10, §5.12, §5.13, §5.15): a single-part call (C_Encrypt, C_Sign, ...)
/// "MUST be called after C_EncryptInit without intervening C_EncryptUpdate
/// calls", and an operation a single-part length query left active is
/// finished by that same single-part call, never by C_*Update / C_*Final.
enum StepPhase { case any, single, update, final }

extension Session {
    /// Starts an operation: CKR_OPERATION_ACTIVE if one of this kind runs.
    func begin(_ kind: OperationKind, _ op: any Operation) throws {
        try lock.withLock { () throws in
            guard operations[kind] == nil else { throw PKCS11Error.operationActive }
            operations[kind] = op
            multipart.remove(kind)
            singlePart.remove(kind)
        }
    }

    func end(_ kind: OperationKind) {
        lock.withLock {
            operations[kind] = nil
            multipart.remove(kind)
            singlePart.remove(kind)
        }
    }

    /// Ends the operations of `kinds` (whichever are active). The C layer
    /// calls this when a call fails before it reaches `step`, e.g. a NULL
    /// length pointer: PKCS #11 3.0 §5.2 and §5.8 leave an operation active
    /// only after CKR_BUFFER_TOO_SMALL or a successful length query.
    public func endOperations(_ kinds: [OperationKind]) {
        for k in kinds { end(k) }
    }

    public func isActive(_ kind: OperationKind) -> Bool {
        lock.withLock { operations[kind] != nil }
    }

    /// Runs one step of the active operation of `kind` with the session lock
    /// held (calls on one session are serial by the spec; other sessions are
    /// not blocked). An error ends the operation, as the spec requires for
    /// every step except a length query or CKR_BUFFER_TOO_SMALL, which the
    /// body reports by returning normally with `keep` set.
    ///
    /// `phase` enforces the spec's rule that a single-part call (C_Sign,
    /// C_Verify, ...) may not finish an operation fed by C_*Update, and that
    /// an operation kept by a single-part length query (or
    /// CKR_BUFFER_TOO_SMALL) goes on only with that single-part call: the
    /// wrong kind of call is CKR_OPERATION_ACTIVE and, like every error,
    /// ends the operation.
    func step<O, R>(_ kind: OperationKind, as type: O.Type, phase: StepPhase = .any,
                    _ body: (O, inout Bool) throws -> R) throws -> R {
        try step(kind, phase: phase, cast: { $0 as? O }, body)
    }

    /// `step` for the cipher calls: the cast is `Operation.asCipher`.
    func cipherStep<R>(_ kind: OperationKind, phase: StepPhase = .any,
                       _ body: (any CipherOperation, inout Bool) throws -> R) throws -> R {
        try step(kind, phase: phase, cast: { $0.asCipher }, body)
    }

    private func step<O, R>(_ kind: OperationKind, phase: StepPhase, cast: (any Operation) -> O?,
                            _ body: (O, inout Bool) throws -> R) throws -> R {
        try lock.withLock {
            guard let any = operations[kind] else { throw PKCS11Error.operationNotInitialized }
            func finish() {
                operations[kind] = nil
                multipart.remove(kind)
                singlePart.remove(kind)
            }
            guard let op = cast(any) else {
                finish()
                throw PKCS11Error.operationNotInitialized
            }
            let wrongCall = switch phase {
            case .single: multipart.contains(kind)
            case .update, .final: singlePart.contains(kind)
            case .any: false
            }
            if wrongCall {
                finish()
                throw PKCS11Error.operationActive
            }
            var keep = false
            do {
                let r = try body(op, &keep)
                if phase == .update { multipart.insert(kind) }
                if phase == .single, keep { singlePart.insert(kind) }
                if !keep { finish() }
                return r
            } catch {
                finish()
                throw error
            }
        }
    }
}
