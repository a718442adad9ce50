import Foundation
import Keychain
import KeyshareCrypto
import Tokens

/// The opened store and the token helpers one command needs.
struct Context {
    let store: KeychainStore
    let tokens: TokenManager

    /// `syncDrivers`: first mirror the cards of configured PKCS #11 modules
    /// (a no-op without drivers), so every command sees the cards present now.
    static func open(syncDrivers: Bool = true) throws -> Context {
        let store = try KeychainStore(home: nil)
        if syncDrivers { Drivers.sync(store) }
        return Context(store: store, tokens: TokenManager(store: store))
    }

    func token(_ selection: TokenSelection) throws -> TokenRecord {
        try tokens.resolveToken(selection.token)
    }

    /// Unlocks the token with the user PIN; the store counts a wrong PIN.
    func unlock(_ token: TokenRecord, _ pin: PINOptions) throws -> TokenKey {
        let secret = try pin.userPIN(token: token.label)
        return try store.unlockUser(token.tokenID, pin: secret)
    }

    /// Items named on the command line: a persistent reference (base64url) or a label.
    func resolveItems(_ name: String, token: TokenRecord?, key: TokenKey?) throws -> [Item] {
        if let ref = PersistentReference(base64url: name), let item = try? store.item(ref, key: key) {
            return [item]
        }
        var query = ItemQuery(attributes: [CKA.label: Array(name.utf8)], limit: .all)
        query.tokenID = token?.tokenID
        let items = try store.find(query, key: key)
        guard !items.isEmpty else {
            throw CLIError("no item with reference or label \(name)" + (key == nil ? " (private items need the PIN: give --pin-source)" : ""))
        }
        return items
    }
}
