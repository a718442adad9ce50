#if canImport(Glibc)
import Glibc
#endif
import CPKCS11
import Keychain
import KeyshareCrypto
import Tokens

/// External (PKCS #11 driver) tokens in the module: their slots come from
/// the store like any token's; logging in and private-key operations are
/// passed to the card through its own module. Guarded by `Runtime.lock`.
struct ExternalState {
    /// The card session of each logged-in external token.
    var sessions: [TokenID: ExternalTokenSession] = [:]
    /// When this process last polled the configured modules (monotonic s).
    var lastSync: Double = -1_000
    /// This process's poller: it remembers which cards this process saw, so
    /// it can record a removal it witnessed and no other (DriverPoller).
    var poller: DriverPoller?
    /// Whether this process reached the TPM, and when it last looked (monotonic s).
    var tpmProbe: (at: Double, reachable: Bool)?
}

extension Runtime {
    /// Mirrors the cards of configured modules into the store, at most once a
    /// second per process, in a child process when `keyshare driver add`
    /// recorded one (a crashing module then cannot take the host down). This
    /// process is never the designated watcher: it records what it sees by
    /// the presence rule (DriverPoller), so a host that cannot see a card
    /// never takes it away from the others.
    func syncExternalTokens() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let t = Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
        let due = lock.withLock { () -> Bool in
            guard t - external.lastSync >= 1 else { return false }
            external.lastSync = t
            return true
        }
        guard due, let drivers = try? store.drivers(), !drivers.isEmpty else { return }
        let poller = lock.withLock { () -> DriverPoller in
            if let p = external.poller { return p }
            let helper = (try? store.driverHelper()) ?? nil
            let isolation: DriverPoller.Isolation = helper.map { access($0, X_OK) == 0 ? .childProcess(executable: $0) : .inProcess } ?? .inProcess
            let p = DriverPoller(store: store, isolation: isolation, timeout: 5)
            external.poller = p
            return p
        }
        poller.pollAll()
    }

    /// C_Finalize: every card session is logged out and closed, and then the
    /// card modules this process initialised are finalized, the order a
    /// module expects (never a call into one after its own C_Finalize).
    func shutdownExternal() {
        let cards = lock.withLock { () -> [ExternalTokenSession] in
            defer { external.sessions.removeAll() }
            return Array(external.sessions.values)
        }
        for card in cards {
            card.logout()
            card.close()
        }
        ExternalTokenSession.finalizeModules()
    }

    /// C_Logout (or the last session closed): the card is logged out too.
    func externalLogout(_ token: TokenID) {
        let card = lock.withLock { external.sessions.removeValue(forKey: token) }
        card?.logout()
        card?.close()
    }

    /// C_Login on an external token: the card checks the PIN.
    func externalLogin(_ s: Session, role: TokenKey.Role, pin: [UInt8]) throws {
        guard role == .user else { throw PKCS11Error.functionNotSupported }
        if login(for: s.tokenID) != nil { throw PKCS11Error(CKR_USER_ALREADY_LOGGED_IN) }
        let card = try Self.cardCall { try openCard(s.tokenID) }
        try Self.cardCall { try card.login(pin: pin) }
        let marker = try store.externalLoginKey(s.tokenID)
        let old = try lock.withLock { () throws -> ExternalTokenSession? in
            if logins[s.tokenID] != nil { throw PKCS11Error(CKR_USER_ALREADY_LOGGED_IN) }
            logins[s.tokenID] = LoginState(role: .user, key: marker)
            objects.loggedIn(token: s.tokenID)
            defer { external.sessions[s.tokenID] = card }
            return external.sessions[s.tokenID]
        }
        old?.close()
    }

    /// The card session a login opens, through the driver loaded here with
    /// its stored variables. A driver that does not show a token the
    /// keychain lists as present is logged (which driver, which variables,
    /// what to do) and answered CKR_TOKEN_NOT_PRESENT: before, this was a
    /// bare CKR_DEVICE_REMOVED with nothing in any log (defect 9b). A driver
    /// that cannot be loaded here is logged too.
    func openCard(_ id: TokenID) throws -> ExternalTokenSession {
        do {
            return try ExternalTokenSession(store: store, tokenID: id)
        } catch let e as UnreachableToken {
            Log.warning(e.description)
            throw PKCS11Error(CKR_TOKEN_NOT_PRESENT)
        } catch let e as ExternalModuleError {
            Log.warning("token \(id): its driver cannot be used in this process: \(e)")
            throw e
        }
    }

    /// A card's private keys are hidden before login, as the card hides
    /// them: consumers (libp11) that find a key without login would never log in.
    func externalVisible(_ item: Item, _ s: Session) -> Bool {
        item.attributes[CKA.keyshareExternal] == nil || login(for: s.tokenID) != nil
    }

    /// C_SignInit with a key proxy: the operation that signs on the card.
    func externalSignOperation(_ s: Session, _ view: ObjectView, _ mechanism: Mechanism) throws -> any SignOperation {
        guard let keyID = view.attributes[CKA.keyshareExternal] else { throw PKCS11Error.keyHandleInvalid }
        guard let card = lock.withLock({ logins[s.tokenID] == nil ? nil : external.sessions[s.tokenID] }) else {
            throw PKCS11Error.userNotLoggedIn
        }
        var (type, parameter) = try Self.raw(mechanism)
        // Cards rarely do ECDSA-with-hash; hashing here and signing the
        // digest with CKM_ECDSA gives the same signature.
        var prehash: DigestAlgorithm?
        if case .ecdsaWith(let d) = mechanism { prehash = d; type = UInt(CKM_ECDSA); parameter = [] }
        return ExternalSignOperation(card: card, store: store, keyID: keyID, mechanism: type, parameter: parameter,
                                     prehash: prehash, signatureLength: Self.signatureLength(view.attributes))
    }

    /// C_DecryptInit with a key proxy: decrypted on the card (RSA PKCS #1, OAEP, raw).
    func externalDecryptOperation(_ view: ObjectView, _ mechanism: Mechanism) throws -> any CipherOperation {
        guard let keyID = view.attributes[CKA.keyshareExternal] else { throw PKCS11Error.keyHandleInvalid }
        let token = view.entry.tokenID
        guard let card = lock.withLock({ logins[token] == nil ? nil : external.sessions[token] }) else {
            throw PKCS11Error.userNotLoggedIn
        }
        let (type, parameter) = try Self.raw(mechanism)
        return ExternalDecryptOperation(card: card, store: store, keyID: keyID, mechanism: type, parameter: parameter,
                                        size: Self.signatureLength(view.attributes))
    }

    /// C_DeriveKey (CKM_ECDH1_DERIVE) with a key proxy: the card computes the
    /// shared secret Z (CKD_NULL) on the logged-in card session; the KDF,
    /// length and template are then applied here as for any key.
    func externalDeriveECDH(_ s: Session, _ view: ObjectView, publicData: [UInt8]) throws -> [UInt8] {
        guard let keyID = view.attributes[CKA.keyshareExternal] else { throw PKCS11Error.keyHandleInvalid }
        guard let card = lock.withLock({ logins[s.tokenID] == nil ? nil : external.sessions[s.tokenID] }) else {
            throw PKCS11Error.userNotLoggedIn
        }
        guard try store.token(card.tokenID)?.present == true else { throw PKCS11Error(CKR_DEVICE_REMOVED) }
        do {
            return try Self.cardCall { try card.deriveECDH(keyID: keyID, publicData: publicData) }
        } catch let e as PKCS11Error where e.rv == CKR_KEY_HANDLE_INVALID {
            throw PKCS11Error(CKR_DEVICE_REMOVED)  // the key is gone from the card: it was removed or replaced
        } catch let e as PKCS11Error {
            throw Self.removedIfGone(e, card)
        }
    }

    /// A card call that failed without a reason the consumer can act on:
    /// if this process's card module no longer shows the card, it was pulled
    /// (the operating process decides from its own view), CKR_DEVICE_REMOVED.
    static func removedIfGone(_ e: PKCS11Error, _ card: ExternalTokenSession) -> PKCS11Error {
        guard e.rv == CKR_DEVICE_ERROR || e.rv == CKR_GENERAL_ERROR, !card.isPresent() else { return e }
        return PKCS11Error(CKR_DEVICE_REMOVED)
    }

    static func signatureLength(_ a: AttributeMap) -> Int {
        if let m = a[CKA.modulus] { return m.drop { $0 == 0 }.count }
        if let p = a[CKA.ecParams], let c = ECCurve(paramsDER: p) { return 2 * c.byteSize }
        return 64
    }

    /// A Mechanism back in CK_MECHANISM form, to hand to the card unchanged.
    static func raw(_ m: Mechanism) throws -> (UInt, [UInt8]) {
        func find(_ table: [CK_MECHANISM_TYPE: DigestAlgorithm], _ d: DigestAlgorithm) throws -> UInt {
            guard let t = table.first(where: { $0.value == d })?.key else { throw PKCS11Error.mechanismInvalid }
            return UInt(t)
        }
        func pss(_ p: PSSParameters) throws -> [UInt8] {
            guard let mgf = Mechanism.mgf1.first(where: { $0.value == p.mgf1 })?.key else { throw PKCS11Error.mechanismParamInvalid }
            return AttributeCoding.ulong(try find(Mechanism.digestOf, p.hash)) + AttributeCoding.ulong(UInt(mgf))
                + AttributeCoding.ulong(UInt(p.saltLength))
        }
        switch m {
        case .rsaPKCS: return (UInt(CKM_RSA_PKCS), [])
        case .rsaPKCSWith(let d): return (try find(Mechanism.rsaPKCSDigest, d), [])
        case .rsaPSS(let p): return (UInt(CKM_RSA_PKCS_PSS), try pss(p))
        case .rsaPSSWith(let d, let p): return (try find(Mechanism.rsaPSSDigest, d), try pss(p))
        case .rsaX509: return (UInt(CKM_RSA_X_509), [])
        case .ecdsa: return (UInt(CKM_ECDSA), [])
        case .ecdsaWith(let d): return (try find(Mechanism.ecdsaDigest, d), [])
        case .eddsa: return (UInt(CKM_EDDSA), [])
        case .undecoded(let t, let p): return (UInt(t), p)
        case .rsaOAEP(let o):
            // CK_RSA_PKCS_OAEP_PARAMS; a label would need a pointer that outlives this encoding.
            guard o.label.isEmpty, let mgf = Mechanism.mgf1.first(where: { $0.value == o.mgf1 })?.key else {
                throw PKCS11Error.mechanismParamInvalid
            }
            return (UInt(CKM_RSA_PKCS_OAEP), AttributeCoding.ulong(try find(Mechanism.digestOf, o.hash))
                + AttributeCoding.ulong(UInt(mgf)) + AttributeCoding.ulong(UInt(CKZ_DATA_SPECIFIED))
                + AttributeCoding.ulong(0) + AttributeCoding.ulong(0))
        default: throw PKCS11Error.mechanismInvalid
        }
    }

    /// Card errors as the consumer must see them: a card that went away is
    /// CKR_DEVICE_REMOVED; PIN answers pass through; anything else is a device error.
    static func cardCall<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let e as ExternalModuleError {
            switch CK_RV(e.rv) {
            case CKR_DEVICE_REMOVED, CKR_TOKEN_NOT_PRESENT, CKR_SESSION_HANDLE_INVALID, CKR_SESSION_CLOSED:
                throw PKCS11Error(CKR_DEVICE_REMOVED)
            // CKR_GENERAL_ERROR too: OpenSC answers it for a PIN a card
            // refused without saying why (the CAC emulator's VERIFY), and a
            // consumer must see what the card's own module says.
            case CKR_PIN_INCORRECT, CKR_PIN_LOCKED, CKR_PIN_EXPIRED, CKR_PIN_LEN_RANGE, CKR_USER_PIN_NOT_INITIALIZED,
                 CKR_GENERAL_ERROR,
                 CKR_DATA_LEN_RANGE, CKR_DATA_INVALID, CKR_MECHANISM_INVALID, CKR_MECHANISM_PARAM_INVALID,
                 CKR_KEY_HANDLE_INVALID, CKR_KEY_FUNCTION_NOT_PERMITTED, CKR_KEY_TYPE_INCONSISTENT,
                 CKR_USER_NOT_LOGGED_IN, CKR_ENCRYPTED_DATA_INVALID, CKR_ENCRYPTED_DATA_LEN_RANGE:
                throw PKCS11Error(CK_RV(e.rv))
            default:
                throw PKCS11Error.deviceError
            }
        }
    }
}

