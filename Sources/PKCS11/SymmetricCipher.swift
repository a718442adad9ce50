import CPKCS11
import KeyshareCrypto

// The symmetric cipher mechanisms of issue 13 as `CipherOperation`s:
// AES-ECB, AES-CTR, AES-CTS, DES / 3DES ECB and CBC(-PAD), and
// ChaCha20-Poly1305. Cipher.swift routes to `symmetricOperation`;
// Encrypt.swift / Decrypt.swift hold the shared buffer handling. Every
// length answer is exact for the call that follows it (the pending count
// mirrors what OpenSSL holds back).

/// ECB and CBC block modes (AES-ECB, DES, 3DES), with or without PKCS #7
/// padding, multi-part. The same rules as AES-CBC (AESCBCOperation) for any
/// block size.
final class BlockCipherOperation: CipherOperation {
    let context: CipherContext
    let encrypting: Bool
    let pad: Bool
    let block: Int
    var pending = 0

    init(_ context: CipherContext, block: Int, pad: Bool, encrypting: Bool) {
        self.context = context
        self.block = block
        self.pad = pad
        self.encrypting = encrypting
    }

    var lengthError: PKCS11Error { PKCS11Error(encrypting ? CKR_DATA_LEN_RANGE : CKR_ENCRYPTED_DATA_LEN_RANGE) }

    /// Whole blocks out; a padded decryption keeps its last block back for the final call.
    func updateOutputLength(input: Int) -> Int {
        let total = pending + input
        var out = total / block * block
        if !encrypting, pad, out > 0, total % block == 0 { out -= block }
        return out
    }

    var finalOutputLength: Int { encrypting ? (pad ? block : 0) : (pad ? block - 1 : 0) }

    func outputLength(input: Int) -> Int { encrypting && pad ? (input / block + 1) * block : input }

    func oneShot(_ data: [UInt8]) throws -> [UInt8] {
        if !pad || !encrypting, data.count % block != 0 { throw lengthError }
        if !encrypting, pad, data.isEmpty { throw lengthError }
        return try update(data) + finish()
    }

    func update(_ part: [UInt8]) throws -> [UInt8] {
        let out = try context.update(part)
        pending = (pending + part.count) - out.count
        return out
    }

    func finish() throws -> [UInt8] {
        if !pad, pending != 0 { throw lengthError }
        if pad, !encrypting, pending != block { throw lengthError }
        do {
            return try context.finish()
        } catch {
            throw PKCS11Error(CKR_ENCRYPTED_DATA_INVALID)
        }
    }
}

/// AES-CTR (SP 800-38A §6.5): a stream, so every update returns as many
/// bytes as it gets and the final call none. Input that would make the
/// counter field (the low ulCounterBits bits of the counter block) wrap is
/// CKR_DATA_LEN_RANGE (AESCounter says why).
///
/// The EVP context is made at the first update, not at Init: a single-part
/// C_Encrypt instead borrows the session's keyed AES-CTR context
/// (KeyedCipherCache.swift) and restarts it at this counter block, so a
/// C_EncryptInit per message pays no context and no key schedule (the
/// cipher is fetched at Init, so an OpenSSL without it fails there as before).
final class AESCTROperation: DirectCipherOperation {
    let key: [UInt8]
    let counterBlock: [UInt8]
    private var stream: CipherContext?
    let encrypting: Bool
    /// Bytes left before the counter field wraps; nil: no Int-sized input reaches it.
    var remaining: Int?
    /// The session's keyed contexts, for single-part encryption.
    var cache: KeyedCipherCache?

    init(key: [UInt8], counterBlock: [UInt8], counterBits: Int, encrypting: Bool) throws {
        _ = try AESMode.ctr.cipher(keySize: key.count)
        guard counterBlock.count == 16 else { throw PKCS11Error.mechanismParamInvalid }
        self.key = key
        self.counterBlock = counterBlock
        remaining = AESCounter.byteLimit(counterBlock: counterBlock, counterBits: counterBits)
        self.encrypting = encrypting
    }

    /// The multi-part context, made at the first update.
    var context: CipherContext {
        get throws {
            if let stream { return stream }
            let c = try AESMode.ctr.context(key: key, iv: counterBlock, encrypt: encrypting)
            stream = c
            return c
        }
    }

