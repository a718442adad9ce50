import FoundationEssentials
import Glibc
import Keychain
import KeyshareCrypto
import Tokens

/// The opened store and the token helpers one command needs.
struct Context {
    let store: KeychainStore
    let tokens: TokenManager
    /// The poller that synced the drivers when the context was opened: what
    /// this process's drivers showed (`token list` states); nil when no
    /// driver is configured or the sync was skipped.
    var drivers: DriverPoller? = nil

    /// `syncDrivers`: first mirror the cards of configured PKCS #11 modules
    /// (a no-op without drivers), so every command sees the cards present now.
    static func open(syncDrivers: Bool = true) throws -> Context {
        let store = try KeychainStore(home: nil)
        let poller = syncDrivers ? Drivers.sync(store) : nil
        return Context(store: store, tokens: TokenManager(store: store), drivers: poller)
    }

    func token(_ selection: TokenSelection) throws -> TokenRecord {
        try tokens.resolveToken(selection.token)
    }

    /// Unlocks the token with the user PIN; the store counts a wrong PIN.
    func unlock(_ token: TokenRecord, _ pin: PINOptions) throws -> TokenKey {
        let secret = try pin.userPIN(token: token.label)
        return try PINErrors.naming("user PIN", of: token) { try store.unlockUser(token.tokenID, pin: secret) }
    }

    /// Items named on the command line: a persistent reference (base64url) or a label.
    func resolveItems(_ name: String, token: TokenRecord?, key: TokenKey?) throws -> [Item] {
        if let ref = PersistentReference(base64url: name), let item = try? store.item(ref, key: key) {
            return [item]
        }
        var query = ItemQuery(attributes: [CKA.label: Array(name.utf8)], limit: .all)
        query.tokenID = token?.tokenID
        var items = try store.find(query, key: key)
        if items.isEmpty, let hash = Self.sha256Hex(name) {
            items = try itemsOfCertificate(hash: hash, token: token, key: key)
        }
        if items.isEmpty, let ref = PersistentReference(base64url: name) {
            throw CLIError(try Self.notFound(ref, store: store))
        }
        guard !items.isEmpty else {
            throw CLIError("no item with reference or label \(name)" + (key == nil ? " (private items need the PIN: give --pin-source)" : ""))
        }
        return items
    }

    /// 64 hex digits (a certificate's SHA-256, the default label before 0.4), as bytes.
    static func sha256Hex(_ name: String) -> [UInt8]? {
        let chars = Array(name.utf8)
        guard chars.count == 64 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for i in stride(from: 0, to: 64, by: 2) {
            guard let hi = Self.nibble(chars[i]), let lo = Self.nibble(chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x41...0x46: c - 0x41 + 10
        case 0x61...0x66: c - 0x61 + 10
        default: nil
        }
    }

    /// The items an identity's SHA-256 names, as earlier releases labelled them (the labels are
    /// readable names now, docs/browsers.md "Names"): the certificate of that hash and the keys
    /// that share its CKA_ID. Scripts written for the old labels keep working.
    func itemsOfCertificate(hash: [UInt8], token: TokenRecord?, key: TokenKey?) throws -> [Item] {
        var q = ItemQuery(attributes: [:], limit: .all)
        q.tokenID = token?.tokenID
        let all = try store.find(q, key: key)
        guard let cert = all.first(where: { $0.itemClass == .certificate && $0[CKA.value].map { DigestAlgorithm.sha256.hash($0) } == hash })
        else { return [] }
        guard let id = cert[CKA.id], !id.isEmpty else { return [cert] }
        return all.filter { $0.reference == cert.reference || ($0.itemClass != .certificate && $0[CKA.id] == id && $0.tokenID == cert.tokenID) }
    }

    /// A reference that resolves to nothing: say why when the store knows
    /// (its token is removed), never fall back to another item.
    static func notFound(_ ref: PersistentReference, store: KeychainStore) throws -> String {
        if let t = try store.owningToken(ref), !t.present {
            return "item not found: its token \(t.label) (\(t.tokenID)) is removed; insert it again (keyshare token insert \(t.tokenID))"
        }
        if try store.owningToken(ref) != nil {
            return "item not found with this token selection (private items need the PIN: give --pin-source)"
        }
        if ref.isDerived {
            return "item not found: it belongs to an external token (smart card) that is not present; insert the card again"
        }
        return "item not found (no item has this reference; if its token was removed, insert the token again)"
    }
}
