import COpenSSL

// SLH-DSA (FIPS 205) over OpenSSL 3.5's EVP interface (issue 18), the same plumbing as ML-DSA
// (PQ in PostQuantum.swift). With `make OPENSSL=system` (3.0) every operation fails with
// `.unsupported`.

/// The twelve SLH-DSA parameter sets, numbered as PKCS #11 3.2 numbers CKA_PARAMETER_SET
/// (CKP_SLH_DSA_SHA2_128S = 1, CKP_SLH_DSA_SHAKE_128S = 2, … CKP_SLH_DSA_SHAKE_256F = 12).
/// OpenSSL 3.5 has all twelve.
public enum SLHDSAParameterSet: UInt, Sendable, CaseIterable {
    case sha2_128s = 1, shake_128s, sha2_128f, shake_128f
    case sha2_192s, shake_192s, sha2_192f, shake_192f
    case sha2_256s, shake_256s, sha2_256f, shake_256f

    /// OpenSSL's (and FIPS 205's) name, "SLH-DSA-SHA2-128s".
    public var name: String {
        let i = Int(rawValue) - 1
        let hash = i % 2 == 0 ? "SHA2" : "SHAKE"
        let level = [128, 192, 256][i / 4]
        let variant = (i / 2) % 2 == 0 ? "s" : "f"
        return "SLH-DSA-\(hash)-\(level)\(variant)"
    }

    public init?(name: String) {
        guard let s = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = s
    }

    /// FIPS 205 table 2: n (the security parameter in bytes); |pk| = 2n, |sk| = 4n.
    public var n: Int { [16, 24, 32][(Int(rawValue) - 1) / 4] }
    public var publicKeyLength: Int { 2 * n }
    public var privateKeyLength: Int { 4 * n }
    /// |SIG| of FIPS 205 table 2 (small "s" and fast "f" variants).
    public var signatureLength: Int {
        let i = Int(rawValue) - 1
        let small = (i / 2) % 2 == 0
        switch n {
        case 16: return small ? 7_856 : 17_088
        case 24: return small ? 16_224 : 35_664
        default: return small ? 29_792 : 49_856
        }
    }
}

/// One SLH-DSA key (private, or public only), immutable once made.
public final class SLHDSAKey: @unchecked Sendable {
    let pkey: OpaquePointer
    public let parameterSet: SLHDSAParameterSet
    public let hasPrivateKey: Bool

    init(owning pkey: OpaquePointer, _ set: SLHDSAParameterSet, privateKey: Bool) {
        self.pkey = pkey
        self.parameterSet = set
        self.hasPrivateKey = privateKey
    }

    deinit { EVP_PKEY_free(pkey) }

    /// A new key pair; from `seed` = SK.seed || SK.prf || PK.seed (FIPS 205 Algorithm 18's inputs, 3n
    /// bytes) when given, so the same seed gives the same key.
    public static func generate(_ set: SLHDSAParameterSet, seed: [UInt8]? = nil) throws -> SLHDSAKey {
        if let seed, seed.count != 3 * set.n {
            throw CryptoError(.invalidInput, "\(set.name) seed", reason: "must be \(3 * set.n) bytes")
        }
        let pkey = try PQ.generate(set.name, seed: seed, op: "\(set.name) key generation")
        return SLHDSAKey(owning: pkey, set, privateKey: true)
    }

    /// From the FIPS 205 private key SK.seed || SK.prf || PK.seed || PK.root (4n bytes).
    public convenience init(privateKey sk: [UInt8], _ set: SLHDSAParameterSet) throws {
        self.init(owning: try PQ.importKey(set.name, "priv", sk, length: set.privateKeyLength, what: "private key"), set, privateKey: true)
    }

    /// From the FIPS 205 public key PK.seed || PK.root (2n bytes).
    public convenience init(publicKey pk: [UInt8], _ set: SLHDSAParameterSet) throws {
        self.init(owning: try PQ.importKey(set.name, "pub", pk, length: set.publicKeyLength, what: "public key"), set, privateKey: false)
    }

