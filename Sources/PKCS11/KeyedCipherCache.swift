import KeyshareCrypto

/// One session's last keyed AEAD context (AES-GCM or ChaCha20-Poly1305
/// encryption), and its last AES-CTR context, kept after a single-part
/// C_Encrypt so that the next
/// C_EncryptInit + C_Encrypt under the same key restarts it with the new IV
/// instead of building a context and running the key schedule (and GCM's
/// hash key) again: an application that calls C_EncryptInit per message
/// pays that per message otherwise (docs/benchmarks.md, "Symmetric
/// encryption rows"). The message API keeps its context for the same reason
/// (MessageCrypto.swift).
///
/// What makes reuse safe:
/// - it is keyed by the key's value, compared byte for byte: a context is
///   reused only for exactly the key it holds, whatever happened to the
///   object meanwhile (destroyed, changed, another handle). The key's usage
///   flags are checked at C_EncryptInit as before; the cache only saves
///   OpenSSL work, it never decides anything;
/// - it is taken out while in use and put back after the call, so two
///   operations of one session (an encryption and a decryption may both be
///   active) never share a context, and its own lock keeps a misbehaving
///   application's concurrent calls on one session from racing on it;
/// - a context whose call failed is dropped, not put back;
/// - the session drops it at C_CloseSession, C_Logout, token removal and
///   C_Finalize (`Session.endAll`), so no key schedule outlives the login,
///   and every session of the token drops it at C_DestroyObject and
///   C_SetAttributeValue (`Runtime.dropKeyedStateLocked`, with the
///   resolved-key memo, ResolvedKeyMemo.swift). A change made by another
///   process is seen at the next Init through the store's counter; the
///   context then goes when a call under another key replaces it (it can
///   only ever serve that exact key value). EVP_CIPHER_CTX_free cleanses it.
public final class KeyedCipherCache: @unchecked Sendable {
    private let lock = Lock()
    // Guarded by `lock` (no runtime exclusivity check: Session.swift).
    @exclusivity(unchecked) private var entry: (algorithm: AEADAlgorithm, key: [UInt8], context: AEADContext)?
    /// AES-CTR's own slot, so that an application alternating CTR and an
    /// AEAD keeps both.
    @exclusivity(unchecked) private var ctr: (key: [UInt8], context: CipherContext)?

    /// A context for `algorithm` under `key`, started with `iv` and `aad`:
    /// the cached one restarted, or a new one. Give it back with `put`.
    func take(_ algorithm: AEADAlgorithm, key: [UInt8], iv: [UInt8], aad: [UInt8]) throws -> AEADContext {
        let cached = lock.withLock { () -> AEADContext? in
            guard let e = entry, e.algorithm == algorithm, e.key == key else { return nil }
            entry = nil
            return e.context
        }
        if let c = cached {
            try iv.withUnsafeBytes { i in try aad.withUnsafeBytes { a in try c.restart(iv: i, aad: a) } }
            return c
        }
        return try AEADContext(algorithm, key: key, iv: iv, aad: aad, encrypt: true)
    }

    /// Keeps `context` (after a successful call) for the next message.
    func put(_ algorithm: AEADAlgorithm, key: [UInt8], _ context: AEADContext) {
        lock.withLock { entry = (algorithm, key, context) }
    }

    func clear() {
        lock.withLock {
            entry = nil
            ctr = nil
        }
    }

    /// Whether no keyed context is held (the tests' view of the drop rules).
    var isEmpty: Bool { lock.withLock { entry == nil && ctr == nil } }

    /// Runs `body` (one single-part AES-CTR encryption) on a context keyed
    /// with `key` and started at `counterBlock`: the cached one restarted,
    /// or a new one. The same rules as the AEAD entry: compared by value,
    /// taken out while in use, put back only after a call that succeeded.
    func withCTR<R>(key: [UInt8], counterBlock: [UInt8], _ body: (CipherContext) throws -> R) throws -> R {
        let cached = lock.withLock { () -> CipherContext? in
            guard let e = ctr, e.key == key else { return nil }
            ctr = nil
            return e.context
        }
        let c: CipherContext
        if let cached {
            try counterBlock.withUnsafeBytes { try cached.restart(iv: $0) }
            c = cached
        } else {
            c = try AESMode.ctr.context(key: key, iv: counterBlock, encrypt: true)
        }
        let r = try body(c)
        lock.withLock { ctr = (key, c) }
        return r
    }

    /// Runs one single-part encryption on a context from the cache.
    func seal(_ algorithm: AEADAlgorithm, key: [UInt8], iv: [UInt8], aad: [UInt8], tagLength: Int,
              _ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> Int {
        let c = try take(algorithm, key: key, iv: iv, aad: aad)
        let n = try c.sealDirect(input, into: output, tagLength: tagLength)
        put(algorithm, key: key, c)
        return n
    }
}
