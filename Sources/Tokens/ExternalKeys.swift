import Keychain
import KeyshareCrypto

/// Routes private-key operations of an external token to the card: a
/// session on the token in the other module, logged in with the PIN the
/// consumer gave. The private key is found there by CKA_ID (the proxy's
/// CKA_KEYSHARE_EXTERNAL) and never read, copied or cached here.
public final class ExternalTokenSession: @unchecked Sendable {
    public let tokenID: TokenID
    private let lib: PKCS11Library
    private let session: UInt
    /// The card module's initialisation this session belongs to.
    private let generation: Int
    private let lock = Lock()
    private var closed = false

    /// Opens a session on the card named by `tokenID` (its serial) in the
    /// module configured for its driver class.
    public init(store: KeychainStore, tokenID: TokenID) throws {
        guard ExternalDriver.isExternal(tokenID) else { throw TokensError.unsupported("\(tokenID) is not an external token") }
        let name = ExternalDriver.driverName(tokenID) ?? ""
        guard let driver = try store.drivers().first(where: { $0.name == name }) else {
            throw ExternalModuleError(function: "driver", rv: ExternalModuleError.tokenNotPresent,
                                      message: "no driver \(name) is configured")
        }
        let lib = try PKCS11Library.shared(driver.modulePath, environment: driver.environment)
        func findSlot() throws -> UInt? {
            for slot in try lib.slots(tokenPresent: true) {
                guard let info = try? lib.tokenInfo(slot: slot) else { continue }
                let instance = info.serial.isEmpty ? "label-" + info.label : info.serial
                if instance == tokenID.instance { return slot }
            }
            return nil
        }
        var slot = try findSlot()
        if slot == nil {
            lib.rescanIfIdle()
            slot = try findSlot()
        }
        guard let slot else {
            throw UnreachableToken(token: tokenID, driver: driver)
        }
        self.tokenID = tokenID
        self.lib = lib
        (session, generation) = try lib.openHeldSession(slot: slot)
    }

    deinit { close() }

    public func close() {
        let wasOpen = lock.withLock { () -> Bool in
            defer { closed = true }
            return !closed
        }
        guard wasOpen else { return }
        lib.closeHeldSession(session, generation: generation)
    }

    /// Whether this process's card module still shows the card (its serial)
    /// in a slot: the operating process's own view, used to tell a card
    /// pulled mid-operation from a card that merely failed.
    public func isPresent() -> Bool {
        guard lib.isCurrent(generation), let slots = try? lib.slots(tokenPresent: true) else { return false }
        return slots.contains { slot in
            guard let info = try? lib.tokenInfo(slot: slot) else { return false }
            return (info.serial.isEmpty ? "label-" + info.label : info.serial) == tokenID.instance
        }
    }

    /// C_Login as user on the card; the PIN is passed through, never kept.
    public func login(pin: [UInt8]) throws {
        try lock.withLock { try lib.login(session: session, pin: pin) }
    }

    public func logout() {
        lock.withLock { if lib.isCurrent(generation) { lib.logout(session: session) } }
    }

    /// keyshare's C_Finalize: logged out, session closed, and then every card
    /// module finalized (PKCS11Library), in that order.
    public static func finalizeModules() {
        PKCS11Library.finalizeAll()
    }

    /// One signature with the card's private key `keyID` (CKA_ID).
    /// `mechanism` and `parameter` are the consumer's CK_MECHANISM, unchanged.
    public func sign(keyID: [UInt8], mechanism: UInt, parameter: [UInt8], data: [UInt8]) throws -> [UInt8] {
        try run(.sign, keyID: keyID, mechanism: mechanism, parameter: parameter, data: data)
    }

    public func decrypt(keyID: [UInt8], mechanism: UInt, parameter: [UInt8], data: [UInt8]) throws -> [UInt8] {
        try run(.decrypt, keyID: keyID, mechanism: mechanism, parameter: parameter, data: data)
    }

    /// ECDH (CKD_NULL) with the card's private key `keyID`: the shared
    /// secret Z; the card's temporary secret object is destroyed at once.
    public func deriveECDH(keyID: [UInt8], publicData: [UInt8]) throws -> [UInt8] {
        try lock.withLock {
            let key = try privateKey(keyID)
            return try lib.deriveECDH(session: session, key: key, publicData: publicData)
        }
    }

    private func privateKey(_ keyID: [UInt8]) throws -> UInt {
        guard lib.isCurrent(generation) else {
            throw ExternalModuleError(function: "C_FindObjectsInit", rv: 0xB3 /* CKR_SESSION_HANDLE_INVALID */)
        }
        let keys = try lib.find(session: session, template: [
            CKA.class: AttributeCoding.ulong(CKO.privateKey), CKA.id: keyID,
        ])
        guard let key = keys.first else {
            throw ExternalModuleError(function: "C_FindObjects", rv: 0x60 /* CKR_KEY_HANDLE_INVALID */,
                                      message: "the card has no private key with this CKA_ID (not logged in?)")
        }
        return key
    }

    private func run(_ op: PKCS11Library.Operation, keyID: [UInt8], mechanism: UInt, parameter: [UInt8], data: [UInt8]) throws -> [UInt8] {
        try lock.withLock {
            let key = try privateKey(keyID)
            return try lib.perform(op, session: session, mechanism: mechanism, parameter: parameter, key: key, input: data)
        }
    }
}

/// The driver, loaded in this process with its stored variables, lists no
/// token with this serial although the keychain shows it present: the card
/// was just pulled, or the process that mirrored it gave the driver another
/// configuration (defect 9b: an agent started before SOFTHSM2_CONF was set).
/// Its description is the one line the module logs.
public struct UnreachableToken: Error, CustomStringConvertible, Sendable {
    public let token: TokenID
    public let driver: KeychainStore.DriverConfig

    public var description: String {
        let env = driver.environment.isEmpty ? "no variables stored"
            : driver.environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        return "token \(token) is listed present but driver \(driver.name) (\(driver.modulePath)), loaded here with \(env), "
            + "does not show it: the card was removed, or the process that mirrored it configured the driver differently "
            + "(see keyshare driver list; store the driver's configuration with keyshare driver set-env \(driver.name) --env NAME=VALUE)"
    }
}
