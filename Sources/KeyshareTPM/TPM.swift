#if canImport(Glibc)
import Glibc
#endif
import KeyshareCrypto
import TPMCore

/// The key kinds keyshare makes in a TPM. P-384 and RSA-3072 only where the
/// TPM offers them (`TPMConnection.supports`).
public enum TPMKeyKind: Int32, Sendable, CaseIterable {
    case p256 = 1, p384 = 2, rsa2048 = 3, rsa3072 = 4

    public var isRSA: Bool { self == .rsa2048 || self == .rsa3072 }
    /// Bytes of an EC coordinate or of an RSA modulus.
    public var size: Int {
        switch self {
        case .p256: 32
        case .p384: 48
        case .rsa2048: 256
        case .rsa3072: 384
        }
    }
}

/// The public part of a TPM key blob.
public enum TPMPublicKey: Sendable, Equatable {
    case ec(TPMKeyKind, x: [UInt8], y: [UInt8])
    case rsa(TPMKeyKind, modulus: [UInt8], exponent: [UInt8])

    public var kind: TPMKeyKind {
        switch self {
        case .ec(let k, _, _), .rsa(let k, _, _): k
        }
    }
}

public enum TPMDecryptScheme: Sendable, Equatable {
    case raw, pkcs1
    /// OAEP with the TPM hash algorithm ID (TPM_ALG_SHA256 = 0x000B ...), empty label.
    case oaep(hashAlgorithm: UInt16)
}

/// Where to find the TPM: `KEYSHARE_TCTI` (tpm2-tss TCTI syntax, as tpm2-tools'
/// TPM2TOOLS_TCTI), else the store's configured TCTI, else the kernel's
/// resource manager.
public enum TPMLocation {
    public static let defaultTCTI = "device:/dev/tpmrm0"

    public static func tcti(configured: String?) -> String {
        if let e = getenv("KEYSHARE_TCTI"), let s = String(validatingCString: e), !s.isEmpty { return s }
        if let c = configured, !c.isEmpty { return c }
        return defaultTCTI
    }
}

/// One ESAPI connection. A TPM without a resource manager (swtpm, /dev/tpm0)
/// serves one connection at a time and keeps transient objects across
/// connections, so callers hold a connection only for one operation
/// (`TPM.with`) and every call here flushes what it loaded.
public final class TPMConnection {
    let handle: OpaquePointer

    /// Connections of this process are serialised: the TPM serves one at a time anyway.
    static let processLock = Lock()

    init(tcti: String) throws {
        var h: OpaquePointer?
        let rc = ktpm_open(tcti, &h)
        guard rc == 0, let h else { throw TPMError(rc: rc == 0 ? 0x000A_000A : rc, operation: "connecting to \(tcti)", unreachable: true) }
        handle = h
    }

    deinit { ktpm_close(handle) }

    static func check(_ rc: UInt32, _ what: String) throws {
        guard rc == 0 else { throw TPMError(rc: rc, operation: what) }
    }

    private static let blobCapacity = 4096

    func blobCall(_ what: String, _ body: (UnsafeMutablePointer<UInt8>, Int, UnsafeMutablePointer<Int>) -> UInt32) throws -> [UInt8] {
        var len = 0
        var out = [UInt8](repeating: 0, count: Self.blobCapacity)
        let rc = out.withUnsafeMutableBufferPointer { b in body(b.baseAddress!, b.count, &len) }
        try Self.check(rc, what)
        return Array(out[..<len])
    }

    /// The endorsement key's public point: the same for this TPM until its endorsement seed changes.
    public func endorsementKeyPublic() throws -> [UInt8] {
        try blobCall("reading the endorsement key") { ktpm_ek_public(handle, $0, $1, $2) }
    }

    /// One TPM2_GetRandom: true when the TPM answers.
    public func probe() -> Bool { ktpm_probe(handle) == 0 }

    public func supports(_ kind: TPMKeyKind) -> Bool { ktpm_supports(handle, kind.rawValue) == 0 }

