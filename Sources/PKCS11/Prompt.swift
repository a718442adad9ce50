import CPKCS11
import Keychain

/// The agent's own prompt for one client (docs/agent.md, "The agent's
/// prompt"): a pinentry on the client's display or terminal. The agent gives
/// it to the client's Module (Module(home:...prompt:)), so this layer holds
/// no agent code; the in-process module has none, and then:
/// CKF_PROTECTED_AUTHENTICATION_PATH is never set, a NULL PIN is
/// CKR_ARGUMENTS_BAD and no consent is asked (a program that opens the store
/// itself holds what the agent would protect).
public struct ClientPrompt: Sendable {
    /// Whether a prompt can reach the client's person now (a display or a
    /// terminal, and a pinentry program): what CKF_PROTECTED_AUTHENTICATION_PATH says.
    public let available: @Sendable () -> Bool
    /// Asks for a PIN. nil: cancelled, timed out or no prompt could be shown.
    public let pin: @Sendable (PINQuestion) -> [UInt8]?
    /// Asks whether the program may use a key (the agent's policy and its
    /// earlier answers first; only then a pinentry CONFIRM).
    public let consent: @Sendable (ConsentQuestion) -> ConsentAnswer
    /// Each use of a token's private key, and its outcome (the agent's audit
    /// records, docs/agent.md "Audit records").
    public let audit: @Sendable (KeyUse) -> Void

    public init(available: @escaping @Sendable () -> Bool, pin: @escaping @Sendable (PINQuestion) -> [UInt8]?,
                consent: @escaping @Sendable (ConsentQuestion) -> ConsentAnswer,
                audit: @escaping @Sendable (KeyUse) -> Void = { _ in }) {
        self.available = available
        self.pin = pin
        self.consent = consent
        self.audit = audit
    }
}

/// What a PIN prompt asks for: the token, which PIN, and the attempts left
/// once a wrong PIN has been given (nil before: nothing to warn about).
public struct PINQuestion: Sendable, Equatable {
    public enum Kind: String, Sendable { case user = "user PIN", securityOfficer = "SO PIN", contextSpecific = "user PIN (again, for this key)" }
    public let token: TokenID
    public let tokenLabel: String
    public let kind: Kind
    public let attemptsLeft: Int?
}

/// A private key's use that may need the person's consent (docs/agent.md, "Consent").
public enum KeyPurpose: String, Sendable {
    case sign, decrypt, derive, unwrap, decapsulate
    /// C_WrapKey of the private key itself: its value leaves the token.
    case export = "wrap (export)"
}

public struct ConsentQuestion: Sendable, Equatable {
    public let token: TokenID
    public let tokenLabel: String
    /// The key's CKA_LABEL (may be empty) and CKA_ID.
    public let keyLabel: String
    public let keyID: [UInt8]
    /// The store item: what "Allow once" is remembered by.
    public let keyReference: PersistentReference
    public let use: KeyPurpose
}

public enum ConsentAnswer: Sendable, Equatable {
    case allowed
    /// Deny, or no way to ask: CKR_FUNCTION_REJECTED ("rejected by the user", PKCS #11 3.0).
    case rejected
    /// No answer in time: CKR_FUNCTION_CANCELED.
    case canceled
}

extension Runtime {
    /// Whether C_GetTokenInfo shows CKF_PROTECTED_AUTHENTICATION_PATH for
    /// `rec`: a token whose PINs this module checks, with a prompt that can
    /// reach the client now.
    func promptsForPIN(_ rec: TokenRecord) -> Bool {
        guard rec.hasPINs, let prompt else { return false }
        return prompt.available()
    }

    /// C_Login with a NULL PIN (PKCS #11 3.0 §5.6.8: "the token's own means"):
    /// the PIN from the agent's prompt. Refused (CKR_ARGUMENTS_BAD, not
    /// counted) where the token does not show the protected path; a locked
    /// PIN is answered without asking; cancel, timeout and an empty entry are
    /// CKR_FUNCTION_CANCELED (not counted); a wrong PIN is the caller's to
    /// check and count like any other.
    func promptedPIN(_ rec: TokenRecord, _ kind: PINQuestion.Kind) throws -> [UInt8] {
        guard promptsForPIN(rec), let prompt else { throw PKCS11Error.argumentsBad }
        let so = kind == .securityOfficer
        if so ? rec.soPINLocked : rec.userPINLocked { throw PKCS11Error(CKR_PIN_LOCKED) }
        let failures = so ? rec.soPINFailures : rec.userPINFailures
        let q = PINQuestion(token: rec.tokenID, tokenLabel: rec.label, kind: kind,
                            attemptsLeft: failures > 0 ? (so ? rec.soPINRemaining : rec.userPINRemaining) : nil)
        // A prompt waits for a person: not inside the module meanwhile (ForkGate).
        // The caller zeroes the PIN after the check (Runtime.login).
        guard let pin = ForkGate.outside({ prompt.pin(q) }) else { throw PKCS11Error(CKR_FUNCTION_CANCELED) }
        guard !pin.isEmpty else { throw PKCS11Error(CKR_FUNCTION_CANCELED) }
        return pin
    }

    /// Before a token private key is used for `use`: where the token's
    /// consent is `ask` and this module has a prompt (an agent client), the
    /// agent decides (its policy, the answers this process got, else the
    /// person). A key allowed once is not asked about again by this runtime.
    /// Also where each such use is put on the audit record (its outcome:
    /// CKR_OK, or the consent's refusal), in the agent only.
    func checkConsent(_ view: ObjectView, _ use: KeyPurpose) throws {
        guard let prompt, view.objectClass == CKO_PRIVATE_KEY, case .token(let token, let ref, _) = view.entry else { return }
        let (rec, known) = lock.withLock { (slotCache.records.first { $0.tokenID == token }, consented.contains(ref)) }
        let keyLabel = view.attributes[CKA_LABEL].map { String(decoding: $0, as: UTF8.self) } ?? ""
        var outcome = CK_RV(CKR_OK)
        defer {
            prompt.audit(KeyUse(tokenID: token.description, tokenLabel: rec?.label ?? "", keyLabel: keyLabel,
                                keyReference: ref.base64url, operation: use.rawValue, mechanism: "", result: outcome))
        }
        guard let rec, rec.consent == .ask, !known else { return }
        let q = ConsentQuestion(token: token, tokenLabel: rec.label, keyLabel: keyLabel,
                                keyID: view.attributes[CKA_ID] ?? [], keyReference: ref, use: use)
        switch ForkGate.outside({ prompt.consent(q) }) {
        case .allowed: lock.withLock { _ = consented.insert(ref) }
        case .rejected:
            outcome = CK_RV(CKR_FUNCTION_REJECTED)
            throw PKCS11Error(CKR_FUNCTION_REJECTED)
        case .canceled:
            outcome = CK_RV(CKR_FUNCTION_CANCELED)
            throw PKCS11Error(CKR_FUNCTION_CANCELED)
        }
    }
}
