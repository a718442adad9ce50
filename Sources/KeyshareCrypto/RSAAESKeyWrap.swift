import COpenSSL

/// CKM_RSA_AES_KEY_WRAP (PKCS #11 3.0 §2.1.21): a fresh AES key of the
/// asked size wraps the target with AES Key Wrap with Padding (RFC 5649,
/// CKM_AES_KEY_WRAP_KWP), and the AES key itself is RSA-OAEP encrypted to
/// the wrapping public key. The output is the OAEP block (modulus size)
/// followed by the RFC 5649 blob; the AES key is wiped once used. Unlike
/// plain RSA wrapping, any length fits, so private keys (PKCS #8) wrap too.
public enum RSAAESKeyWrap {
    public static let aesKeyBytes: Set<Int> = [16, 24, 32]

    public static func wrap(_ key: [UInt8], to wrappingKey: PublicKey, aesKeyBytes n: Int, oaep: RSAPadding) throws -> [UInt8] {
        guard aesKeyBytes.contains(n) else {
            throw CryptoError(.invalidInput, "RSA-AES key wrap", reason: "AES key must be 128, 192 or 256 bits")
        }
        guard case .oaep = oaep else {
            throw CryptoError(.invalidInput, "RSA-AES key wrap", reason: "the AES key is wrapped with OAEP")
        }
        var aes = try SecureRandom.bytes(n)
        defer { OSSL.cleanse(&aes) }
        let head = try wrappingKey.encrypt(aes, padding: oaep)
        return head + (try AESKeyWrap.wrap(kek: aes, key: key, padded: true))
    }

    /// Throws `.authenticationFailed` for any blob that does not open (wrong
    /// key, altered bytes, bad OAEP): one answer, whichever check failed.
    public static func unwrap(_ blob: [UInt8], with unwrappingKey: PrivateKey, oaep: RSAPadding) throws -> [UInt8] {
        let k = (unwrappingKey.bits + 7) / 8
        // The OAEP block, then at least one RFC 5649 block pair.
        guard blob.count >= k + 16, (blob.count - k) % 8 == 0 else {
            throw CryptoError(.invalidInput, "RSA-AES key unwrap", reason: "wrapped data has the wrong length")
        }
        var aes: [UInt8]
        do {
            aes = try unwrappingKey.decrypt(Array(blob[0..<k]), padding: oaep)
        } catch {
            throw CryptoError(.authenticationFailed, "RSA-AES key unwrap", reason: "the AES key does not decrypt")
        }
        defer { OSSL.cleanse(&aes) }
        guard aesKeyBytes.contains(aes.count) else {
            throw CryptoError(.authenticationFailed, "RSA-AES key unwrap", reason: "the AES key does not decrypt")
        }
        return try AESKeyWrap.unwrap(kek: aes, wrapped: Array(blob[k...]), padded: true)
    }
}
