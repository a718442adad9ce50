import COpenSSL
import Synchronization

// ML-DSA (FIPS 204) and ML-KEM (FIPS 203) over OpenSSL 3.5's EVP interface (issue 18). Only
// EVP calls that OpenSSL 3.0 also declares are used, so a `make OPENSSL=system` build on
// Debian 12 compiles; there every operation fails with `.unsupported` (the algorithms cannot be
// fetched) and `CryptoEngine.hasPostQuantum` is false.

/// ML-DSA parameter sets, numbered as PKCS #11 3.2 numbers CKA_PARAMETER_SET (CKP_ML_DSA_44 = 1).
public enum MLDSAParameterSet: UInt, Sendable, CaseIterable {
    case mlDSA44 = 1, mlDSA65 = 2, mlDSA87 = 3

    /// OpenSSL's (and FIPS 204's) name.
    public var name: String {
        switch self {
        case .mlDSA44: "ML-DSA-44"
        case .mlDSA65: "ML-DSA-65"
        case .mlDSA87: "ML-DSA-87"
        }
    }

    public init?(name: String) {
        guard let s = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = s
    }

    /// FIPS 204 table 2: |pk|, |sk|, |σ|.
    public var publicKeyLength: Int { [1312, 1952, 2592][Int(rawValue) - 1] }
    public var privateKeyLength: Int { [2560, 4032, 4896][Int(rawValue) - 1] }
    public var signatureLength: Int { [2420, 3309, 4627][Int(rawValue) - 1] }
}

/// ML-KEM parameter sets, numbered as PKCS #11 3.2 numbers CKA_PARAMETER_SET (CKP_ML_KEM_512 = 1).
public enum MLKEMParameterSet: UInt, Sendable, CaseIterable {
    case mlKEM512 = 1, mlKEM768 = 2, mlKEM1024 = 3

    public var name: String {
        switch self {
        case .mlKEM512: "ML-KEM-512"
        case .mlKEM768: "ML-KEM-768"
        case .mlKEM1024: "ML-KEM-1024"
        }
    }

    public init?(name: String) {
        guard let s = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = s
    }

    /// FIPS 203 table 3: |ek|, |dk|, |c|; the shared secret is always 32 bytes.
    public var encapsulationKeyLength: Int { [800, 1184, 1568][Int(rawValue) - 1] }
    public var decapsulationKeyLength: Int { [1632, 2400, 3168][Int(rawValue) - 1] }
    /// A switch, not an array literal: read on every C_EncapsulateKey / C_DecapsulateKey.
    public var ciphertextLength: Int {
        switch self {
        case .mlKEM512: 768
        case .mlKEM768: 1088
        case .mlKEM1024: 1568
        }
    }
    /// The longest ciphertext of any set (a stack buffer's size).
    public static let maxCiphertextLength = 1568
    public static let sharedSecretLength = 32
}

/// How the message reaches ML-DSA's internal signing (FIPS 204 §5.2 against Algorithm 7).
public enum MLDSAMessageEncoding: Sendable {
    /// ML-DSA.Sign: M' = 0 || |ctx| || ctx || M (what CKM_ML_DSA signs).
    case pure
    /// ML-DSA.Sign_internal on M' as given (ACVP's "internal" interface; the context must be empty).
    case `internal`
}

/// One ML-DSA key (private, or public only), immutable once made.
public final class MLDSAKey: @unchecked Sendable {
    let pkey: OpaquePointer
    public let parameterSet: MLDSAParameterSet
    public let hasPrivateKey: Bool

    init(owning pkey: OpaquePointer, _ set: MLDSAParameterSet, privateKey: Bool) {
        self.pkey = pkey
        self.parameterSet = set
        self.hasPrivateKey = privateKey
    }

    deinit { EVP_PKEY_free(pkey) }

    /// A new key pair; from `seed` (FIPS 204 ξ, 32 bytes) when given, so the same seed gives the same key.
    public static func generate(_ set: MLDSAParameterSet, seed: [UInt8]? = nil) throws -> MLDSAKey {
        if let seed, seed.count != 32 { throw CryptoError(.invalidInput, "ML-DSA seed", reason: "must be 32 bytes") }
        let pkey = try PQ.generate(set.name, seed: seed, op: "\(set.name) key generation")
        return MLDSAKey(owning: pkey, set, privateKey: true)
    }

