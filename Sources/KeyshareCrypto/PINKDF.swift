import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

/// The memory-hard KDF that turns a PIN into a key-wrapping key. Its cost is
/// stored beside each wrap so it can be raised later without breaking old
/// tokens. scrypt, because a PIN is low-entropy and GPUs are cheap.
public struct PINKDFParameters: Sendable, Equatable, Hashable {
    public static let algorithmName = "scrypt"
    /// log2 of scrypt's N. 15 (32 MiB, about 80 ms here) is the default; the
    /// `KEYSHARE_KDF_LOG2N` environment variable may lower it (not below 10)
    /// for throwaway stores, and is recorded with each wrap.
    public var log2N: Int
    public var r: Int
    public var p: Int
    public var salt: [UInt8]

    public init(log2N: Int, r: Int = 8, p: Int = 1, salt: [UInt8]) {
        self.log2N = log2N
        self.r = r
        self.p = p
        self.salt = salt
    }

    public static let defaultLog2N = 15
    public static let minimumLog2N = 10

    /// New parameters with a fresh random salt at the configured cost.
    public static func fresh(log2N: Int? = nil) throws -> PINKDFParameters {
        let cost = max(minimumLog2N, min(20, log2N ?? configuredLog2N()))
        return PINKDFParameters(log2N: cost, salt: try SecureRandom.bytes(16))
    }

    public static func configuredLog2N() -> Int {
        if let v = getenv("KEYSHARE_KDF_LOG2N"), let n = Int(String(cString: v)) {
            return max(minimumLog2N, min(20, n))
        }
        return defaultLog2N
    }

    /// Compact text form stored beside a wrap: `scrypt$N$r$p`.
    public var costDescription: String { "\(Self.algorithmName)$\(log2N)$\(r)$\(p)" }
}

public enum PINKDF {
    public static func deriveKey(pin: [UInt8], parameters: PINKDFParameters, length: Int = 32) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: length)
        let n = UInt64(1) << UInt64(parameters.log2N)
        let maxmem = UInt64(parameters.r) * 128 * n * 2 + (1 << 20)
        // An empty PIN still needs a valid pointer; append a NUL that the length excludes.
        let pinBytes = pin.map { CChar(bitPattern: $0) } + [0]
        let ok = pinBytes.withUnsafeBufferPointer { pinBuf in
            parameters.salt.withUnsafeBufferPointer { saltBuf in
                out.withUnsafeMutableBufferPointer { o in
                    EVP_PBE_scrypt_ex(
                        pinBuf.baseAddress, pin.count, saltBuf.baseAddress, saltBuf.count,
                        n, UInt64(parameters.r), UInt64(parameters.p), maxmem,
                        o.baseAddress, length, CryptoEngine.context, nil)
                }
            }
        }
        guard ok == 1 else { throw CryptoError.openssl("PIN key derivation") }
        return out
    }
}