    /// A key created inside the TPM; its blob is safe to store (the private part is encrypted by this TPM).
    public func createKey(_ kind: TPMKeyKind, auth: [UInt8], noDA: Bool = false) throws -> [UInt8] {
        try blobCall("creating a key") { ktpm_create_key(handle, kind.rawValue, auth, auth.count, noDA ? 1 : 0, $0, $1, $2) }
    }

    /// TPM2_Import of an EC private key (d, x, y of the curve's size).
    public func importEC(_ kind: TPMKeyKind, d: [UInt8], x: [UInt8], y: [UInt8], auth: [UInt8], noDA: Bool = false) throws -> [UInt8] {
        guard x.count == y.count else { throw TPMError(rc: KTPM_RC_ARGUMENT, operation: "importing a key") }
        return try blobCall("importing a key") {
            ktpm_import_ec(handle, kind.rawValue, d, d.count, x, y, x.count, auth, auth.count, noDA ? 1 : 0, $0, $1, $2)
        }
    }

    /// TPM2_Import of an RSA private key: the modulus, the public exponent and one prime.
    public func importRSA(_ kind: TPMKeyKind, modulus: [UInt8], exponent: UInt32, prime: [UInt8], auth: [UInt8],
                          noDA: Bool = false) throws -> [UInt8] {
        try blobCall("importing a key") {
            ktpm_import_rsa(handle, kind.rawValue, modulus, modulus.count, exponent, prime, prime.count, auth, auth.count,
                            noDA ? 1 : 0, $0, $1, $2)
        }
    }

    /// r || s, each of the curve's size. `digest` must already be of the curve's size (`TPM.ecdsaInput`).
    public func signECDSA(blob: [UInt8], auth: [UInt8], digest: [UInt8]) throws -> [UInt8] {
        var r = [UInt8](repeating: 0, count: digest.count)
        var s = [UInt8](repeating: 0, count: digest.count)
        let rc = ktpm_sign_ecdsa(handle, blob, blob.count, auth, auth.count, digest, digest.count, &r, &s, digest.count)
        try Self.check(rc, "signing")
        return r + s
    }

    public func rsaDecrypt(blob: [UInt8], auth: [UInt8], scheme: TPMDecryptScheme, input: [UInt8]) throws -> [UInt8] {
        let (s, h): (Int32, UInt16) = switch scheme {
        case .raw: (Int32(KTPM_RSA_RAW), 0)
        case .pkcs1: (Int32(KTPM_RSA_PKCS1), 0)
        case .oaep(let alg): (Int32(KTPM_RSA_OAEP), alg)
        }
        var out = [UInt8](repeating: 0, count: 512)
        var len = 0
        let rc = ktpm_rsa_decrypt(handle, blob, blob.count, auth, auth.count, s, h, input, input.count, &out, out.count, &len)
        defer { out.withUnsafeMutableBytes { explicit_bzero($0.baseAddress!, $0.count) } }
        try Self.check(rc, "RSA decryption")
        return Array(out[..<len])
    }

    /// Seals `secret` to this TPM (and to the current SHA-256 values of `pcrs`, if any).
    public func seal(_ secret: [UInt8], auth: [UInt8] = [], noDA: Bool, pcrs: [Int] = []) throws -> [UInt8] {
        let mask = try Self.mask(pcrs)
        return try blobCall("sealing") { ktpm_seal(handle, secret, secret.count, auth, auth.count, noDA ? 1 : 0, mask, $0, $1, $2) }
    }

    public func unseal(_ blob: [UInt8], auth: [UInt8] = [], pcrs: [Int] = []) throws -> [UInt8] {
        let mask = try Self.mask(pcrs)
        var out = [UInt8](repeating: 0, count: 128)
        var len = 0
        let rc = ktpm_unseal(handle, blob, blob.count, auth, auth.count, mask, &out, out.count, &len)
        defer { out.withUnsafeMutableBytes { explicit_bzero($0.baseAddress!, $0.count) } }
        try Self.check(rc, "unsealing")
        return Array(out[..<len])
    }

