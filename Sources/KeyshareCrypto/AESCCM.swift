import COpenSSL

/// AES-CCM (NIST SP 800-38C, RFC 3610) for CKM_AES_CCM. OpenSSL's CCM
/// takes the payload in one update after the total length is set, so both
/// directions are one-shot here; the PKCS #11 layer buffers multi-part input.
/// Nonce 7-13 bytes, tag 4-16 bytes, even (SP 800-38C §A.1 / RFC 3610 §2).
public enum AESCCM {
    public static let nonceSizes = 7...13
    public static func validTagLength(_ n: Int) -> Bool { (4...16).contains(n) && n % 2 == 0 }

    /// The largest payload the nonce length allows: the length field has
    /// 15 - nonce bytes (RFC 3610 §2.2, L = 15 - N).
    public static func maxPayload(nonceLength: Int) -> UInt64 {
        let l = 15 - nonceLength
        return l >= 8 ? UInt64.max : (UInt64(1) << UInt64(8 * l)) - 1
    }

    public static func encrypt(key: [UInt8], nonce: [UInt8], plaintext: [UInt8], aad: [UInt8],
                               tagLength: Int) throws -> (ciphertext: [UInt8], tag: [UInt8]) {
        let ctx = try context(key: key, nonce: nonce, tagLength: tagLength, tag: nil, encrypt: true)
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        var tag = [UInt8](repeating: 0, count: tagLength)
        var len: Int32 = 0
        guard EVP_EncryptUpdate(ctx, nil, &len, nil, Int32(plaintext.count)) == 1 else { throw CryptoError.openssl("AES-CCM length") }
        if !aad.isEmpty {
            guard EVP_EncryptUpdate(ctx, nil, &len, aad, Int32(aad.count)) == 1 else { throw CryptoError.openssl("AES-CCM aad") }
        }
        var total = 0
        let ok = out.withUnsafeMutableBufferPointer { o -> Bool in
            guard EVP_EncryptUpdate(ctx, o.baseAddress, &len, plaintext, Int32(plaintext.count)) == 1 else { return false }
            total = Int(len)
            guard EVP_EncryptFinal_ex(ctx, o.baseAddress! + total, &len) == 1 else { return false }
            total += Int(len)
            return true
        }
        guard ok, EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, Int32(tagLength), &tag) == 1 else {
            throw CryptoError.openssl("AES-CCM encrypt")
        }
        return (Array(out[0..<total]), tag)
    }

    /// The plaintext, or `.authenticationFailed` when the tag does not verify.
    public static func decrypt(key: [UInt8], nonce: [UInt8], ciphertext: [UInt8], tag: [UInt8], aad: [UInt8]) throws -> [UInt8] {
        let ctx = try context(key: key, nonce: nonce, tagLength: tag.count, tag: tag, encrypt: false)
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var len: Int32 = 0
        guard EVP_DecryptUpdate(ctx, nil, &len, nil, Int32(ciphertext.count)) == 1 else { throw CryptoError.openssl("AES-CCM length") }
        if !aad.isEmpty {
            guard EVP_DecryptUpdate(ctx, nil, &len, aad, Int32(aad.count)) == 1 else { throw CryptoError.openssl("AES-CCM aad") }
        }
        // CCM verifies the tag inside this update: it fails, and writes nothing usable, on a mismatch.
        let ok = out.withUnsafeMutableBufferPointer { o in
            EVP_DecryptUpdate(ctx, o.baseAddress, &len, ciphertext, Int32(ciphertext.count)) == 1
        }
        guard ok else {
            for i in out.indices { out[i] = 0 }
            CryptoError.clearQueue()
            throw CryptoError(.authenticationFailed, "AES-CCM open", reason: "authentication failed")
        }
        return Array(out[0..<Int(len)])
    }

    private static func context(key: [UInt8], nonce: [UInt8], tagLength: Int, tag: [UInt8]?,
                                encrypt: Bool) throws -> OpaquePointer {
        let cipher: OpaquePointer?
        switch key.count {
        case 16: cipher = Fetched.aes128CCM
        case 24: cipher = Fetched.aes192CCM
        case 32: cipher = Fetched.aes256CCM
        default: throw CryptoError(.invalidInput, "AES-CCM", reason: "key must be 16, 24 or 32 bytes")
        }
        guard let cipher else { throw CryptoError(.unsupported, "AES-CCM", reason: "this OpenSSL has no AES-CCM") }
        guard nonceSizes.contains(nonce.count), validTagLength(tagLength) else {
            throw CryptoError(.invalidInput, "AES-CCM", reason: "bad nonce or tag length")
        }
        CryptoError.clearQueue()
        guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError.openssl("AES-CCM") }
        var tagCopy = tag
        let ok: Bool = {
            guard EVP_CipherInit_ex(ctx, cipher, nil, nil, nil, encrypt ? 1 : 0) == 1,
                  EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, Int32(nonce.count), nil) == 1 else { return false }
            let set: Int32
            if tagCopy != nil {
                set = tagCopy!.withUnsafeMutableBytes { EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(tagLength), $0.baseAddress) }
            } else {
                set = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(tagLength), nil)
            }
            guard set == 1 else { return false }
            return EVP_CipherInit_ex(ctx, nil, nil, key, nonce, encrypt ? 1 : 0) == 1
        }()
        tagCopy = nil
        guard ok else {
            EVP_CIPHER_CTX_free(ctx)
            throw CryptoError.openssl("AES-CCM init")
        }
        return ctx
    }
}

