import COpenSSL

/// AES key wrap: RFC 3394 (padded: false; input a multiple of 8 bytes, at
/// least 16) and RFC 5649 (padded: true; any non-empty length).
///
/// `iv` is the initial value: nil for the standard one (RFC 3394 §2.2.3.1
/// A6A6A6A6A6A6A6A6; RFC 5649 §3 the 4-byte A65959A6 before the length), or
/// an alternative one (8 bytes for RFC 3394, 4 for RFC 5649), which unwrap
/// must be given again (PKCS #11 CKM_AES_KEY_WRAP's optional parameter).
public enum AESKeyWrap {
    public static func ivLength(padded: Bool) -> Int { padded ? 4 : 8 }

    public static func wrap(kek: [UInt8], key: [UInt8], padded: Bool, iv: [UInt8]? = nil) throws -> [UInt8] {
        if padded {
            guard !key.isEmpty else { throw CryptoError(.invalidInput, "AES key wrap", reason: "nothing to wrap") }
        } else {
            guard key.count >= 16, key.count % 8 == 0 else {
                throw CryptoError(.invalidInput, "AES key wrap", reason: "RFC 3394 needs a multiple of 8 bytes, at least 16")
            }
        }
        return try run(kek: kek, input: key, padded: padded, iv: iv, encrypt: true)
    }

    /// An integrity failure (wrong KEK, altered data) throws .authenticationFailed.
    public static func unwrap(kek: [UInt8], wrapped: [UInt8], padded: Bool, iv: [UInt8]? = nil) throws -> [UInt8] {
        guard wrapped.count >= 16, wrapped.count % 8 == 0 else {
            throw CryptoError(.invalidInput, "AES key unwrap", reason: "wrapped data must be a multiple of 8 bytes, at least 16")
        }
        return try run(kek: kek, input: wrapped, padded: padded, iv: iv, encrypt: false)
    }

    private static func run(kek: [UInt8], input: [UInt8], padded: Bool, iv: [UInt8]?, encrypt: Bool) throws -> [UInt8] {
        let op = encrypt ? "AES key wrap" : "AES key unwrap"
        // EVP reads the cipher's IV length from the pointer: check it first.
        if let iv, iv.count != ivLength(padded: padded) {
            throw CryptoError(.invalidInput, op, reason: "the IV must be \(ivLength(padded: padded)) bytes")
        }
        let cipher: OpaquePointer?
        switch (kek.count, padded) {
        case (16, false): cipher = Fetched.aes128Wrap
        case (24, false): cipher = Fetched.aes192Wrap
        case (32, false): cipher = Fetched.aes256Wrap
        case (16, true): cipher = Fetched.aes128WrapPad
        case (24, true): cipher = Fetched.aes192WrapPad
        case (32, true): cipher = Fetched.aes256WrapPad
        default: cipher = nil
        }
        guard let cipher else { throw CryptoError(.invalidInput, op, reason: "KEK must be 16, 24 or 32 bytes") }
        CryptoError.clearQueue()
        guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError.openssl(op) }
        defer { EVP_CIPHER_CTX_free(ctx) }
        _ = ks_EVP_CIPHER_CTX_allow_wrap(ctx)
        guard EVP_CipherInit_ex(ctx, cipher, nil, kek, iv, encrypt ? 1 : 0) == 1 else {
            throw CryptoError.openssl(op)
        }
        var out = [UInt8](repeating: 0, count: input.count + 16)
        var len: Int32 = 0
        guard EVP_CipherUpdate(ctx, &out, &len, input, Int32(input.count)) == 1 else {
            if encrypt { throw CryptoError.openssl(op) }
            CryptoError.clearQueue()
            throw CryptoError(.authenticationFailed, op, reason: "integrity check failed (wrong key or altered data)")
        }
        var total = Int(len)
        var fin: Int32 = 0
        let ok = out.withUnsafeMutableBufferPointer { EVP_CipherFinal_ex(ctx, $0.baseAddress! + total, &fin) }
        guard ok == 1 else { throw CryptoError.openssl(op) }
        total += Int(fin)
        return Array(out[0..<total])
    }
}
