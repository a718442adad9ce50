import COpenSSL

/// The AES modes of SP 800-38A (and its ciphertext-stealing addendum) that
/// PKCS #11 offers beside CBC and GCM: CKM_AES_ECB, CKM_AES_CTR and
/// CKM_AES_CTS. Each runs through a `CipherContext` on a cipher fetched
/// once per process (see Fetched.swift for why).
public enum AESMode: Sendable {
    case ecb
    case ctr
    /// CBC with ciphertext stealing, variant CS1 of the SP 800-38A addendum
    /// (PKCS #11 names the addendum but not a variant; NSS softoken,
    /// Kryoptic and SunPKCS11 use CS1, and so does OpenSSL by default).
    case cbcCTS

    public func cipher(keySize: Int) throws -> OpaquePointer {
        let c: OpaquePointer?
        switch (self, keySize) {
        case (.ecb, 16): c = Fetched.aes128ECB
        case (.ecb, 24): c = Fetched.aes192ECB
        case (.ecb, 32): c = Fetched.aes256ECB
        case (.ctr, 16): c = Fetched.aes128CTR
        case (.ctr, 24): c = Fetched.aes192CTR
        case (.ctr, 32): c = Fetched.aes256CTR
        case (.cbcCTS, 16): c = Fetched.aes128CTS
        case (.cbcCTS, 24): c = Fetched.aes192CTS
        case (.cbcCTS, 32): c = Fetched.aes256CTS
        default: throw CryptoError(.invalidInput, "AES", reason: "key must be 16, 24 or 32 bytes")
        }
        guard let c else { throw CryptoError(.unsupported, "AES-CBC-CTS", reason: "this OpenSSL has no AES-CBC-CTS") }
        return c
    }

    /// A context for this mode: `iv` is the IV (CTS), the counter block
    /// (CTR) or nil (ECB).
    public func context(key: [UInt8], iv: [UInt8]?, encrypt: Bool) throws -> CipherContext {
        let name: String
        switch self {
        case .ecb: name = "AES-ECB"
        case .ctr: name = "AES-CTR"
        case .cbcCTS: name = "AES-CBC-CTS"
        }
        return try CipherContext(cipher: try cipher(keySize: key.count), key: key, iv: self == .ecb ? nil : iv,
                                 encrypt: encrypt, padding: false, ctsMode: self == .cbcCTS ? "CS1" : nil,
                                 operation: name)
    }
}

/// CKM_AES_CTR's counter (CK_AES_CTR_PARAMS): only the low `counterBits`
/// bits of the 16-byte counter block count. OpenSSL increments all 128, so
/// once that field would wrap, OpenSSL would carry into the nonce bits and
/// the output would no longer be what the caller's parameters describe;
/// going round instead would reuse counter blocks (the same keystream).
/// Either way the input must stop there, as SoftHSM2
/// (OSSLEVPSymmetricAlgorithm, maximumBytes) and Kryoptic (maxblocks) stop it.
public enum AESCounter {
    /// How many bytes can be processed before the counter field wraps, or
    /// nil when no Int-sized input can reach that point.
    public static func byteLimit(counterBlock cb: [UInt8], counterBits: Int) -> Int? {
        guard cb.count == 16, (1...128).contains(counterBits) else { return 0 }
        var value: UInt128 = 0
        for b in cb { value = value << 8 | UInt128(b) }
        let mask: UInt128 = counterBits == 128 ? ~0 : (UInt128(1) << counterBits) - 1
        let counter = value & mask
        // Blocks left: 2^bits - counter (the counter value itself is the first block).
        let blocks = mask &- counter &+ 1  // wraps to 0 only for bits = 128, counter = 0: unlimited
        if blocks == 0 { return nil }
        let (bytes, overflow) = blocks.multipliedReportingOverflow(by: 16)
        if overflow || bytes > UInt128(Int.max) { return nil }
        return Int(bytes)
    }
}

extension Fetched {
    nonisolated(unsafe) static let aes128ECB: OpaquePointer? = EVP_CIPHER_fetch(CryptoEngine.context, "AES-128-ECB", nil) ?? EVP_aes_128_ecb()
    nonisolated(unsafe) static let aes192ECB: OpaquePointer? = EVP_CIPHER_fetch(CryptoEngine.context, "AES-192-ECB", nil) ?? EVP_aes_192_ecb()
    nonisolated(unsafe) static let aes256ECB: OpaquePointer? = EVP_CIPHER_fetch(CryptoEngine.context, "AES-256-ECB", nil) ?? EVP_aes_256_ecb()
    nonisolated(unsafe) static let aes128CTR: OpaquePointer? = EVP_CIPHER_fetch(CryptoEngine.context, "AES-128-CTR", nil) ?? EVP_aes_128_ctr()
    nonisolated(unsafe) static let aes192CTR: OpaquePointer? = EVP_CIPHER_fetch(CryptoEngine.context, "AES-192-CTR", nil) ?? EVP_aes_192_ctr()
    nonisolated(unsafe) static let aes256CTR: OpaquePointer? = EVP_CIPHER_fetch(CryptoEngine.context, "AES-256-CTR", nil) ?? EVP_aes_256_ctr()
    /// No legacy EVP_aes_*_cbc_cts() exists: nil when the provider lacks it.
    nonisolated(unsafe) static let aes128CTS: OpaquePointer? = EVP_CIPHER_fetch(CryptoEngine.context, "AES-128-CBC-CTS", nil)
    nonisolated(unsafe) static let aes192CTS: OpaquePointer? = EVP_CIPHER_fetch(CryptoEngine.context, "AES-192-CBC-CTS", nil)
    nonisolated(unsafe) static let aes256CTS: OpaquePointer? = EVP_CIPHER_fetch(CryptoEngine.context, "AES-256-CBC-CTS", nil)
    nonisolated(unsafe) static let chacha20Poly1305: OpaquePointer? =
        EVP_CIPHER_fetch(CryptoEngine.context, "ChaCha20-Poly1305", nil) ?? EVP_chacha20_poly1305()
}