/// CBC-MAC (FIPS 113 / ISO/IEC 9797-1 MAC algorithm 1 with padding method
/// 1) for CKM_AES_MAC(_GENERAL) and CKM_DES3_MAC(_GENERAL): a zero IV, the
/// data right-padded with zero bytes to a positive whole number of blocks
/// (so empty data is one zero block), the MAC the leftmost bytes of the last
/// ciphertext block. Built on an ECB context, block by block: the MAC is a
/// legacy mechanism, kept for old peers, and needs no speed.
public final class CBCMAC: @unchecked Sendable {
    private let ecb: CipherContext
    public let blockSize: Int
    private var chain: [UInt8]
    private var held: [UInt8] = []
    private var blocks = 0

    public init(ecb: CipherContext) {
        self.ecb = ecb
        blockSize = ecb.blockSize
        chain = [UInt8](repeating: 0, count: ecb.blockSize)
    }

    public func update(_ data: [UInt8]) throws {
        held += data
        while held.count > blockSize {
            try absorb(Array(held[..<blockSize]))
            held.removeFirst(blockSize)
        }
    }

    /// The full last block of the chain.
    public func finish() throws -> [UInt8] {
        if held.count > 0 || blocks == 0 {
            try absorb(held + [UInt8](repeating: 0, count: blockSize - held.count))
            held = []
        }
        return chain
    }

    private func absorb(_ block: [UInt8]) throws {
        let x = (0..<blockSize).map { block[$0] ^ chain[$0] }
        let out = try ecb.update(x)
        guard out.count == blockSize else { throw CryptoError(.invalidInput, "CBC-MAC", reason: "block") }
        chain = out
        blocks += 1
    }
}

extension Fetched {
    nonisolated(unsafe) static let aes128CCM: OpaquePointer? = EVP_CIPHER_fetch(CryptoEngine.context, "AES-128-CCM", nil) ?? EVP_aes_128_ccm()
    nonisolated(unsafe) static let aes192CCM: OpaquePointer? = EVP_CIPHER_fetch(CryptoEngine.context, "AES-192-CCM", nil) ?? EVP_aes_192_ccm()
    nonisolated(unsafe) static let aes256CCM: OpaquePointer? = EVP_CIPHER_fetch(CryptoEngine.context, "AES-256-CCM", nil) ?? EVP_aes_256_ccm()
}