    public func extendPCR(_ pcr: Int, digest: [UInt8]) throws {
        guard digest.count == 32 else { throw TPMError(rc: KTPM_RC_ARGUMENT, operation: "extending a PCR") }
        try Self.check(ktpm_pcr_extend(handle, Int32(pcr), digest), "extending PCR \(pcr)")
    }

    static func mask(_ pcrs: [Int]) throws -> UInt32 {
        var m: UInt32 = 0
        for p in pcrs {
            guard (0...23).contains(p) else { throw TPMError(rc: KTPM_RC_ARGUMENT, operation: "PCR \(p) is not 0-23") }
            m |= 1 << UInt32(p)
        }
        return m
    }
}

/// Where a TPM is and how its users take turns: a TPM without a resource
/// manager (swtpm, /dev/tpm0) interleaves the commands of several
/// connections, and 4 processes each loading the SRK and a key exhaust its
/// 3 transient slots (TPM_RC_OBJECT_MEMORY, measured). So every use holds an
/// exclusive flock on `lockFile` (the store's `tpm.lock`) besides this
/// process's own lock.
public struct TPMSite: Sendable, Equatable {
    public var tcti: String
    public var lockFile: String?

    public init(tcti: String, lockFile: String? = nil) {
        self.tcti = tcti
        self.lockFile = lockFile
    }
}

public enum TPM {
    /// Runs `body` on a fresh connection while holding this process's TPM lock
    /// and the site's lock file; the connection is closed after.
    public static func with<T>(_ site: TPMSite, _ body: (TPMConnection) throws -> T) throws -> T {
        try TPMConnection.processLock.withLock {
            var fd: Int32 = -1
            if let path = site.lockFile {
                fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
                if fd >= 0 { while flock(fd, LOCK_EX) != 0 && errno == EINTR {} }
            }
            defer { if fd >= 0 { close(fd) } }
            let c = try TPMConnection(tcti: site.tcti)
            return try body(c)
        }
    }

    public static func with<T>(tcti: String, _ body: (TPMConnection) throws -> T) throws -> T {
        try with(TPMSite(tcti: tcti), body)
    }

    /// Whether the TPM answers one TPM2_GetRandom (a round trip: cheap enough
    /// for a slot list). A TPM token whose TPM is not there is "not present".
    public static func canConnect(_ site: TPMSite) -> Bool {
        guard let c = try? TPMConnection(tcti: site.tcti) else { return false }
        return c.probe()
    }

    /// Whether a TPM answers at `tcti` (it creates nothing).
    public static func isReachable(tcti: String) -> Bool {
        (try? with(tcti: tcti) { try $0.endorsementKeyPublic() }) != nil
    }

    /// The public part of a key blob, read without a TPM.
    public static func publicKey(ofBlob blob: [UInt8]) throws -> TPMPublicKey {
        var kind: Int32 = 0
        var a = [UInt8](repeating: 0, count: 512), b = [UInt8](repeating: 0, count: 512)
        var alen = 0, blen = 0
        let rc = ktpm_public_info(blob, blob.count, &kind, &a, a.count, &alen, &b, b.count, &blen)
        guard rc == 0, let k = TPMKeyKind(rawValue: kind) else { throw TPMError(rc: rc == 0 ? KTPM_RC_BAD_BLOB : rc, operation: "reading a key blob") }
        return k.isRSA ? .rsa(k, modulus: Array(a[..<alen]), exponent: Array(b[..<blen]))
            : .ec(k, x: Array(a[..<alen]), y: Array(b[..<blen]))
    }

    /// An ECDSA input of exactly the curve's size with the same integer value
    /// ECDSA would use: a longer digest keeps its leftmost bytes (the curve
    /// orders here are whole bytes), a shorter one is left-padded with zeros.
    public static func ecdsaInput(_ digest: [UInt8], curveSize: Int) -> [UInt8] {
        if digest.count >= curveSize { return Array(digest.prefix(curveSize)) }
        return [UInt8](repeating: 0, count: curveSize - digest.count) + digest
    }
}
