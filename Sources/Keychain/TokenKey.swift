#if canImport(Glibc)
import Glibc
#endif
import KeyshareCrypto
import KeyshareTPM

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

    /// The authorization of this token's keys inside the TPM (docs/tpm.md).
    /// It derives from the token key, which only the TPM releases, and only
    /// for the right PIN (a TPM token's key is sealed under a PIN-derived
    /// authorization): the store holds nothing to test a PIN against.
    public func tpmObjectAuth() throws -> [UInt8] {
        try HMAC.mac(.sha256, key: keyBytes, data: Array("keyshare tpm object auth v1|\(tokenID.description)".utf8))
    }
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

    /// The cost string of a TPM token's wraps: the token key is sealed in the
    /// TPM under a PIN-derived authorization instead of an scrypt KEK.
    static let tpmSealCost = "tpm-seal"

    /// `binding`: the secret a device-bound token keeps sealed in the TPM; the
    /// KEK is then HMAC(binding, scrypt(PIN)), so the PIN alone opens nothing.
    static func make(tokenKey: [UInt8], pin: [UInt8], token: TokenID, role: TokenKey.Role, log2N: Int?,
                     binding: [UInt8]? = nil) throws -> PINWrap {
        let params = try PINKDFParameters.fresh(log2N: log2N)
        var kek = try kek(pin: pin, parameters: params, binding: binding)
        defer { wipe(&kek) }
        let wrapped = try AESGCM.seal(key: kek, plaintext: tokenKey, aad: aad(token, role))
        return PINWrap(salt: params.salt, cost: params.costDescription, wrapped: wrapped)
    }

    static func kek(pin: [UInt8], parameters: PINKDFParameters, binding: [UInt8]?) throws -> [UInt8] {
        var kek = try PINKDF.deriveKey(pin: pin, parameters: parameters)
        guard let binding else { return kek }
        defer { wipe(&kek) }
        return try HMAC.mac(.sha256, key: binding, data: kek)
    }

    /// A TPM token's wrap: the token key sealed in the TPM, its authorization derived from the PIN.
    static func makeTPM(tokenKey: [UInt8], pin: [UInt8], token: TokenID, role: TokenKey.Role, tcti: TPMSite) throws -> PINWrap {
        let blob = try TPMErrors.map(token) {
            try TPM.with(tcti) { try $0.seal(tokenKey, auth: tpmAuth(pin: pin, token: token, role: role), noDA: false) }
        }
        return PINWrap(salt: [], cost: tpmSealCost, wrapped: blob)
    }

    /// Cheap on purpose: the TPM, not a KDF, limits guesses (dictionary-attack protection).
    static func tpmAuth(pin: [UInt8], token: TokenID, role: TokenKey.Role) -> [UInt8] {
        DigestAlgorithm.sha256.hash(Array("keyshare tpm pin v1|\(role == .user ? "user" : "so")|\(token.description)|".utf8) + pin)
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

    /// nil when the PIN is wrong (the GCM tag does not verify, or the TPM refuses the authorization).
    func unwrap(pin: [UInt8], token: TokenID, role: TokenKey.Role, binding: [UInt8]? = nil, tcti: TPMSite = TPMSite(tcti: "")) throws -> [UInt8]? {
        if cost == Self.tpmSealCost {
            do {
                return try TPM.with(tcti) { try $0.unseal(wrapped, auth: Self.tpmAuth(pin: pin, token: token, role: role)) }
            } catch let e as TPMError where e.kind == .authFailed {
                return nil
            } catch let e as TPMError {
                throw TPMErrors.keychainError(e, token)
            }
        }
        var kek = try Self.kek(pin: pin, parameters: Self.parameters(cost: cost, salt: salt), binding: binding)
        defer { wipe(&kek) }
        do {
            return try AESGCM.open(key: kek, sealed: wrapped, aad: Self.aad(token, role))
        } catch let e as CryptoError where e.kind == .authenticationFailed {
            return nil
        }
    }
}
