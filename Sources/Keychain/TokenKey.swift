#if canImport(Glibc)
import Glibc
#endif
import KeyshareCrypto

/// A token's unwrapped 256-bit key, held only by a logged-in caller. Opaque so
/// it cannot be logged or compared by value; its bytes live in a buffer of its
/// own that is zeroised on deinit (a Swift array could leave copies behind),
/// in locked memory when the process started it (LockedMemory: the agent).
public final class TokenKey: @unchecked Sendable {
    public enum Role: Sendable, Equatable { case user, securityOfficer }

    public let tokenID: TokenID
    /// Which PIN unlocked it: only the SO may initialise the user PIN.
    public let role: Role
    private let storage: UnsafeMutableBufferPointer<UInt8>
    private let indexStorage: UnsafeMutableBufferPointer<UInt8>

    init(tokenID: TokenID, role: Role, bytes: [UInt8]) throws {
        precondition(bytes.count == AESGCM.keySize)
        self.tokenID = tokenID
        self.role = role
        // A separate key for the lookup index, so index digests reveal nothing
        // about the encryption key and cannot be used as an oracle for it.
        // (Computed first: a throw after an allocation would leak it unzeroed.)
        var ik = try HMAC.mac(.sha256, key: bytes, data: Array("keyshare attribute index v1".utf8))
        defer { wipe(&ik) }
        storage = LockedMemory.allocate(bytes.count)
        _ = storage.initialize(from: bytes)
        indexStorage = LockedMemory.allocate(ik.count)
        _ = indexStorage.initialize(from: ik)
    }

    deinit {
        // Zeroed (OPENSSL_cleanse) and freed.
        LockedMemory.free(storage)
        LockedMemory.free(indexStorage)
    }

    var keyBytes: [UInt8] { Array(storage) }
    var indexKey: [UInt8] { Array(indexStorage) }
}

/// Zeroes a transient copy of key material before it is released.
func wipe(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { b in
        if let base = b.baseAddress { explicit_bzero(base, b.count) }
    }
}

/// How the token key is stored under a PIN: scrypt(PIN, salt) → AES-256-GCM.
/// The AAD binds a wrap to its token and role, so the SO wrap cannot be
/// pasted over the user wrap (or another token's) to bypass a PIN.
struct PINWrap {
    var salt: [UInt8]
    var cost: String
    var wrapped: [UInt8]

    static func aad(_ token: TokenID, _ role: TokenKey.Role) -> [UInt8] {
        Array("keyshare token key v1|\(role == .user ? "user" : "so")|\(token.description)".utf8)
    }

    static func make(tokenKey: [UInt8], pin: [UInt8], token: TokenID, role: TokenKey.Role, log2N: Int?) throws -> PINWrap {
        let params = try PINKDFParameters.fresh(log2N: log2N)
        var kek = try PINKDF.deriveKey(pin: pin, parameters: params)
        defer { wipe(&kek) }
        let wrapped = try AESGCM.seal(key: kek, plaintext: tokenKey, aad: aad(token, role))
        return PINWrap(salt: params.salt, cost: params.costDescription, wrapped: wrapped)
    }

    static func parameters(cost: String, salt: [UInt8]) throws -> PINKDFParameters {
        let parts = cost.split(separator: "$")
        guard parts.count == 4, parts[0] == Substring(PINKDFParameters.algorithmName),
              let n = Int(parts[1]), let r = Int(parts[2]), let p = Int(parts[3]),
              (1...30).contains(n), r > 0, p > 0 else {
            throw KeychainError.storage("unknown PIN KDF parameters \"\(cost)\"")
        }
        return PINKDFParameters(log2N: n, r: r, p: p, salt: salt)
    }

    /// nil when the PIN is wrong (the GCM tag does not verify).
    func unwrap(pin: [UInt8], token: TokenID, role: TokenKey.Role) throws -> [UInt8]? {
        var kek = try PINKDF.deriveKey(pin: pin, parameters: Self.parameters(cost: cost, salt: salt))
        defer { wipe(&kek) }
        do {
            return try AESGCM.open(key: kek, sealed: wrapped, aad: Self.aad(token, role))
        } catch let e as CryptoError where e.kind == .authenticationFailed {
            return nil
        }
    }
}
