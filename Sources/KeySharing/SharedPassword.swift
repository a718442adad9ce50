import Keychain
import KeyshareCrypto

/// The one export password every shared PKCS #12 uses (spec §5). It lives in
/// the keychain so the password service can hand it to allowed consumers, and
/// is reused so a consumer that fetched it once can open every later file.
public enum SharedPassword {
    public static let service = "PurebredKeySharing"
    public static let account = "PurebredKeySharing"
    public static let length = 32
    /// a-z A-Z 0-9 and the 29 punctuation characters of the reference: 91 in all.
    public static let alphabet: [Character] = Array(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!@#$%^&*()_+-=[]{};':,./<>?`~")

    /// A fresh password drawn uniformly from the alphabet (rejection sampling, no modulo bias).
    public static func generate() throws -> String {
        var chars: [Character] = []
        chars.reserveCapacity(length)
        for _ in 0..<length {
            chars.append(alphabet[Int(try SecureRandom.uniform(below: UInt32(alphabet.count)))])
        }
        return String(chars)
    }

    /// The stored password, or nil when none has been made yet.
    public static func current(store: KeychainStore, token: TokenID, key: TokenKey) throws -> String? {
        guard let bytes = try store.genericPassword(service: service, account: account, token: token, key: key) else {
            return nil
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The stored password, made and saved first if missing. If saving fails the
    /// error propagates: an unsaved password would be one no consumer could fetch
    /// (the reference's bug, spec §5).
    public static func obtain(store: KeychainStore, token: TokenID, key: TokenKey) throws -> String {
        if let existing = try current(store: store, token: token, key: key) { return existing }
        let fresh = try generate()
        try store.setGenericPassword(service: service, account: account, value: Array(fresh.utf8), token: token, key: key)
        guard let saved = try current(store: store, token: token, key: key), saved == fresh else {
            throw KeychainError.storage("the shared export password could not be saved")
        }
        return fresh
    }

    /// Rotation: the next export makes a new one.
    public static func rotate(store: KeychainStore, token: TokenID, key: TokenKey) throws -> String {
        try store.transaction {
            _ = try store.deleteGenericPassword(service: service, account: account, token: token, key: key)
            return try obtain(store: store, token: token, key: key)
        }
    }
}
