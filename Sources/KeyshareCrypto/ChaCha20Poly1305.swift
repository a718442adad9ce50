import COpenSSL

/// The AEADs of PKCS #11's message-based API and of CKM_CHACHA20_POLY1305:
/// AES-GCM (SP 800-38D) and ChaCha20-Poly1305 (RFC 8439).
public enum AEADAlgorithm: Sendable, Equatable {
    case aesGCM
    case chacha20Poly1305

    public static let chachaKeySize = 32
    public static let chachaNonceSize = 12
    public static let chachaTagSize = 16

    var name: String { self == .aesGCM ? "AES-GCM" : "ChaCha20-Poly1305" }

    func cipher(keySize: Int) throws -> OpaquePointer {
        switch self {
        case .aesGCM:
            guard let c = AESGCM.cipherFor(keySize: keySize) else {
                throw CryptoError(.invalidInput, name, reason: "key must be 16, 24 or 32 bytes")
            }
            return c
        case .chacha20Poly1305:
            guard keySize == Self.chachaKeySize else { throw CryptoError(.invalidInput, name, reason: "key must be 32 bytes") }
            guard let c = Fetched.chacha20Poly1305 else {
                throw CryptoError(.unsupported, name, reason: "this OpenSSL has no ChaCha20-Poly1305")
            }
            return c
        }
    }
}

/// One AEAD message through an EVP_CIPHER_CTX: the AAD at init, the text
/// in any number of updates, then the tag. Encryption streams (GCM and
/// ChaCha20 are counter modes: each update returns as many bytes as it was
/// given); a caller that must not release unverified plaintext collects the
/// ciphertext and decrypts it in one go before `finishDecrypt`.
public final class AEADContext: @unchecked Sendable {
    private let ctx: OpaquePointer
    public let algorithm: AEADAlgorithm
    private let encrypting: Bool
    /// The IV length set now: `restart` sets it only when it changes (the
    /// control goes through OpenSSL's parameter lookup, a string search).
    private var ivLength: Int

