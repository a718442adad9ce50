import CPKCS11
import KeyshareCrypto

extension Runtime {
    public func generateRandom(session h: CK_SESSION_HANDLE, count: Int) throws -> [UInt8] {
        _ = try session(h)
        return try SecureRandom.bytes(count)
    }

    /// Mixed into OpenSSL's pool, never replacing it: a caller's seed cannot
    /// make the output predictable.
    public func seedRandom(session h: CK_SESSION_HANDLE, seed: [UInt8]) throws {
        _ = try session(h)
        SecureRandom.seed(seed)
    }
}