    func attach(_ cache: KeyedCipherCache) { self.cache = cache }

    func outputLength(input: Int) -> Int { input }
    func updateOutputLength(input: Int) -> Int { input }
    var finalOutputLength: Int { 0 }

    func oneShot(_ data: [UInt8]) throws -> [UInt8] { try update(data) }

    func update(_ part: [UInt8]) throws -> [UInt8] {
        if let r = remaining {
            guard part.count <= r else { throw PKCS11Error(encrypting ? CKR_DATA_LEN_RANGE : CKR_ENCRYPTED_DATA_LEN_RANGE) }
            remaining = r - part.count
        }
        return try context.update(part)
    }

    func finish() throws -> [UInt8] { [] }

    func directOneShot(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> Int? {
        guard encrypting, stream == nil, let cache else { return try directUpdate(input, into: output) }
        if let r = remaining, input.count > r { throw PKCS11Error(CKR_DATA_LEN_RANGE) }
        return try cache.withCTR(key: key, counterBlock: counterBlock) { try $0.update(input, into: output) }
    }

    func directUpdate(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> Int? {
        if let r = remaining {
            guard input.count <= r else { throw PKCS11Error(encrypting ? CKR_DATA_LEN_RANGE : CKR_ENCRYPTED_DATA_LEN_RANGE) }
            remaining = r - input.count
        }
        return try context.update(input, into: output)
    }
}

/// AES-CBC with ciphertext stealing (CS1): the output is as long as the
/// input, which must be at least one block. Multi-part: whole blocks go
/// through plain CBC as they come, but the last 17 to 32 bytes are held
/// back, because stealing rewrites the last two blocks; the final call runs
/// them through OpenSSL's CTS cipher chained on the last ciphertext block.
/// (CS1 on blocks P1..Pn equals CBC on P1..Pn-2 followed by CS1 on Pn-1, Pn
/// with Cn-2 as the IV; a length that is a multiple of 16 is plain CBC.)
final class AESCTSOperation: CipherOperation {
    let key: [UInt8]
    let encrypting: Bool
    let cbc: AESCBCContext
    /// The IV of the held-back tail: the last ciphertext block so far.
    var chain: [UInt8]
    var held: [UInt8] = []

    init(key: [UInt8], iv: [UInt8], encrypting: Bool) throws {
        // Fails here, at Init, if this OpenSSL lacks the CTS cipher.
        _ = try AESMode.cbcCTS.cipher(keySize: key.count)
        cbc = try AESCBCContext(encrypt: encrypting, key: key, iv: iv, padding: false)
        self.key = key
        self.encrypting = encrypting
        chain = iv
    }

    var lengthError: PKCS11Error { PKCS11Error(encrypting ? CKR_DATA_LEN_RANGE : CKR_ENCRYPTED_DATA_LEN_RANGE) }

    /// Bytes released by an update when `total` bytes are held: whole blocks, keeping 17-32 back.
    static func released(_ total: Int) -> Int { total <= 32 ? 0 : (total - 17) / 16 * 16 }

    func outputLength(input: Int) -> Int { input }
    func updateOutputLength(input: Int) -> Int { Self.released(held.count + input) }
    var finalOutputLength: Int { held.count }

    func oneShot(_ data: [UInt8]) throws -> [UInt8] {
        guard data.count >= 16 else { throw lengthError }
        return try update(data) + finish()
    }

    func update(_ part: [UInt8]) throws -> [UInt8] {
        held += part
        let n = Self.released(held.count)
        guard n > 0 else { return [] }
        let bulk = Array(held[..<n])
        held.removeFirst(n)
        let out = try cbc.update(bulk)
        chain = Array((encrypting ? out : bulk).suffix(16))
        return out
    }

    func finish() throws -> [UInt8] {
        guard held.count >= 16 else { throw lengthError }
        let tail = try AESMode.cbcCTS.context(key: key, iv: chain, encrypt: encrypting)
        do {
            let out = try tail.update(held) + tail.finish()
            guard out.count == held.count else { throw PKCS11Error.generalError }
            return out
        } catch let e as PKCS11Error {
            throw e
        } catch {
            throw lengthError
        }
    }
}

/// ChaCha20-Poly1305 (RFC 8439) with CK_SALSA20_CHACHA20_POLY1305_PARAMS:
/// the same conventions as AES-GCM (AESGCMOperation): encryption streams,
/// the final call gives the 16-byte tag; decryption returns plaintext only
/// from the final call, after the tag (the last 16 bytes) is verified.
final class ChaChaPolyOperation: DirectCipherOperation {
    static let tagBytes = AEADAlgorithm.chachaTagSize
    let key: [UInt8]
    let parameters: ChaChaPolyParameters
    let encrypting: Bool
    var buffer: [UInt8] = []
    var stream: AEADContext?
    /// The session's keyed contexts, for single-part encryption (KeyedCipherCache.swift).
    var cache: KeyedCipherCache?

    init(key: [UInt8], parameters: ChaChaPolyParameters, encrypting: Bool) {
        self.key = key
        self.parameters = parameters
        self.encrypting = encrypting
    }

    func outputLength(input: Int) -> Int { encrypting ? input + Self.tagBytes : Swift.max(0, input - Self.tagBytes) }
    func updateOutputLength(input: Int) -> Int { encrypting ? input : 0 }
    var finalOutputLength: Int { encrypting ? Self.tagBytes : outputLength(input: buffer.count) }

    func oneShot(_ data: [UInt8]) throws -> [UInt8] {
        if encrypting { return try update(data) + finish() }
        buffer = data
        return try finish()
    }

    func update(_ part: [UInt8]) throws -> [UInt8] {
        if encrypting {
            let s = try stream ?? AEADContext(.chacha20Poly1305, key: key, iv: parameters.nonce, aad: parameters.aad, encrypt: true)
            stream = s
            return try s.update(part)
        }
        guard buffer.count + part.count <= 1 << 26 else { throw PKCS11Error(CKR_ENCRYPTED_DATA_LEN_RANGE) }
        buffer += part
        return []
    }

    func finish() throws -> [UInt8] {
        let p = parameters
        if encrypting {
            let s = try stream ?? AEADContext(.chacha20Poly1305, key: key, iv: p.nonce, aad: p.aad, encrypt: true)
            return try s.finishEncrypt(tagLength: Self.tagBytes)
        }
        guard buffer.count >= Self.tagBytes else { throw PKCS11Error(CKR_ENCRYPTED_DATA_LEN_RANGE) }
        let ct = Array(buffer[..<(buffer.count - Self.tagBytes)])
        let tag = Array(buffer[(buffer.count - Self.tagBytes)...])
        do {
            return try ChaCha20Poly1305.decrypt(key: key, nonce: p.nonce, ciphertext: ct, tag: tag, aad: p.aad)
        } catch {
            throw PKCS11Error(CKR_ENCRYPTED_DATA_INVALID)
        }
    }
    /// Encryption only (see DirectCipherOperation): ciphertext, then the tag.
    func directOneShot(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> Int? {
        guard encrypting, stream == nil else { return nil }
        if let cache {
            return try cache.seal(.chacha20Poly1305, key: key, iv: parameters.nonce, aad: parameters.aad,
                                  tagLength: Self.tagBytes, input, into: output)
        }
        return try AEADContext(.chacha20Poly1305, key: key, iv: parameters.nonce, aad: parameters.aad, encrypt: true)
            .sealDirect(input, into: output, tagLength: Self.tagBytes)
    }

    func attach(_ cache: KeyedCipherCache) { self.cache = cache }
}

/// AES-GCM's single-part encryption without copies (see DirectCipherOperation).
extension AESGCMOperation: DirectCipherOperation {
    func directOneShot(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> Int? {
        guard encrypting, stream == nil else { return nil }
        if let cache {
            return try cache.seal(.aesGCM, key: key, iv: parameters.iv, aad: parameters.aad, tagLength: parameters.tagBytes,
                                  input, into: output)
        }
        return try AEADContext(.aesGCM, key: key, iv: parameters.iv, aad: parameters.aad, encrypt: true)
            .sealDirect(input, into: output, tagLength: parameters.tagBytes)
    }

    func attach(_ cache: KeyedCipherCache) { self.cache = cache }
}

extension Runtime {
    /// The key value a symmetric cipher mechanism takes from `view`, with
    /// the key's class, type and size checked (CKR_KEY_TYPE_INCONSISTENT,
    /// CKR_KEY_SIZE_RANGE); nil for a mechanism that takes no such value
    /// (RSA). The usage flag is the caller's (`cipherOperation`).
    func symmetricKey(_ m: Mechanism, _ view: ObjectView) throws -> [UInt8]? {
        switch m {
        case .aesCBC, .aesGCM, .aesECB, .aesCTR, .aesCTS, .aesCCM: return try aesKey(view, encrypting: true)
        case .des(let d): return try desKey(view, d.variant)
        case .chacha20Poly1305: return try chachaKey(view)
        default: return nil
        }
    }

    /// The operation of a symmetric cipher mechanism under a key value that
    /// `symmetricKey` gave (or that the session's memo holds from such a
    /// check for the same mechanism type and direction, CheckedCipherKey.swift).
    func symmetricCipherOperation(_ m: Mechanism, key: [UInt8], encrypting: Bool) throws -> any CipherOperation {
        switch m {
        case .aesCBC(let iv, let pad):
            return try AESCBCOperation(key: key, iv: iv, pad: pad, encrypting: encrypting)
        case .aesGCM(let p):
            return try AESGCMOperation(key: key, parameters: p, encrypting: encrypting)
        case .aesCCM(let p):
            return try CCMOperation(key: key, parameters: p, encrypting: encrypting)
        default:
            break
        }
        do {
            switch m {
            case .aesECB:
                return BlockCipherOperation(try AESMode.ecb.context(key: key, iv: nil, encrypt: encrypting), block: 16,
                                            pad: false, encrypting: encrypting)
            case .aesCTR(let cb, let bits):
                return try AESCTROperation(key: key, counterBlock: cb, counterBits: bits, encrypting: encrypting)
            case .aesCTS(let iv):
                return try AESCTSOperation(key: key, iv: iv, encrypting: encrypting)
            case .des(let d):
                let ctx = try DES.context(d.variant, d.mode, key: key, iv: d.iv, encrypt: encrypting, padding: d.pad)
                return BlockCipherOperation(ctx, block: DES.blockSize, pad: d.pad, encrypting: encrypting)
            case .chacha20Poly1305(let p):
                return ChaChaPolyOperation(key: key, parameters: p, encrypting: encrypting)
            default:
                throw PKCS11Error.mechanismInvalid
            }
        } catch let e as CryptoError where e.kind == .unsupported {
            // Single DES without OpenSSL's legacy provider, say.
            throw PKCS11Error.mechanismInvalid
        }
    }

    /// A DES (8-byte) or 3DES (24-byte) key's value. The 3DES mechanisms
    /// also take a CKK_DES2 key (16 bytes, K1 K2), as two-key 3DES: K1 K2 K1
    /// (SP 800-67 keying option 2; PKCS #11 3.0 §2.29 "DES2 secret key
    /// objects ... used with the DES3 mechanisms"; SoftHSM2 and NSS do the same).
    func desKey(_ view: ObjectView, _ variant: DES.Variant) throws -> [UInt8] {
        let types: [CK_KEY_TYPE] = variant == .des ? [CKK_DES] : [CKK_DES3, CKK_DES2]
        guard view.objectClass == CKO_SECRET_KEY, let type = view.keyType, types.contains(type) else {
            throw PKCS11Error.keyTypeInconsistent
        }
        if type == CKK_DES2 {
            guard let v = view.attributes[CKA_VALUE], v.count == DES.twoKeySize else { throw PKCS11Error(CKR_KEY_SIZE_RANGE) }
            return DES.expandTwoKey(v)
        }
        guard let v = view.attributes[CKA_VALUE], v.count == variant.keySize else { throw PKCS11Error(CKR_KEY_SIZE_RANGE) }
        return v
    }

    /// A ChaCha20 key's 32-byte value.
    func chachaKey(_ view: ObjectView) throws -> [UInt8] {
        guard view.objectClass == CKO_SECRET_KEY, view.keyType == CKK_CHACHA20 else { throw PKCS11Error.keyTypeInconsistent }
        guard let v = view.attributes[CKA_VALUE], v.count == AEADAlgorithm.chachaKeySize else {
            throw PKCS11Error(CKR_KEY_SIZE_RANGE)
        }
        return v
    }
}
