import CPKCS11

/// One use of a private or secret key (sign, decrypt, derive, unwrap,
/// decapsulate), as the agent records it in its audit trail (docs/agent.md,
/// "Audit records"). Nothing secret: names, references, the mechanism, the
/// result.
public struct KeyUse: Sendable, Equatable {
    public var tokenID: String
    public var tokenLabel: String
    public var keyLabel: String
    /// The key's persistent reference (base64url), as `keyshare list` shows it.
    public var keyReference: String
    /// sign, decrypt, derive, unwrap, decapsulate.
    public var operation: String
    /// The mechanism, as hex CKM value (0x...) or a name where one is known.
    public var mechanism: String
    public var result: CK_RV

    public init(tokenID: String, tokenLabel: String, keyLabel: String, keyReference: String, operation: String,
                mechanism: String, result: CK_RV) {
        self.tokenID = tokenID
        self.tokenLabel = tokenLabel
        self.keyLabel = keyLabel
        self.keyReference = keyReference
        self.operation = operation
        self.mechanism = mechanism
        self.result = result
    }
}
