import COpenSSL

extension PrivateKey {
    /// Plain ECDH (CKM_ECDH1_DERIVE with CKD_NULL): the shared X coordinate,
    /// curve-size bytes. The peer point may be raw or DER-wrapped, and is
    /// checked to be on this key's curve before use. On an X25519 or X448
    /// key this is the RFC 7748 function instead (Montgomery.swift).
    public func deriveECDH(peerPoint: [UInt8]) throws -> [UInt8] {
        if let c = publicKey.ecxCurve, !c.isEdwards { return try deriveMontgomery(c, peer: peerPoint) }
        guard keyType == .ec, let curve else {
            throw CryptoError(.invalidInput, "ECDH", reason: "not an EC, X25519 or X448 key")
        }
        let peer = try PublicKey(curve: curve, point: peerPoint)
        return try KeyAgreement.derive(pkey, peer: peer.pkey, "ECDH")
    }
}

enum KeyAgreement {
    /// EVP_PKEY_derive of `pkey` with `peer`: the raw shared secret.
    static func derive(_ pkey: OpaquePointer, peer: OpaquePointer, _ op: String) throws -> [UInt8] {
        CryptoError.clearQueue()
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(CryptoEngine.context, pkey, nil) else { throw CryptoError.openssl(op) }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_derive_init(ctx) == 1, EVP_PKEY_derive_set_peer_ex(ctx, peer, 1) == 1 else {
            throw CryptoError.openssl(op, kind: .invalidInput)
        }
        var len = 0
        guard EVP_PKEY_derive(ctx, nil, &len) == 1 else { throw CryptoError.openssl(op) }
        var out = [UInt8](repeating: 0, count: len)
        guard EVP_PKEY_derive(ctx, &out, &len) == 1 else {
            OSSL.cleanse(&out)
            throw CryptoError.openssl(op, kind: .invalidInput)
        }
        return Array(out[0..<len])
    }
}