    /// The encoded public key (CKA_VALUE of the public key object).
    public func publicKeyBytes() throws -> [UInt8] {
        try PQ.publicBytes(pkey, parameterSet.name)
    }

    /// The encoded private key. Callers keep it sealed; it never leaves through the module.
    public func privateKeyBytes() throws -> [UInt8] {
        try PQ.privateBytes(pkey, parameterSet.name, available: hasPrivateKey)
    }

    /// Signs `message` (FIPS 205 slh_sign, or slh_sign_internal with `.internal`). `context` is at most
    /// 255 bytes; `deterministic` uses opt_rand = PK.seed; `testEntropy` (n bytes) replaces opt_rand:
    /// for known-answer tests only.
    public func sign(_ message: [UInt8], context: [UInt8] = [], deterministic: Bool = false,
                     encoding: MLDSAMessageEncoding = .pure, testEntropy: [UInt8]? = nil) throws -> [UInt8] {
        guard hasPrivateKey else { throw CryptoError(.noPrivateKey, "\(parameterSet.name) sign", reason: "public key only") }
        let op = "\(parameterSet.name) sign"
        let b = try PQ.signatureParams(context: context, deterministic: deterministic, encoding: encoding,
                                       testEntropy: testEntropy, entropyLength: parameterSet.n, op: op)
        return try PQ.sign(pkey, message, b, op: op)
    }

    /// True when `signature` is valid for `message` and `context`; false for any invalid signature.
    public func verify(_ signature: [UInt8], message: [UInt8], context: [UInt8] = [],
                       encoding: MLDSAMessageEncoding = .pure) throws -> Bool {
        let op = "\(parameterSet.name) verify"
        guard signature.count == parameterSet.signatureLength else { return false }
        let b = try PQ.signatureParams(context: context, deterministic: false, encoding: encoding, testEntropy: nil, op: op)
        return try PQ.verify(pkey, signature, message, b, op: op)
    }
}

extension PQ {
    /// EVP_DigestSign with the signature parameters in `b` (ML-DSA and SLH-DSA alike).
    static func sign(_ pkey: OpaquePointer, _ message: [UInt8], _ b: ParamBuilder, op: String) throws -> [UInt8] {
        let params = try b.params(op)
        defer { OSSL_PARAM_free(params) }
        guard let mctx = EVP_MD_CTX_new() else { throw CryptoError.openssl(op) }
        defer { EVP_MD_CTX_free(mctx) }
        guard EVP_DigestSignInit_ex(mctx, nil, nil, CryptoEngine.context, nil, pkey, params) == 1 else { throw CryptoError.openssl(op) }
        var len = 0
        guard EVP_DigestSign(mctx, nil, &len, message, message.count) == 1, len > 0 else { throw CryptoError.openssl(op) }
        var sig = [UInt8](repeating: 0, count: len)
        guard EVP_DigestSign(mctx, &sig, &len, message, message.count) == 1 else { throw CryptoError.openssl(op) }
        return Array(sig[0..<len])
    }

    static func verify(_ pkey: OpaquePointer, _ signature: [UInt8], _ message: [UInt8], _ b: ParamBuilder,
                       op: String) throws -> Bool {
        let params = try b.params(op)
        defer { OSSL_PARAM_free(params) }
        guard let mctx = EVP_MD_CTX_new() else { throw CryptoError.openssl(op) }
        defer { EVP_MD_CTX_free(mctx) }
        guard EVP_DigestVerifyInit_ex(mctx, nil, nil, CryptoEngine.context, nil, pkey, params) == 1 else { throw CryptoError.openssl(op) }
        let rc = EVP_DigestVerify(mctx, signature, signature.count, message, message.count)
        CryptoError.clearQueue()
        return rc == 1
    }
}
