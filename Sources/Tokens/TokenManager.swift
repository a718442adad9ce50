import Keychain
import KeyshareCrypto

/// The soft driver: tokens whose keys live in the keychain store itself.
public enum SoftToken {
    public static let driverClass = "com.keyshare.soft"

    public static func isSoft(_ id: TokenID) -> Bool { id.driverClass == driverClass }
}

public enum TokensError: Error, Equatable, CustomStringConvertible, Sendable {
    case noTokens
    /// Several tokens fit (or none was named and there are several); lists "label (token ID)".
    case ambiguousToken(String?, choices: [String])
    case unknownToken(String, choices: [String])
    case keyCertificateMismatch
    case notSoftToken(String)
    case unsupported(String)

    public var description: String {
        switch self {
        case .noTokens:
            "there is no token; create one with `keyshare token create`"
        case .ambiguousToken(let name, let choices):
            (name.map { "\"\($0)\" names several tokens" } ?? "there are several tokens; name one")
                + ": " + choices.joined(separator: ", ")
        case .unknownToken(let name, let choices):
            "no token \"\(name)\"" + (choices.isEmpty ? "" : "; the tokens are: " + choices.joined(separator: ", "))
        case .keyCertificateMismatch:
            "the private key does not belong to the certificate"
        case .notSoftToken(let id):
            "\(id) is not a keyshare soft token"
        case .unsupported(let what):
            "unsupported: \(what)"
        }
    }
}

/// Token-level operations over a store: create and find tokens, import and
/// generate the objects of an identity the same way everywhere.
public final class TokenManager: @unchecked Sendable {
    public let store: KeychainStore

    public init(store: KeychainStore) {
        self.store = store
    }

    /// A soft token with a random 16-hex-digit serial, which is also its token ID instance.
    public func createSoftToken(label: String, soPIN: [UInt8], userPIN: [UInt8]) throws -> TokenRecord {
        while true {
            let serial = ObjectTemplates.hex(try SecureRandom.bytes(8))
            guard let id = TokenID(driverClass: SoftToken.driverClass, instance: serial) else {
                throw KeychainError.invalidArgument("bad token ID")
            }
            do {
                return try store.createToken(id, label: label, soPIN: soPIN, userPIN: userPIN, serial: serial)
            } catch KeychainError.tokenExists {
                continue  // 2^-64; try another serial
            }
        }
    }

    public func tokens() throws -> [TokenRecord] { try store.tokens() }

    public func deleteToken(_ id: TokenID) throws { try store.deleteToken(id) }

    public func login(_ id: TokenID, userPIN: [UInt8]) throws -> TokenKey { try store.unlockUser(id, pin: userPIN) }

    private static func describe(_ t: TokenRecord) -> String { "\(t.label) (\(t.tokenID))" }

    /// Takes a soft token out of the system without destroying it: its items
    /// stay in the store but are invisible (references give itemNotFound)
    /// until `insertToken`. Token ID, slot ID and references never change.
    public func removeToken(_ id: TokenID) throws {
        guard SoftToken.isSoft(id) else { throw TokensError.notSoftToken(id.description) }
        try store.setPresent(id, false)
    }

    public func insertToken(_ id: TokenID) throws {
        guard SoftToken.isSoft(id) else { throw TokensError.notSoftToken(id.description) }
        try store.setPresent(id, true)
    }

    /// A token by token ID, label or serial; nil picks the only present token.
    /// `includeAbsent` also considers removed tokens (for `token insert`).
    public func resolveToken(_ labelOrID: String?, includeAbsent: Bool = false) throws -> TokenRecord {
        let all = try store.tokens().filter { includeAbsent || $0.present }
        let choices = all.map(Self.describe)
        guard let name = labelOrID else {
            if all.isEmpty { throw TokensError.noTokens }
            guard all.count == 1 else { throw TokensError.ambiguousToken(nil, choices: choices) }
            return all[0]
        }
        if let id = TokenID(name), let t = all.first(where: { $0.tokenID == id }) { return t }
        for matches in [all.filter { $0.label == name }, all.filter { $0.serial == name }] where !matches.isEmpty {
            guard matches.count == 1 else { throw TokensError.ambiguousToken(name, choices: matches.map(Self.describe)) }
            return matches[0]
        }
        throw TokensError.unknownToken(name, choices: choices)
    }
}