/// Collects the input and signs on the card at the end: the card does the
/// hashing for the hash-and-sign mechanisms, exactly as the consumer asked.
final class ExternalSignOperation: SignOperation {
    let card: ExternalTokenSession
    let store: KeychainStore
    let keyID: [UInt8]
    let mechanism: UInt
    let parameter: [UInt8]
    let prehash: DigestAlgorithm?
    let signatureLength: Int
    private var input: [UInt8] = []

    init(card: ExternalTokenSession, store: KeychainStore, keyID: [UInt8], mechanism: UInt, parameter: [UInt8],
         prehash: DigestAlgorithm?, signatureLength: Int) {
        self.card = card
        self.store = store
        self.keyID = keyID
        self.mechanism = mechanism
        self.parameter = parameter
        self.prehash = prehash
        self.signatureLength = signatureLength
    }

    func update(_ part: [UInt8]) throws {
        guard input.count + part.count <= 64 << 20 else { throw PKCS11Error.dataLenRange }
        input += part
    }

    /// A card the keychain has seen go is CKR_DEVICE_REMOVED, whatever a
    /// stale session in its module would still answer.
    func finish() throws -> [UInt8] {
        guard try store.token(card.tokenID)?.present == true else { throw PKCS11Error(CKR_DEVICE_REMOVED) }
        let data = prehash.map { $0.hash(input) } ?? input
        do {
            return try Runtime.cardCall { try card.sign(keyID: keyID, mechanism: mechanism, parameter: parameter, data: data) }
        } catch let e as PKCS11Error where e.rv == CKR_KEY_HANDLE_INVALID {
            throw PKCS11Error(CKR_DEVICE_REMOVED)  // the key is gone from the card: it was removed or replaced
        } catch let e as PKCS11Error {
            throw Runtime.removedIfGone(e, card)
        }
    }
}

