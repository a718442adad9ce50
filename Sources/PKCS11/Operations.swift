import CPKCS11

/// The kinds of operation a session can have active at once, one of each.
public enum OperationKind: Sendable, Hashable, CaseIterable {
    case find, encrypt, decrypt, digest, sign, verify, signRecover, verifyRecover
}

/// Marker for the state of an active operation. The mechanism chapters
/// (sign, verify, encrypt, decrypt, digest) add protocols refining it; a
/// session stores one per `OperationKind`.
public protocol Operation: AnyObject {}

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

/// Which kind of call a step is: single-part calls may not follow updates.
enum StepPhase { case any, single, update }

extension Session {
    /// Starts an operation: CKR_OPERATION_ACTIVE if one of this kind runs.
    func begin(_ kind: OperationKind, _ op: any Operation) throws {
        try lock.withLock { () throws in
            guard operations[kind] == nil else { throw PKCS11Error.operationActive }
            operations[kind] = op
        }
    }

    func end(_ kind: OperationKind) {
        lock.withLock {
            operations[kind] = nil
            multipart.remove(kind)
        }
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
    /// C_Verify, ...) may not finish an operation fed by C_*Update.
    func step<O, R>(_ kind: OperationKind, as type: O.Type, phase: StepPhase = .any,
                    _ body: (O, inout Bool) throws -> R) throws -> R {
        try lock.withLock {
            guard let any = operations[kind] else { throw PKCS11Error.operationNotInitialized }
            func finish() {
                operations[kind] = nil
                multipart.remove(kind)
            }
            guard let op = any as? O else {
                finish()
                throw PKCS11Error.operationNotInitialized
            }
            if phase == .single, multipart.contains(kind) {
                finish()
                throw PKCS11Error.operationActive
            }
            var keep = false
            do {
                let r = try body(op, &keep)
                if phase == .update { multipart.insert(kind) }
                if !keep { finish() }
                return r
            } catch {
                finish()
                throw error
            }
        }
    }
}