    public init(_ algorithm: AEADAlgorithm, key: [UInt8], iv: [UInt8], aad: [UInt8], encrypt: Bool) throws {
        let cipher = try algorithm.cipher(keySize: key.count)
        switch algorithm {
        case .aesGCM:
            guard (1...256).contains(iv.count) else { throw CryptoError(.invalidInput, "AES-GCM", reason: "IV must be 1-256 bytes") }
        case .chacha20Poly1305:
            guard iv.count == AEADAlgorithm.chachaNonceSize else {
                throw CryptoError(.invalidInput, "ChaCha20-Poly1305", reason: "nonce must be 12 bytes")
            }
        }
        guard let aadLength = Int32(exactly: aad.count) else { throw CryptoError(.invalidInput, algorithm.name, reason: "AAD too long") }
        // No ERR_clear_error here: a failure drains the queue into its
        // CryptoError, and clearing it on every init cost more than the
        // per-message C_EncryptInit's key schedule (docs/benchmarks.md).
        guard let c = EVP_CIPHER_CTX_new() else { throw CryptoError.openssl(algorithm.name) }
        var len: Int32 = 0
        let mode: Int32 = encrypt ? 1 : 0
        // The 12-byte IV is both ciphers' default: one init with key and IV,
        // as an EVP user writes it. Another length (GCM) is set before the IV.
        let keyed: Bool
        if iv.count == AEADAlgorithm.chachaNonceSize {
            keyed = EVP_CipherInit_ex(c, cipher, nil, key, iv, mode) == 1
        } else {
            keyed = EVP_CipherInit_ex(c, cipher, nil, nil, nil, mode) == 1
                && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_SET_IVLEN, Int32(iv.count), nil) == 1
                && EVP_CipherInit_ex(c, nil, nil, key, iv, mode) == 1
        }
        guard keyed, aad.isEmpty || EVP_CipherUpdate(c, nil, &len, aad, aadLength) == 1 else {
            EVP_CIPHER_CTX_free(c)
            throw CryptoError.openssl("\(algorithm.name) init")
        }
        ctx = c
        self.algorithm = algorithm
        encrypting = encrypt
        ivLength = iv.count
    }

    deinit { EVP_CIPHER_CTX_free(ctx) }

    /// Starts the next message under the same key: a new IV (its length may
    /// change) and AAD. The key schedule (and GCM's hash key) are kept, so a
    /// message-based process pays them once, not per message.
    public func restart(iv: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer) throws {
        switch algorithm {
        case .aesGCM:
            guard (1...256).contains(iv.count) else { throw CryptoError(.invalidInput, "AES-GCM", reason: "IV must be 1-256 bytes") }
        case .chacha20Poly1305:
            guard iv.count == AEADAlgorithm.chachaNonceSize else {
                throw CryptoError(.invalidInput, "ChaCha20-Poly1305", reason: "nonce must be 12 bytes")
            }
        }
        guard let ivBase = iv.baseAddress, let aadLength = Int32(exactly: aad.count) else {
            throw CryptoError(.invalidInput, algorithm.name, reason: "bad IV or AAD")
        }
        var len: Int32 = 0
        let mode: Int32 = encrypting ? 1 : 0
        guard iv.count == ivLength || EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, Int32(iv.count), nil) == 1 else {
            throw CryptoError.openssl("\(algorithm.name) restart")
        }
        ivLength = iv.count
        guard EVP_CipherInit_ex(ctx, nil, nil, nil, ivBase.assumingMemoryBound(to: UInt8.self), mode) == 1,
              aad.count == 0 || EVP_CipherUpdate(ctx, nil, &len, aad.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                                 aadLength) == 1 else {
            throw CryptoError.openssl("\(algorithm.name) restart")
        }
    }

    /// Exactly `data.count` bytes of output.
    public func update(_ data: [UInt8]) throws -> [UInt8] {
        if data.isEmpty { return [] }
        var out = [UInt8](repeating: 0, count: data.count + 16)
        let n = try data.withUnsafeBytes { i in try out.withUnsafeMutableBytes { o in try update(i, into: o) } }
        out.removeSubrange(n...)
        return out
    }

    /// Zero-copy form of `update`; `output` must hold input.count + 16 bytes.
    public func update(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> Int {
        guard input.count > 0 else { return 0 }
        guard let i = input.baseAddress, let o = output.baseAddress, output.count >= input.count,
              let n = Int32(exactly: input.count) else {
            throw CryptoError(.invalidInput, algorithm.name, reason: "buffer sizes")
        }
        var len: Int32 = 0
        guard EVP_CipherUpdate(ctx, o.assumingMemoryBound(to: UInt8.self), &len, i.assumingMemoryBound(to: UInt8.self), n) == 1 else {
            throw CryptoError.openssl("\(algorithm.name) update")
        }
        return Int(len)
    }

    /// The tag (encryption only); no ciphertext is left over in these modes.
    public func finishEncrypt(tagLength: Int) throws -> [UInt8] {
        guard (4...16).contains(tagLength) else { throw CryptoError(.invalidInput, algorithm.name, reason: "bad tag length") }
        return try [UInt8](unsafeUninitializedCapacity: tagLength) { buf, n in
            try finishEncrypt(tagInto: UnsafeMutableRawBufferPointer(buf))
            n = tagLength
        }
    }

    /// `finishEncrypt` writing the tag (all of `tag`, 4-16 bytes) in place:
    /// no arrays. The final call's scratch output is on the stack (GCM and
    /// ChaCha20-Poly1305 give none back); the tag goes where the caller
    /// says, e.g. after the ciphertext in its own buffer (`sealDirect`).
    public func finishEncrypt(tagInto tag: UnsafeMutableRawBufferPointer) throws {
        guard encrypting, (4...16).contains(tag.count), let t = tag.baseAddress else {
            throw CryptoError(.invalidInput, algorithm.name, reason: "bad tag length")
        }
        let ok = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { rest -> Bool in
            var len: Int32 = 0
            return EVP_CipherFinal_ex(ctx, rest.baseAddress, &len) == 1 && len == 0
                && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, Int32(tag.count), t) == 1
        }
        guard ok else { throw CryptoError.openssl("\(algorithm.name) final") }
    }

    /// The whole message in one go, ciphertext then tag, straight into
    /// `output` (input.count + tagLength bytes); returns the bytes written.
    public func sealDirect(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer,
                           tagLength: Int) throws -> Int {
        guard output.count >= input.count + tagLength, let o = output.baseAddress else {
            throw CryptoError(.invalidInput, algorithm.name, reason: "output too small")
        }
        let n = try update(input, into: output)
        try finishEncrypt(tagInto: UnsafeMutableRawBufferPointer(start: o + n, count: tagLength))
        return n + tagLength
    }

    /// Checks the tag (decryption only): .authenticationFailed when it does not verify.
    public func finishDecrypt(tag: [UInt8]) throws {
        guard !encrypting, (4...16).contains(tag.count) else {
            throw CryptoError(.invalidInput, algorithm.name, reason: "bad tag length")
        }
        var t = tag
        var rest = [UInt8](repeating: 0, count: 32)
        var len: Int32 = 0
        guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(t.count), &t) == 1,
              EVP_CipherFinal_ex(ctx, &rest, &len) == 1, len == 0 else {
            CryptoError.clearQueue()
            throw CryptoError(.authenticationFailed, "\(algorithm.name) open",
                              reason: "authentication failed (wrong key, or data altered or moved)")
        }
    }
}

/// One-shot ChaCha20-Poly1305 (RFC 8439 §2.8): 32-byte key, 12-byte nonce, 16-byte tag.
public enum ChaCha20Poly1305 {
    public static func encrypt(key: [UInt8], nonce: [UInt8], plaintext: [UInt8], aad: [UInt8]) throws
        -> (ciphertext: [UInt8], tag: [UInt8]) {
        let c = try AEADContext(.chacha20Poly1305, key: key, iv: nonce, aad: aad, encrypt: true)
        let ct = try c.update(plaintext)
        return (ct, try c.finishEncrypt(tagLength: AEADAlgorithm.chachaTagSize))
    }

    /// .authenticationFailed when the tag does not verify; no plaintext then.
    public static func decrypt(key: [UInt8], nonce: [UInt8], ciphertext: [UInt8], tag: [UInt8], aad: [UInt8]) throws -> [UInt8] {
        let c = try AEADContext(.chacha20Poly1305, key: key, iv: nonce, aad: aad, encrypt: false)
        var pt = try c.update(ciphertext)
        do {
            try c.finishDecrypt(tag: tag)
        } catch {
            OSSL.cleanse(&pt)
            throw error
        }
        return pt
    }
}
