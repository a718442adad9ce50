import COpenSSL

extension PrivateKey {
    /// X25519 or X448 (RFC 7748 §5, §6): this key's scalar times the peer's
    /// u-coordinate, little-endian, 32 or 56 bytes. The peer key is its raw
    /// u-coordinate or the same in a DER OCTET STRING (CKA_EC_POINT form).
    ///
    /// An all-zero result (the peer sent a point of small order) is refused,
    /// as RFC 7748 §6.1 allows and OpenSSL does: such a "shared" secret is
    /// known to everyone.
    func deriveMontgomery(_ curve: ECXCurve, peer: [UInt8]) throws -> [UInt8] {
        guard let raw = curve.rawKey(peer) else {
            throw CryptoError(.invalidInput, curve.rawValue, reason: "peer key must be \(curve.keyLength) bytes, raw or in an OCTET STRING")
        }
        let peerKey = try PublicKey(curve, raw: raw)
        return try KeyAgreement.derive(pkey, peer: peerKey.pkey, curve.rawValue)
    }
}
