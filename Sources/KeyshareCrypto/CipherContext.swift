import COpenSSL

/// One EVP_CIPHER_CTX for the symmetric modes that need nothing beyond
/// init / update / final: AES-ECB, AES-CTR, AES-CBC-CTS, DES and Triple
/// DES (AESModes.swift, DES.swift). A class because it owns the context;
/// one thread at a time, as a PKCS #11 session is.
///
/// The key and IV lengths are checked against the cipher before OpenSSL
/// sees them: EVP_CipherInit reads exactly the cipher's key length from the
/// pointer it is given, so a short Swift array would be read past its end.
public final class CipherContext: @unchecked Sendable {
    private let ctx: OpaquePointer
    private let operation: String
    public let blockSize: Int
    /// The cipher's IV length, kept: asking the context is a parameter
    /// lookup by name in OpenSSL 3.
    private let ivLength: Int

    /// - Parameters:
    ///   - cipher: a fetched EVP_CIPHER (never freed here).
    ///   - iv: nil for modes without one (ECB); else exactly the cipher's IV length.
    ///   - padding: PKCS #7 padding (block modes only).
    ///   - ctsMode: "CS1", "CS2" or "CS3" for the *-CBC-CTS ciphers.
    public init(cipher: OpaquePointer, key: [UInt8], iv: [UInt8]?, encrypt: Bool, padding: Bool,
                ctsMode: String? = nil, operation: String) throws {
        let keyLength = Int(EVP_CIPHER_get_key_length(cipher))
        let ivLength = Int(EVP_CIPHER_get_iv_length(cipher))
        guard key.count == keyLength else {
            throw CryptoError(.invalidInput, operation, reason: "key must be \(keyLength) bytes")
        }
        if let iv {
            guard iv.count == ivLength else { throw CryptoError(.invalidInput, operation, reason: "IV must be \(ivLength) bytes") }
        } else if ivLength != 0 {
            throw CryptoError(.invalidInput, operation, reason: "an IV of \(ivLength) bytes is needed")
        }
        // No ERR_clear_error: a failure drains the queue into its CryptoError
        // (see AEADContext.init).
        guard let c = EVP_CIPHER_CTX_new() else { throw CryptoError.openssl(operation) }
        let ok: Bool = {
            guard EVP_CipherInit_ex2(c, cipher, key, iv, encrypt ? 1 : 0, nil) == 1 else { return false }
            if let ctsMode {
                let set = ctsMode.withCString { mode -> Int32 in
                    let params = [
                        OSSL_PARAM_construct_utf8_string(cString("cts_mode"), UnsafeMutablePointer(mutating: mode), 0),
                        OSSL_PARAM_construct_end(),
                    ]
                    return EVP_CIPHER_CTX_set_params(c, params)
                }
                guard set == 1 else { return false }
            }
            // A stream mode (block size 1: CTR) has nothing to pad, and the
            // call is a parameter lookup by name in OpenSSL 3 (a string search).
            return EVP_CIPHER_get_block_size(cipher) == 1 && !padding || EVP_CIPHER_CTX_set_padding(c, padding ? 1 : 0) == 1
        }()
        guard ok else {
            EVP_CIPHER_CTX_free(c)
            throw CryptoError.openssl("\(operation) init")
        }
        ctx = c
        self.operation = operation
        blockSize = Int(EVP_CIPHER_get_block_size(cipher))
        self.ivLength = ivLength
    }

    deinit { EVP_CIPHER_CTX_free(ctx) }

    /// Starts the context over with a new IV under the key it holds (no new
    /// context, no key schedule): what a fresh context made with this key
    /// and `iv` would do. OpenSSL's init with only an IV resets the stream
    /// position and any buffered partial block (the provider's generic init
    /// clears `num` and `bufsz`). For KeyedCipherCache's AES-CTR reuse.
    public func restart(iv: UnsafeRawBufferPointer) throws {
        guard let base = iv.baseAddress, ivLength > 0, iv.count == ivLength else {
            throw CryptoError(.invalidInput, operation, reason: "bad IV")
        }
        guard EVP_CipherInit_ex2(ctx, nil, nil, base.assumingMemoryBound(to: UInt8.self), -1, nil) == 1 else {
            throw CryptoError.openssl("\(operation) restart")
        }
    }

    /// The output of `data`; for a block mode, whole blocks only (the rest
    /// waits in OpenSSL's buffer), for a stream mode exactly `data.count`.
    public func update(_ data: [UInt8]) throws -> [UInt8] {
        if data.isEmpty { return [] }
        var out = [UInt8](repeating: 0, count: data.count + 2 * Swift.max(blockSize, 16))
        let n = try data.withUnsafeBytes { input in
            try out.withUnsafeMutableBytes { output in try update(input, into: output) }
        }
        out.removeSubrange(n...)
        return out
    }

    /// Zero-copy form of `update`: `output` must hold input.count + blockSize - 1
    /// bytes (EVP_EncryptUpdate's bound; exactly input.count for a stream mode).
    public func update(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> Int {
        guard input.count > 0 else { return 0 }
        guard let inBase = input.baseAddress, let outBase = output.baseAddress,
              output.count >= input.count + blockSize - 1, let inLength = Int32(exactly: input.count) else {
            throw CryptoError(.invalidInput, operation, reason: "buffer sizes")
        }
        var len: Int32 = 0
        guard EVP_CipherUpdate(ctx, outBase.assumingMemoryBound(to: UInt8.self), &len,
                               inBase.assumingMemoryBound(to: UInt8.self), inLength) == 1 else {
            throw CryptoError.openssl("\(operation) update", kind: .invalidInput)
        }
        return Int(len)
    }

    /// What OpenSSL still holds: the padded last block on encryption, the
    /// unpadded last block on decryption (a bad pad is .invalidInput).
    public func finish() throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Swift.max(blockSize, 16) * 2)
        var len: Int32 = 0
        guard EVP_CipherFinal_ex(ctx, &out, &len) == 1 else {
            throw CryptoError.openssl("\(operation) final", kind: .invalidInput)
        }
        return Array(out[0..<Int(len)])
    }
}

/// A C string with static storage: OSSL_PARAM keeps the key pointer it is
/// given, so a temporary bridged from a Swift String must not be used.
func cString(_ s: StaticString) -> UnsafePointer<CChar> {
    UnsafeRawPointer(s.utf8Start).assumingMemoryBound(to: CChar.self)
}