/// RSA decryption on the card: one block, so updates only collect.
final class ExternalDecryptOperation: CipherOperation {
    let card: ExternalTokenSession
    let store: KeychainStore
    let keyID: [UInt8]
    let mechanism: UInt
    let parameter: [UInt8]
    let size: Int
    private var input: [UInt8] = []

    init(card: ExternalTokenSession, store: KeychainStore, keyID: [UInt8], mechanism: UInt, parameter: [UInt8], size: Int) {
        self.card = card
        self.store = store
        self.keyID = keyID
        self.mechanism = mechanism
        self.parameter = parameter
        self.size = size
    }

    func outputLength(input: Int) -> Int { size }
    func updateOutputLength(input: Int) -> Int { 0 }
    var finalOutputLength: Int { size }

    func oneShot(_ data: [UInt8]) throws -> [UInt8] {
        guard try store.token(card.tokenID)?.present == true else { throw PKCS11Error(CKR_DEVICE_REMOVED) }
        do {
            return try Runtime.cardCall { try card.decrypt(keyID: keyID, mechanism: mechanism, parameter: parameter, data: data) }
        } catch let e as PKCS11Error {
            throw Runtime.removedIfGone(e, card)
        }
    }

    func update(_ part: [UInt8]) throws -> [UInt8] {
        guard input.count + part.count <= 1 << 16 else { throw PKCS11Error(CKR_ENCRYPTED_DATA_LEN_RANGE) }
        input += part
        return []
    }

    func finish() throws -> [UInt8] { try oneShot(input) }
}

extension ObjectView {
    /// A private-key proxy of an external token (no key material here).
    var isExternalKey: Bool { attributes[CKA.keyshareExternal] != nil }
}
