import TPMCore

/// A TPM or TSS failure, sorted into what callers must tell apart: a wrong
/// authorization (a wrong PIN, counted by the TPM's dictionary-attack
/// protection), the lockout itself, a policy (PCR) mismatch, a blob that this
/// TPM cannot load (made by another TPM, or before the TPM was cleared), and
/// a TPM that cannot be reached at all.
public struct TPMError: Error, CustomStringConvertible, Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case unreachable
        case authFailed
        case lockout
        case policyFailed
        case foreignObject
        case unsupported
        case objectMemory
        case other
    }

    public let rc: UInt32
    public let operation: String

    /// Set when the connection itself could not be opened.
    let unreachable: Bool

    public init(rc: UInt32, operation: String, unreachable: Bool = false) {
        self.rc = rc
        self.operation = operation
        self.unreachable = unreachable
    }

    /// The TPM layer's own code without the handle/session/parameter number bits.
    var tpmCode: UInt32? {
        guard rc & 0xFFFF_0000 == 0 else { return nil }
        if rc & 0x80 != 0 { return 0x80 | (rc & 0x3F) }  // format one
        return rc & 0x97F
    }

    public var kind: Kind {
        if unreachable { return .unreachable }
        if let code = tpmCode {
            switch code {
            case 0x08E, 0x0A2: return .authFailed           // TPM_RC_AUTH_FAIL, TPM_RC_BAD_AUTH
            case 0x921: return .lockout                     // TPM_RC_LOCKOUT
            case 0x09D, 0x128, 0x126: return .policyFailed  // TPM_RC_POLICY_FAIL, PCR_CHANGED, POLICY
            // A private part that does not decrypt or verify under this TPM's storage root key.
            case 0x09F: return .foreignObject               // TPM_RC_INTEGRITY
            case 0x902: return .objectMemory                // TPM_RC_OBJECT_MEMORY
            case 0x083, 0x084, 0x087, 0x092, 0x0A6: return .unsupported  // HASH, VALUE, KEY_SIZE, SCHEME, CURVE
            default: return .other
            }
        }
        if rc == KTPM_RC_BAD_BLOB { return .foreignObject }
        // The TCTI layer (0x0A): the connection broke or nothing answered.
        if rc >> 16 == 0x0A { return .unreachable }
        return .other
    }

    public var description: String {
        let text = String(cString: ktpm_rc_text(rc))
        switch kind {
        case .unreachable: return "no TPM reachable (\(operation): \(text))"
        case .lockout: return "the TPM is in dictionary-attack lockout; wait for its recovery time (\(operation))"
        case .foreignObject: return "this object was made by another TPM or before this TPM was cleared (\(operation): \(text))"
        default: return "TPM error in \(operation): \(text) (0x\(String(rc, radix: 16)))"
        }
    }
}