    /// From the FIPS 204 encoded private key (sk); the public key is derived from it.
    public convenience init(privateKey sk: [UInt8], _ set: MLDSAParameterSet) throws {
        self.init(owning: try PQ.importKey(set.name, "priv", sk, length: set.privateKeyLength, what: "private key"), set, privateKey: true)
    }

    /// From the FIPS 204 encoded public key (pk).
    public convenience init(publicKey pk: [UInt8], _ set: MLDSAParameterSet) throws {
        self.init(owning: try PQ.importKey(set.name, "pub", pk, length: set.publicKeyLength, what: "public key"), set, privateKey: false)
    }

    /// The encoded public key (CKA_VALUE of the public key object).
    public func publicKeyBytes() throws -> [UInt8] {
        try PQ.publicBytes(pkey, parameterSet.name)
    }

    /// The encoded private key (sk). Callers keep it sealed; it never leaves through the module.
    public func privateKeyBytes() throws -> [UInt8] {
        try PQ.privateBytes(pkey, parameterSet.name, available: hasPrivateKey)
    }

    /// The 32-byte seed the key was generated from, when OpenSSL kept it (keys imported from sk have none).
    public func seed() -> [UInt8]? { PKeyInfo.octetParam(pkey, "seed") }

    /// Signs `message`. `context` (at most 255 bytes) is FIPS 204's ctx; `deterministic` uses rnd = 0^32
    /// (ACVP's deterministic tests), otherwise fresh randomness (the "hedged" variant, the default).
    /// `testEntropy` (32 bytes) replaces the randomness: for known-answer tests only.
    public func sign(_ message: [UInt8], context: [UInt8] = [], deterministic: Bool = false,
                     encoding: MLDSAMessageEncoding = .pure, testEntropy: [UInt8]? = nil) throws -> [UInt8] {
        guard hasPrivateKey else { throw CryptoError(.noPrivateKey, "\(parameterSet.name) sign", reason: "public key only") }
        let op = "\(parameterSet.name) sign"
        let b = try PQ.signatureParams(context: context, deterministic: deterministic, encoding: encoding,
                                       testEntropy: testEntropy, op: op)
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

    /// True when `signature` is valid for `message` and `context`; false for any invalid signature
    /// (wrong length included); throws only when the engine cannot verify at all.
    public func verify(_ signature: [UInt8], message: [UInt8], context: [UInt8] = [],
                       encoding: MLDSAMessageEncoding = .pure) throws -> Bool {
        let op = "\(parameterSet.name) verify"
        guard signature.count == parameterSet.signatureLength else { return false }
        let b = try PQ.signatureParams(context: context, deterministic: false, encoding: encoding, testEntropy: nil, op: op)
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

/// One ML-KEM key (decapsulation key, or encapsulation key only).
public final class MLKEMKey: @unchecked Sendable {
    let pkey: OpaquePointer
    public let parameterSet: MLKEMParameterSet
    public let hasPrivateKey: Bool

    /// One initialised context per direction, kept between calls (0: none). Making one
    /// (EVP_PKEY_CTX_new_from_pkey, then EVP_PKEY_encapsulate_init / _decapsulate_init: a KEM
    /// fetch and a name lookup) was ~6 K instructions per C_EncapsulateKey, a sixth of the
    /// module's own work (docs/benchmarks.md, "Module work per KEM call"). OpenSSL's ML-KEM
    /// context holds only the key and the operation and forgets test entropy after every call
    /// (providers/implementations/kem/ml_kem_kem.c allows "multiple encapsulations without again
    /// calling encapsulate_init()"), so one serves call after call. Taken with an atomic
    /// exchange: a concurrent caller finds the slot empty and makes its own, parked or freed
    /// after; a context whose call failed is freed, never parked.
    private let spareEncapsulation = Atomic<UInt>(0)
    private let spareDecapsulation = Atomic<UInt>(0)

    init(owning pkey: OpaquePointer, _ set: MLKEMParameterSet, privateKey: Bool) {
        self.pkey = pkey
        self.parameterSet = set
        self.hasPrivateKey = privateKey
    }

    deinit {
        for bits in [spareEncapsulation.exchange(0, ordering: .acquiring), spareDecapsulation.exchange(0, ordering: .acquiring)] {
            if let ctx = OpaquePointer(bitPattern: bits) { EVP_PKEY_CTX_free(ctx) }
        }
        EVP_PKEY_free(pkey)
    }

    /// An initialised context without parameters: the parked one, or a new one.
    private func context(decapsulating: Bool) throws -> OpaquePointer {
        let parked = decapsulating ? spareDecapsulation.exchange(0, ordering: .acquiring)
            : spareEncapsulation.exchange(0, ordering: .acquiring)
        if let ctx = OpaquePointer(bitPattern: parked) { return ctx }
        let what = decapsulating ? "decapsulate" : "encapsulate"
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(CryptoEngine.context, pkey, nil) else { throw CryptoError.openssl(op(what)) }
        guard (decapsulating ? EVP_PKEY_decapsulate_init(ctx, nil) : EVP_PKEY_encapsulate_init(ctx, nil)) == 1 else {
            EVP_PKEY_CTX_free(ctx)
            throw CryptoError.openssl(op(what))
        }
        return ctx
    }

    /// After a successful call: parked for the next one, or freed when another is parked already.
    private func park(_ ctx: OpaquePointer, decapsulating: Bool) {
        let bits = UInt(bitPattern: ctx)
        let parked = decapsulating ? spareDecapsulation.compareExchange(expected: 0, desired: bits, ordering: .releasing).exchanged
            : spareEncapsulation.compareExchange(expected: 0, desired: bits, ordering: .releasing).exchanged
        if !parked { EVP_PKEY_CTX_free(ctx) }
    }

    /// A new key pair; from `seed` = d || z (FIPS 203 Algorithm 19, 64 bytes) when given.
    public static func generate(_ set: MLKEMParameterSet, seed: [UInt8]? = nil) throws -> MLKEMKey {
        if let seed, seed.count != 64 { throw CryptoError(.invalidInput, "ML-KEM seed", reason: "must be 64 bytes (d || z)") }
        let pkey = try PQ.generate(set.name, seed: seed, op: "\(set.name) key generation")
        return MLKEMKey(owning: pkey, set, privateKey: true)
    }

    /// From the FIPS 203 decapsulation key (dk); OpenSSL checks its embedded hash H(ek).
    public convenience init(decapsulationKey dk: [UInt8], _ set: MLKEMParameterSet) throws {
        self.init(owning: try PQ.importKey(set.name, "priv", dk, length: set.decapsulationKeyLength, what: "decapsulation key"), set, privateKey: true)
    }

    /// From the FIPS 203 encapsulation key (ek); OpenSSL runs FIPS 203's modulus check.
    public convenience init(encapsulationKey ek: [UInt8], _ set: MLKEMParameterSet) throws {
        self.init(owning: try PQ.importKey(set.name, "pub", ek, length: set.encapsulationKeyLength, what: "encapsulation key"), set, privateKey: false)
    }

    public func encapsulationKeyBytes() throws -> [UInt8] {
        try PQ.publicBytes(pkey, parameterSet.name)
    }

    public func decapsulationKeyBytes() throws -> [UInt8] {
        try PQ.privateBytes(pkey, parameterSet.name, available: hasPrivateKey)
    }

    /// (ciphertext, 32-byte shared secret). `testEntropy` (FIPS 203's m, 32 bytes) replaces the
    /// randomness: for known-answer tests only.
    public func encapsulate(testEntropy: [UInt8]? = nil) throws -> (ciphertext: [UInt8], sharedSecret: [UInt8]) {
        var secret: [UInt8] = []
        let c = try [UInt8](unsafeUninitializedCapacity: parameterSet.ciphertextLength) { buf, n in
            secret = try encapsulate(into: UnsafeMutableRawBufferPointer(buf), secretLength: MLKEMParameterSet.sharedSecretLength,
                                     testEntropy: testEntropy)
            n = buf.count
        }
        return (c, secret)
    }

    /// One encapsulation written into `ciphertext` (exactly `parameterSet.ciphertextLength`
    /// bytes), returning the first `secretLength` (1...32) bytes of the shared secret: what
    /// C_EncapsulateKey keeps. Per call, no heap allocation but the returned secret: the full
    /// secret lives on the stack and is cleansed, and the ciphertext goes where the caller wants
    /// it. (A fresh 1,088-byte array per call is a "large" glibc request: each one ran
    /// malloc_consolidate over the small blocks the module had freed, about a fifth of the
    /// module's own time per C_EncapsulateKey; docs/benchmarks.md, "Module work per KEM call".)
    public func encapsulate(into ciphertext: UnsafeMutableRawBufferPointer, secretLength: Int,
                            testEntropy: [UInt8]? = nil) throws -> [UInt8] {
        // No error text built unless it fails, no parameter builder unless a test passes m, one
        // encapsulation into buffers of the sizes FIPS 203 fixes (OpenSSL refuses smaller ones).
        if let m = testEntropy, m.count != 32 { throw CryptoError(.invalidInput, op("encapsulate"), reason: "m must be 32 bytes") }
        guard ciphertext.count == parameterSet.ciphertextLength, let out = ciphertext.baseAddress,
              (1...MLKEMParameterSet.sharedSecretLength).contains(secretLength) else {
            throw CryptoError(.invalidInput, op("encapsulate"), reason: "wrong buffer sizes")
        }
        let ctx: OpaquePointer
        if let m = testEntropy {
            // A context of its own for the test's m, never parked.
            guard let c = EVP_PKEY_CTX_new_from_pkey(CryptoEngine.context, pkey, nil) else { throw CryptoError.openssl(op("encapsulate")) }
            ctx = c
            let b = try ParamBuilder()
            b.octets("ikme", m)
            let params = try b.params(op("encapsulate"))
            defer { OSSL_PARAM_free(params) }
            guard EVP_PKEY_encapsulate_init(ctx, params) == 1 else {
                EVP_PKEY_CTX_free(ctx)
                throw CryptoError.openssl(op("encapsulate"))
            }
        } else {
            ctx = try context(decapsulating: false)
        }
        var succeeded = false
        defer { if succeeded && testEntropy == nil { park(ctx, decapsulating: false) } else { EVP_PKEY_CTX_free(ctx) } }
        var s = InlineArray<32, UInt8>(repeating: 0)
        var span = s.mutableSpan
        return try span.withUnsafeMutableBytes { sbuf in
            defer { OPENSSL_cleanse(sbuf.baseAddress, sbuf.count) }
            var clen = ciphertext.count, slen = sbuf.count
            guard EVP_PKEY_encapsulate(ctx, out.assumingMemoryBound(to: UInt8.self), &clen,
                                       sbuf.baseAddress?.assumingMemoryBound(to: UInt8.self), &slen) == 1,
                  clen == ciphertext.count, slen == sbuf.count else {
                throw CryptoError.openssl(op("encapsulate"))
            }
            succeeded = true
            return Array(sbuf.prefix(secretLength))
        }
    }

    /// "ML-KEM-768 encapsulate": built only for an error.
    private func op(_ what: String) -> String { "\(parameterSet.name) \(what)" }

    /// The 32-byte shared secret; a ciphertext of the wrong length is an error, a wrong ciphertext of
    /// the right length gives FIPS 203's implicit-rejection secret.
    public func decapsulate(_ ciphertext: [UInt8]) throws -> [UInt8] {
        try ciphertext.withUnsafeBytes { try decapsulate($0, secretLength: MLKEMParameterSet.sharedSecretLength) }
    }

    /// The first `secretLength` (1...32) bytes of the shared secret of `ciphertext`, read in place
    /// (C_DecapsulateKey's hot path: the caller's buffer, not a copy; the full secret lives on the
    /// stack and is cleansed, as in `encapsulate(into:secretLength:)`).
    public func decapsulate(_ ciphertext: UnsafeRawBufferPointer, secretLength: Int) throws -> [UInt8] {
        guard hasPrivateKey else { throw CryptoError(.noPrivateKey, op("decapsulate"), reason: "encapsulation key only") }
        guard ciphertext.count == parameterSet.ciphertextLength, let input = ciphertext.baseAddress else {
            throw CryptoError(.invalidInput, op("decapsulate"), reason: "ciphertext must be \(parameterSet.ciphertextLength) bytes")
        }
        guard (1...MLKEMParameterSet.sharedSecretLength).contains(secretLength) else {
            throw CryptoError(.invalidInput, op("decapsulate"), reason: "secret length must be 1-32")
        }
        let ctx = try context(decapsulating: true)
        var succeeded = false
        defer { if succeeded { park(ctx, decapsulating: true) } else { EVP_PKEY_CTX_free(ctx) } }
        var s = InlineArray<32, UInt8>(repeating: 0)
        var span = s.mutableSpan
        return try span.withUnsafeMutableBytes { sbuf in
            defer { OPENSSL_cleanse(sbuf.baseAddress, sbuf.count) }
            // One call into a buffer of the secret's fixed size (as encapsulate).
            var slen = sbuf.count
            guard EVP_PKEY_decapsulate(ctx, sbuf.baseAddress?.assumingMemoryBound(to: UInt8.self), &slen,
                                       input.assumingMemoryBound(to: UInt8.self), ciphertext.count) == 1,
                  slen == sbuf.count else {
                throw CryptoError.openssl(op("decapsulate"))
            }
            succeeded = true
            return Array(sbuf.prefix(secretLength))
        }
    }
}

/// The EVP plumbing both families share.
enum PQ {
    /// A key of algorithm `name`, from `seed` when given.
    static func generate(_ name: String, seed: [UInt8]?, op: String) throws -> OpaquePointer {
        guard let ctx = EVP_PKEY_CTX_new_from_name(CryptoEngine.context, name, nil) else {
            throw CryptoError.openssl(op, kind: CryptoEngine.hasPostQuantum ? .openssl : .unsupported)
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_keygen_init(ctx) == 1 else { throw CryptoError.openssl(op) }
        if let seed {
            let b = try ParamBuilder()
            b.octets("seed", seed)
            let params = try b.params(op)
            defer { OSSL_PARAM_free(params) }
            guard EVP_PKEY_CTX_set_params(ctx, params) == 1 else { throw CryptoError.openssl(op, kind: .invalidInput) }
        }
        var key: OpaquePointer? = nil
        guard EVP_PKEY_generate(ctx, &key) == 1, let key else { throw CryptoError.openssl(op) }
        return key
    }

    static func fromData(_ name: String, _ param: String, _ value: [UInt8], selection: Int32) throws -> OpaquePointer {
        guard CryptoEngine.hasPostQuantum else {
            throw CryptoError(.unsupported, name, reason: "needs OpenSSL 3.5 (this is \(CryptoEngine.name))")
        }
        let b = try ParamBuilder()
        b.octets(param, value)
        return try b.makeKey(name, selection: selection, "\(name) key import")
    }

    /// A key from its FIPS encoding (`param` "priv": the whole key pair, "pub": the public key only),
    /// after checking its length: `what` names it in the error ("private key", "encapsulation key").
    static func importKey(_ name: String, _ param: String, _ value: [UInt8], length: Int, what: String) throws -> OpaquePointer {
        guard value.count == length else {
            throw CryptoError(.invalidInput, "\(name) \(what)", reason: "must be \(length) bytes")
        }
        let selection = param == "priv" ? ks_EVP_PKEY_KEYPAIR() : ks_EVP_PKEY_PUBLIC_KEY()
        return try fromData(name, param, value, selection: selection)
    }

    /// The encoded public key of `pkey`.
    static func publicBytes(_ pkey: OpaquePointer, _ name: String) throws -> [UInt8] {
        guard let v = PKeyInfo.octetParam(pkey, "pub") else { throw CryptoError.openssl("\(name) public key") }
        return v
    }

    /// The encoded private key of `pkey`, when the key has one.
    static func privateBytes(_ pkey: OpaquePointer, _ name: String, available: Bool) throws -> [UInt8] {
        guard available, let v = PKeyInfo.octetParam(pkey, "priv") else {
            throw CryptoError(.noPrivateKey, "\(name) private key", reason: "not available")
        }
        return v
    }

    static func signatureParams(context: [UInt8], deterministic: Bool, encoding: MLDSAMessageEncoding,
                                testEntropy: [UInt8]?, entropyLength: Int = 32, op: String) throws -> ParamBuilder {
        guard context.count <= 255 else { throw CryptoError(.invalidInput, op, reason: "context longer than 255 bytes") }
        if encoding == .internal && !context.isEmpty {
            throw CryptoError(.invalidInput, op, reason: "the internal interface takes no context")
        }
        if let e = testEntropy, e.count != entropyLength {
            throw CryptoError(.invalidInput, op, reason: "test entropy must be \(entropyLength) bytes")
        }
        let b = try ParamBuilder()
        if !context.isEmpty { b.octets("context-string", context) }
        b.int("message-encoding", encoding == .pure ? 1 : 0)
        if deterministic { b.int("deterministic", 1) }
        if let e = testEntropy { b.octets("test-entropy", e) }
        return b
    }
}
