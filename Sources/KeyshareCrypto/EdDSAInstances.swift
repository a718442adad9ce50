import COpenSSL

/// An RFC 8032 instance other than pure Ed25519 and Ed448 with the empty context: Ed25519ctx,
/// Ed25519ph, Ed448 with a context, Ed448ph (PKCS #11's CKM_EDDSA with CK_EDDSA_PARAMS, issue 29).
/// OpenSSL 3.2 and later select them with the signature parameters "instance" and
/// "context-string" (EVP_SIGNATURE-ED25519(7)); OpenSSL 3.0's EdDSA takes no parameters, so
/// `CryptoEngine.hasEdDSAInstances` says whether this engine can compute them at all.
///
/// The ph instances sign and verify the message itself: OpenSSL computes PH(M) (SHA-512 for
/// Ed25519ph, SHAKE256 to 64 bytes for Ed448ph), as RFC 8032 §5.1 and §5.2 define them and as the
/// RFC's §7.3 and §7.5 vectors are given.
public struct EdDSAInstance: Sendable, Hashable, CustomStringConvertible {
    public enum Variant: String, Sendable, Hashable {
        case ed25519ctx = "Ed25519ctx"
        case ed25519ph = "Ed25519ph"
        case ed448 = "Ed448"
        case ed448ph = "Ed448ph"
    }

    public let variant: Variant
    public let context: [UInt8]

    /// RFC 8032: a context is at most 255 bytes, and Ed25519ctx's is never empty (§5.1: "Ed25519ctx
    /// SHOULD NOT be used with an empty context"; OpenSSL refuses it, as keyshare does).
    public init(_ variant: Variant, context: [UInt8]) throws {
        guard context.count <= 255 else {
            throw CryptoError(.invalidInput, "\(variant.rawValue)", reason: "a context is at most 255 bytes")
        }
        guard variant != .ed25519ctx || !context.isEmpty else {
            throw CryptoError(.invalidInput, "Ed25519ctx", reason: "RFC 8032 Ed25519ctx needs a non-empty context")
        }
        self.variant = variant
        self.context = context
    }

    public var keyType: KeyType {
        switch variant {
        case .ed25519ctx, .ed25519ph: .ed25519
        case .ed448, .ed448ph: .ed448
        }
    }

    public var description: String { "\(variant.rawValue) (context of \(context.count) bytes)" }

    /// Runs `body` with the OSSL_PARAM array naming this instance (and its context, if any).
    func withParameters<T>(_ body: (UnsafePointer<OSSL_PARAM>) throws -> T) rethrows -> T {
        try variant.rawValue.withCString { name in
            try "instance".withCString { instanceKey in
                try "context-string".withCString { contextKey in
                    var ctx = context
                    return try ctx.withUnsafeMutableBytes { c in
                        var params = [OSSL_PARAM_construct_utf8_string(instanceKey, UnsafeMutablePointer(mutating: name), 0)]
                        if !c.isEmpty { params.append(OSSL_PARAM_construct_octet_string(contextKey, c.baseAddress, c.count)) }
                        params.append(OSSL_PARAM_construct_end())
                        return try params.withUnsafeBufferPointer { try body($0.baseAddress!) }
                    }
                }
            }
        }
    }
}

extension CryptoEngine {
    /// OpenSSL 3.2 brought the EdDSA "instance" and "context-string" parameters; 3.0 signs only
    /// pure Ed25519 and Ed448 with the empty context (and would ignore the parameters, signing the
    /// wrong instance, so they are never passed to it).
    public static var hasEdDSAInstances: Bool {
        OPENSSL_version_major() > 3 || (OPENSSL_version_major() == 3 && OPENSSL_version_minor() >= 2)
    }
}

enum EdDSASigner {
    static func check(_ i: EdDSAInstance, keyType: KeyType) throws {
        guard CryptoEngine.hasEdDSAInstances else {
            throw CryptoError(.unsupported, i.variant.rawValue, reason: "needs OpenSSL 3.2 or later (this is \(CryptoEngine.name))")
        }
        guard i.keyType == keyType else {
            throw CryptoError(.invalidInput, i.variant.rawValue, reason: "does not fit a \(keyType) key")
        }
    }

    static func sign(_ pkey: OpaquePointer, _ i: EdDSAInstance, message: [UInt8], signatureLength: Int) throws -> [UInt8] {
        guard let mctx = EVP_MD_CTX_new() else { throw CryptoError.openssl("\(i.variant.rawValue) sign") }
        defer { EVP_MD_CTX_free(mctx) }
        guard i.withParameters({ EVP_DigestSignInit_ex(mctx, nil, nil, CryptoEngine.context, nil, pkey, $0) }) == 1 else {
            throw CryptoError.openssl("\(i.variant.rawValue) sign init")
        }
        var sig = [UInt8](repeating: 0, count: signatureLength)
        var len = sig.count
        guard EVP_DigestSign(mctx, &sig, &len, message, message.count) == 1, len == signatureLength else {
            throw CryptoError.openssl("\(i.variant.rawValue) sign")
        }
        return sig
    }

    static func verify(_ pkey: OpaquePointer, _ i: EdDSAInstance, signature: [UInt8], message: [UInt8]) throws -> Bool {
        guard let mctx = EVP_MD_CTX_new() else { throw CryptoError.openssl("\(i.variant.rawValue) verify") }
        defer { EVP_MD_CTX_free(mctx) }
        guard i.withParameters({ EVP_DigestVerifyInit_ex(mctx, nil, nil, CryptoEngine.context, nil, pkey, $0) }) == 1 else {
            throw CryptoError.openssl("\(i.variant.rawValue) verify init")
        }
        let r = EVP_DigestVerify(mctx, signature, signature.count, message, message.count)
        CryptoError.clearQueue()
        return r == 1
    }
}
