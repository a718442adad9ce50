/// `<driver class>:<instance>`, as CryptoTokenKit names tokens. The driver
/// class may itself contain no colon; the instance may (a PKCS #11 URI piece).
public struct TokenID: Hashable, Sendable, CustomStringConvertible, Comparable {
    public let driverClass: String
    public let instance: String

    public init?(_ string: String) {
        guard let colon = string.firstIndex(of: ":") else { return nil }
        let cls = String(string[..<colon])
        let inst = String(string[string.index(after: colon)...])
        self.init(driverClass: cls, instance: inst)
    }

    public init?(driverClass: String, instance: String) {
        guard !driverClass.isEmpty, !instance.isEmpty, !driverClass.contains(":"),
              !driverClass.utf8.contains(where: { $0 < 0x21 || $0 == 0x7F }) else { return nil }
        self.driverClass = driverClass
        self.instance = instance
    }

    public var description: String { "\(driverClass):\(instance)" }

    /// Hashes the instance only; equality still compares both parts. The
    /// module looks a token up by its ID in a Dictionary (login table,
    /// object entries) on every key-taking call, and both parts are heap
    /// strings (over 15 bytes), so hashing the driver class too (the same
    /// few values for every token) doubled the SipHash work for no
    /// spread (issue 13, per-call overhead).
    public func hash(into hasher: inout Hasher) { hasher.combine(instance) }

    public static func < (a: TokenID, b: TokenID) -> Bool { a.description < b.description }
}
