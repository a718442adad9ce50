import COpenSSL

extension PrivateKey {
    /// Plain ECDH (CKM_ECDH1_DERIVE with CKD_NULL): the shared X coordinate,
    /// curve-size bytes. The peer point may be raw or DER-wrapped, and is
    /// checked to be on this key's curve before use.
    public func deriveECDH(peerPoint: [UInt8]) throws -> [UInt8] {
        guard keyType == .ec, let curve else {
            throw CryptoError(.invalidInput, "ECDH", reason: "not an EC key")
        }
        let peer = try PublicKey(ecParams: curve.paramsDER, point: peerPoint)
        CryptoError.clearQueue()
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else { throw CryptoError.openssl("ECDH") }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_derive_init(ctx) == 1, EVP_PKEY_derive_set_peer_ex(ctx, peer.pkey, 1) == 1 else {
            throw CryptoError.openssl("ECDH", kind: .invalidInput)
        }
        var len = 0
        guard EVP_PKEY_derive(ctx, nil, &len) == 1 else { throw CryptoError.openssl("ECDH") }
        var out = [UInt8](repeating: 0, count: len)
        guard EVP_PKEY_derive(ctx, &out, &len) == 1 else { throw CryptoError.openssl("ECDH") }
        return Array(out[0..<len])
    }
}
