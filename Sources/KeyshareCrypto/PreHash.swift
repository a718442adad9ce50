import COpenSSL

/// The hash of HashML-DSA (FIPS 204 §5.4) and HashSLH-DSA (FIPS 205 §10.2): PH(M) and the DER OID
/// that enters M' = 1 || |ctx| || ctx || OID || PH(M). OpenSSL 3.5 has no pre-hash mode; its
/// "internal" message encoding signs M' as given, which is how FIPS 204 Algorithm 4 / FIPS 205
/// Algorithm 23 are built here (EVP_SIGNATURE-ML-DSA(7): "Pre hash encoding externally").
public enum PreHash: Sendable, Hashable {
    case digest(DigestAlgorithm)
    /// SHAKE128 with 256 output bits, SHAKE256 with 512 (FIPS 204 §5.4.1).
    case shake128, shake256

    /// The hashes FIPS 204 / 205 allow (SHA-1 is not among them).
    public static let all: [PreHash] = [
        .digest(.sha224), .digest(.sha256), .digest(.sha384), .digest(.sha512), .digest(.sha512_224),
        .digest(.sha512_256), .digest(.sha3_224), .digest(.sha3_256), .digest(.sha3_384), .digest(.sha3_512),
        .shake128, .shake256,
    ]

    /// The last byte of the NIST hash OID 2.16.840.1.101.3.4.2.x.
    var oidArc: UInt8? {
        switch self {
        case .digest(.sha256): 1
        case .digest(.sha384): 2
        case .digest(.sha512): 3
        case .digest(.sha224): 4
        case .digest(.sha512_224): 5
        case .digest(.sha512_256): 6
        case .digest(.sha3_224): 7
        case .digest(.sha3_256): 8
        case .digest(.sha3_384): 9
        case .digest(.sha3_512): 10
        case .shake128: 11
        case .shake256: 12
        case .digest(.sha1): nil
        }
    }

    /// DER of the OID (06 09 60 86 48 01 65 03 04 02 x).
    var oidDER: [UInt8] { [0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, oidArc ?? 0] }

    public var outputSize: Int {
        switch self {
        case .digest(let d): d.outputSize
        case .shake128: 32
        case .shake256: 64
        }
    }

    /// PH(M).
    public func hash(_ message: [UInt8]) throws -> [UInt8] {
        switch self {
        case .digest(let d): return d.hash(message)
        case .shake128, .shake256:
            let name = self == .shake128 ? "SHAKE128" : "SHAKE256"
            guard let md = EVP_MD_fetch(CryptoEngine.context, name, nil), let ctx = EVP_MD_CTX_new() else { throw CryptoError.openssl(name) }
            defer { EVP_MD_free(md); EVP_MD_CTX_free(ctx) }
            var out = [UInt8](repeating: 0, count: outputSize)
            guard EVP_DigestInit_ex(ctx, md, nil) == 1, EVP_DigestUpdate(ctx, message, message.count) == 1,
                  EVP_DigestFinalXOF(ctx, &out, out.count) == 1 else { throw CryptoError.openssl(name) }
            return out
        }
    }

    /// M' for a digest already computed (`digest` = PH(M)).
    func encoded(digest: [UInt8], context: [UInt8], op: String) throws -> [UInt8] {
        guard oidArc != nil else { throw CryptoError(.invalidInput, op, reason: "SHA-1 is not a HashML-DSA/HashSLH-DSA hash") }
        guard digest.count == outputSize else {
            throw CryptoError(.invalidInput, op, reason: "the digest must be \(outputSize) bytes")
        }
        guard context.count <= 255 else { throw CryptoError(.invalidInput, op, reason: "context longer than 255 bytes") }
        return [1, UInt8(context.count)] + context + oidDER + digest
    }
}

extension MLDSAKey {
    /// HashML-DSA.Sign (FIPS 204 Algorithm 4) over `digest` = PH(M), computed by the caller.
    /// `testEntropy` (32 bytes) replaces rnd: for known-answer tests only.
    public func sign(digest: [UInt8], preHash: PreHash, context: [UInt8] = [], deterministic: Bool = false,
                     testEntropy: [UInt8]? = nil) throws -> [UInt8] {
        let m = try preHash.encoded(digest: digest, context: context, op: "\(parameterSet.name) HashML-DSA sign")
        return try sign(m, deterministic: deterministic, encoding: .internal, testEntropy: testEntropy)
    }

    /// HashML-DSA.Verify (FIPS 204 Algorithm 5); false for any invalid signature or digest length.
    public func verify(_ signature: [UInt8], digest: [UInt8], preHash: PreHash, context: [UInt8] = []) throws -> Bool {
        guard digest.count == preHash.outputSize, context.count <= 255 else { return false }
        let m = try preHash.encoded(digest: digest, context: context, op: "\(parameterSet.name) HashML-DSA verify")
        return try verify(signature, message: m, encoding: .internal)
    }
}

extension SLHDSAKey {
    /// HashSLH-DSA sign (FIPS 205 Algorithm 23) over `digest` = PH(M). `testEntropy` (n bytes)
    /// replaces opt_rand: for known-answer tests only (ACVP's additionalRandomness).
    public func sign(digest: [UInt8], preHash: PreHash, context: [UInt8] = [], deterministic: Bool = false,
                     testEntropy: [UInt8]? = nil) throws -> [UInt8] {
        let m = try preHash.encoded(digest: digest, context: context, op: "\(parameterSet.name) HashSLH-DSA sign")
        return try sign(m, deterministic: deterministic, encoding: .internal, testEntropy: testEntropy)
    }

    public func verify(_ signature: [UInt8], digest: [UInt8], preHash: PreHash, context: [UInt8] = []) throws -> Bool {
        guard digest.count == preHash.outputSize, context.count <= 255 else { return false }
        let m = try preHash.encoded(digest: digest, context: context, op: "\(parameterSet.name) HashSLH-DSA verify")
        return try verify(signature, message: m, encoding: .internal)
    }
}
