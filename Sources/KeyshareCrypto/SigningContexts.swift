import COpenSSL

/// A key's signing contexts, initialised once per algorithm. OpenSSL 3
/// re-fetches the signature implementation (a locked name lookup) and, for
/// hashed RSA and ECDSA, the digest on every EVP_PKEY_sign_init; duplicating
/// an initialised context skips both, and every signature still gets a
/// context of its own, so concurrent signers never share one.
final class SigningContexts: @unchecked Sendable {
    private let lock = Lock()
    /// Guarded by `lock`; entries live until the key goes (few algorithms per key).
    private var prepared: [SignatureAlgorithm: OpaquePointer] = [:]
    private static let limit = 8

    deinit { for ctx in prepared.values { EVP_PKEY_CTX_free(ctx) } }

    /// A context ready for EVP_PKEY_sign; the caller frees it.
    func context(_ algorithm: SignatureAlgorithm, pkey: OpaquePointer) throws -> OpaquePointer {
        if let base = lock.withLock({ prepared[algorithm] }), let ctx = EVP_PKEY_CTX_dup(base) { return ctx }
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(CryptoEngine.context, pkey, nil) else { throw CryptoError.openssl("sign") }
        guard EVP_PKEY_sign_init(ctx) == 1, Signer.configure(ctx, algorithm) else {
            EVP_PKEY_CTX_free(ctx)
            throw CryptoError.openssl("sign init")
        }
        // The kept copy is never signed with, only duplicated.
        if let keep = EVP_PKEY_CTX_dup(ctx) {
            let unused = lock.withLock { () -> OpaquePointer? in
                guard prepared[algorithm] == nil, prepared.count < Self.limit else { return keep }
                prepared[algorithm] = keep
                return nil
            }
            if let unused { EVP_PKEY_CTX_free(unused) }
        }
        CryptoError.clearQueue()
        return ctx
    }
}
