import COpenSSL

/// AES-CBC for CKM_AES_CBC (no padding: whole blocks only) and
/// CKM_AES_CBC_PAD (PKCS #7).
public enum AESCBC {
    public static let blockSize = 16

    public static func encrypt(key: [UInt8], iv: [UInt8], data: [UInt8], padding: Bool) throws -> [UInt8] {
        let ctx = try AESCBCContext(encrypt: true, key: key, iv: iv, padding: padding)
        return try ctx.update(data) + ctx.finish()
    }

    public static func decrypt(key: [UInt8], iv: [UInt8], data: [UInt8], padding: Bool) throws -> [UInt8] {
        let ctx = try AESCBCContext(encrypt: false, key: key, iv: iv, padding: padding)
        return try ctx.update(data) + ctx.finish()
    }

    static func cipher(keySize: Int) -> OpaquePointer? {
        switch keySize {
        case 16: Fetched.aes128CBC
        case 24: Fetched.aes192CBC
        case 32: Fetched.aes256CBC
        default: nil
        }
    }
}

/// Multi-part AES-CBC (C_EncryptUpdate / C_DecryptUpdate). A class because
/// it owns an EVP_CIPHER_CTX; one thread at a time.
public final class AESCBCContext: @unchecked Sendable {
    private let ctx: OpaquePointer
    private let encrypting: Bool
    private let padding: Bool

    public init(encrypt: Bool, key: [UInt8], iv: [UInt8], padding: Bool) throws {
        guard let cipher = AESCBC.cipher(keySize: key.count) else {
            throw CryptoError(.invalidInput, "AES-CBC", reason: "key must be 16, 24 or 32 bytes")
        }
        guard iv.count == AESCBC.blockSize else {
            throw CryptoError(.invalidInput, "AES-CBC", reason: "IV must be 16 bytes")
        }
        CryptoError.clearQueue()
        guard let c = EVP_CIPHER_CTX_new() else { throw CryptoError.openssl("AES-CBC") }
        guard EVP_CipherInit_ex(c, cipher, nil, key, iv, encrypt ? 1 : 0) == 1,
              EVP_CIPHER_CTX_set_padding(c, padding ? 1 : 0) == 1 else {
            EVP_CIPHER_CTX_free(c)
            throw CryptoError.openssl("AES-CBC init")
        }
        ctx = c
        encrypting = encrypt
        self.padding = padding
    }

    deinit { EVP_CIPHER_CTX_free(ctx) }

    public func update(_ data: [UInt8]) throws -> [UInt8] {
        if data.isEmpty { return [] }
        var out = [UInt8](repeating: 0, count: data.count + AESCBC.blockSize)
        var len: Int32 = 0
        guard EVP_CipherUpdate(ctx, &out, &len, data, Int32(data.count)) == 1 else {
            throw CryptoError.openssl("AES-CBC update")
        }
        return Array(out[0..<Int(len)])
    }

    /// Without padding, leftover partial blocks are an error (CKR_DATA_LEN_RANGE /
    /// CKR_ENCRYPTED_DATA_LEN_RANGE); with padding, a bad pad is .invalidInput.
    public func finish() throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: AESCBC.blockSize)
        var len: Int32 = 0
        guard EVP_CipherFinal_ex(ctx, &out, &len) == 1 else {
            let e = CryptoError.openssl(encrypting ? "AES-CBC encrypt" : "AES-CBC decrypt", kind: .invalidInput)
            throw e
        }
        return Array(out[0..<Int(len)])
    }
}
