import CPKCS11
import KeyshareCrypto

// Message-based encryption and decryption, PKCS #11 3.0 §5.13 and §5.14,
// with CKM_AES_GCM (CK_GCM_MESSAGE_PARAMS) and CKM_CHACHA20_POLY1305
// (CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS). Message-based signing and
// verifying (§5.15-5.16) stay CKR_FUNCTION_NOT_SUPPORTED: PKCS #11 3.0
// defines no mechanism for them.
//
// Lifetime. C_MessageEncryptInit starts a *process* that lasts until
// C_MessageEncryptFinal (or C_MessageEncryptInit with NULL, logout, session
// close). Within it each message is one C_EncryptMessage, or
// C_EncryptMessageBegin, C_EncryptMessageNext... with CKF_END_OF_MESSAGE.
// §5.13: an error ends the *message* it happens in (a C_EncryptMessageNext
// error "terminates the current message encryption operation"), not the
// process: the next message can start. CKR_BUFFER_TOO_SMALL and length
// queries keep the message, as §5.2 keeps any operation. NSS softoken
// likewise keeps the process on errors; Kryoptic ends it (its op_err).
//
// IVs. With CKG_NO_GENERATE the caller's IV is used. With CKG_GENERATE /
// CKG_GENERATE_COUNTER the low (ivLen*8 - ulIvFixedBits) bits are a counter
// starting at zero (the spec's words for COUNTER; GENERATE, whose method the
// spec leaves open, is the counter too, as in NSS and Kryoptic); with
// CKG_GENERATE_RANDOM they come from the DRBG and must be at least 96 bits
// (SP 800-38D §8.2.2; Kryoptic accepts 64). The fixed high bits come from
// the caller's pIv; the whole IV is written back to pIv (the C layer does
// that) when the message is encrypted, never for a length query. The
// first generating message fixes the IV length, fixed bits and generator
// for the process, so the counter can never give an IV twice; a later
// message with another layout is CKR_ARGUMENTS_BAD. The counter's end
// (2^bits IVs, 2^32 random ones, SP 800-38D §8.3) is CKR_DATA_LEN_RANGE,
// as in Kryoptic. CKG_GENERATE_COUNTER_XOR (PKCS #11 3.1; the TLS 1.3 /
// RFC 8446 §5.3 per-record nonce, which NSS's PK11_AEADOp and Kryoptic
// implement): the same counter, from zero, XORed into the generated bits of
// the IV the process's first generating message passed (the base IV, kept:
// pIv is overwritten with each message's IV), so the first IV is the base
// itself; the fixed bits are the base's.
//
// Decryption releases no plaintext before the tag is verified: a one-part
// C_DecryptMessage returns it after the check, and C_DecryptMessageNext
// returns nothing until the part with CKF_END_OF_MESSAGE (as C_DecryptUpdate
// with CKM_AES_GCM does here).

/// The IV generator of a message-based encryption process.
struct IVGenerator {
    let generator: CK_ULONG
    let ivLength: Int
    let fixedBits: Int
    /// The next counter value; for random IVs, how many were made.
    var next: UInt64 = 0
    let limit: UInt64
    /// CKG_GENERATE_COUNTER_XOR: the first generating message's IV.
    var base: [UInt8]?

    init(_ p: MessageParameters) throws {
        let genBits = p.iv.count * 8 - p.ivFixedBits
        guard genBits > 0 else { throw PKCS11Error.argumentsBad }
        switch p.generator {
        case CK_ULONG(CKG_GENERATE), CK_ULONG(CKG_GENERATE_COUNTER), CK_ULONG(CKG_GENERATE_COUNTER_XOR):
            limit = genBits >= 64 ? UInt64.max : UInt64(1) << genBits
        case CK_ULONG(CKG_GENERATE_RANDOM):
            guard genBits >= 96 else { throw PKCS11Error.argumentsBad }
            limit = UInt64(1) << 32
        default:
            throw PKCS11Error.argumentsBad
        }
        generator = p.generator
        ivLength = p.iv.count
        fixedBits = p.ivFixedBits
    }

    func matches(_ p: MessageParameters) -> Bool {
        p.generator == generator && p.iv.count == ivLength && p.ivFixedBits == fixedBits
    }

    /// The next IV: the caller's fixed high bits, then the generated ones.
    mutating func make(from caller: [UInt8]) throws -> [UInt8] {
        guard next < limit else { throw PKCS11Error.dataLenRange }
        var source: [UInt8]
        if generator == CK_ULONG(CKG_GENERATE_RANDOM) {
            source = try SecureRandom.bytes(ivLength)
        } else {
            let be = withUnsafeBytes(of: next.bigEndian) { Array($0) }
            source = ivLength >= 8 ? [UInt8](repeating: 0, count: ivLength - 8) + be : Array(be.suffix(ivLength))
        }
        next += 1
        let xor = generator == CK_ULONG(CKG_GENERATE_COUNTER_XOR)
        if xor, base == nil { base = caller }
        var iv = xor ? base ?? caller : caller
        for i in 0..<ivLength where (i + 1) * 8 > fixedBits {
            let mask: UInt8 = i * 8 >= fixedBits ? 0xFF : 0xFF >> UInt8(fixedBits - i * 8)
            iv[i] = xor ? iv[i] ^ (source[i] & mask) : (iv[i] & ~mask) | (source[i] & mask)
        }
        return iv
    }
}

/// One message-based process: the key, and the message in progress (Begin/Next).
final class MessageCipherOperation: Operation {
    let mechanism: MessageMechanism
    let key: [UInt8]
    let encrypting: Bool
    var generator: IVGenerator?
    var current: Message?

    /// A message between Begin and the part with CKF_END_OF_MESSAGE.
    final class Message {
        let iv: [UInt8]
        let tagBytes: Int
        let aad: [UInt8]
        /// Encryption: the stream. Decryption: nil (the ciphertext is collected).
        let stream: AEADContext?
        var collected: [UInt8] = []

        init(iv: [UInt8], tagBytes: Int, aad: [UInt8], stream: AEADContext?) {
            self.iv = iv
            self.tagBytes = tagBytes
            self.aad = aad
            self.stream = stream
        }
    }

    init(mechanism: MessageMechanism, key: [UInt8], encrypting: Bool) {
        self.mechanism = mechanism
        self.key = key
        self.encrypting = encrypting
    }

    /// The process's EVP context, keyed once at the first message; each
    /// message restarts it with its own IV and AAD (the key schedule and
    /// GCM's hash key are not redone per message).
    private var context: AEADContext?

    /// The context, restarted for a message with `iv` and `aad`.
    func start(iv: [UInt8], aad: UnsafeRawBufferPointer) throws -> AEADContext {
        if let c = context {
            do {
                try iv.withUnsafeBytes { try c.restart(iv: $0, aad: aad) }
                return c
            } catch {
                context = nil
                throw error
            }
        }
        let c = try AEADContext(mechanism.aead, key: key, iv: iv, aad: Array(aad), encrypt: encrypting)
        context = c
        return c
    }

    /// The IV for a new encrypted message, and whether it was generated
    /// (then the C layer writes it back to pIv).
    func iv(for p: MessageParameters) throws -> (iv: [UInt8], generated: Bool) {
        guard encrypting, p.generator != CK_ULONG(CKG_NO_GENERATE) else { return (p.iv, false) }
        if generator == nil { generator = try IVGenerator(p) }
        guard generator!.matches(p) else { throw PKCS11Error.argumentsBad }
        return (try generator!.make(from: p.iv), true)
    }

    /// The tag of the mechanism: GCM's 4-16 bytes, ChaCha20-Poly1305's 16.
    func checkTag(_ p: MessageParameters) throws {
        if mechanism == .chacha20Poly1305, p.tagBytes != AEADAlgorithm.chachaTagSize { throw PKCS11Error.argumentsBad }
        if !encrypting, p.tag.count != p.tagBytes { throw PKCS11Error.argumentsBad }
    }
}

/// What a direct C_EncryptMessage produced: the output count (the bytes
/// are in the caller's buffer), and the IV and tag to write back.
public struct DirectMessageOutput: Sendable, Equatable {
    public var result: DirectOutput
    public var iv: [UInt8]?
    public var tag: [UInt8]?
}

/// Runs `body` with the bytes of an optional array (nil stays nil).
func withOptionalBytes<R>(_ a: [UInt8]?, _ body: (UnsafeRawBufferPointer?) throws -> R) rethrows -> R {
    guard let a else { return try body(nil) }
    return try a.withUnsafeBytes { try body($0) }
}

/// What an encrypting message call produced: the output, and the IV and
/// tag the C layer writes back to the caller's parameter (nil: nothing to write).
public struct MessageOutput: Sendable, Equatable {
    public var result: OutputResult
    public var iv: [UInt8]?
    public var tag: [UInt8]?

    public init(result: OutputResult, iv: [UInt8]?, tag: [UInt8]?) {
        self.result = result
        self.iv = iv
        self.tag = tag
    }
}

extension Session {
    /// The message process of `kind` with the session lock held. Unlike
    /// `step`, an error does not end the process (see the file comment);
    /// `body` ends the message it was in when it fails.
    func withMessageOperation<R>(_ kind: OperationKind, _ body: (MessageCipherOperation) throws -> R) throws -> R {
        try lock.withLock {
            guard let op = operations[kind] as? MessageCipherOperation else { throw PKCS11Error.operationNotInitialized }
            return try body(op)
        }
    }
}

extension Runtime {
    /// C_MessageEncryptInit / C_MessageDecryptInit: the key must be the
    /// mechanism's (CKK_AES for GCM, CKK_CHACHA20 for ChaCha20-Poly1305) and
    /// have CKA_ENCRYPT / CKA_DECRYPT.
    /// `type` as `encryptInit`'s.
    public func messageInit(session h: CK_SESSION_HANDLE, encrypt: Bool, mechanism: MessageMechanism,
                            key: CK_OBJECT_HANDLE, allowing type: CK_MECHANISM_TYPE? = nil) throws {
        try messageInit(session: try session(h), encrypt: encrypt, mechanism: mechanism, key: key, allowing: type)
    }

    public func messageInit(session s: Session, encrypt: Bool, mechanism: MessageMechanism,
                            key: CK_OBJECT_HANDLE, allowing type: CK_MECHANISM_TYPE? = nil) throws {
        let kind: OperationKind = encrypt ? .messageEncrypt : .messageDecrypt
        guard !s.isActive(kind) else { throw PKCS11Error.operationActive }
        let view = try resolveKey(s, key, allowing: type)
        let value: [UInt8]
        switch mechanism {
        case .aesGCM: value = try aesKey(view, encrypting: encrypt)
        case .chacha20Poly1305: value = try chachaKey(view)
        }
        guard view.bool(encrypt ? CKA_ENCRYPT : CKA_DECRYPT) == true else { throw PKCS11Error.keyFunctionNotPermitted }
        try s.begin(kind, MessageCipherOperation(mechanism: mechanism, key: value, encrypting: encrypt))
    }

    /// C_MessageEncryptFinal / C_MessageDecryptFinal: ends the process, and
    /// a message left unfinished with it (its tag was never given out). NSS
    /// softoken does the same; Kryoptic answers CKR_OPERATION_ACTIVE then.
    public func messageFinal(session h: CK_SESSION_HANDLE, encrypt: Bool) throws {
        let s = try session(h)
        let kind: OperationKind = encrypt ? .messageEncrypt : .messageDecrypt
        guard s.isActive(kind) else { throw PKCS11Error.operationNotInitialized }
        s.end(kind)
    }

    /// The mechanism of the active process, which tells the C layer how to
    /// read the per-message parameter; CKR_OPERATION_NOT_INITIALIZED without one.
    public func messageMechanism(session h: CK_SESSION_HANDLE, encrypt: Bool) throws -> MessageMechanism {
        try session(h).withMessageOperation(encrypt ? .messageEncrypt : .messageDecrypt) { $0.mechanism }
    }

    /// Ends the message in progress (not the process), for an argument
    /// error the C layer finds before it reaches the process (a NULL length
    /// pointer in C_EncryptMessageNext, say).
    public func abandonMessage(session h: CK_SESSION_HANDLE, encrypt: Bool) {
        guard let s = try? session(h) else { return }
        _ = try? s.withMessageOperation(encrypt ? .messageEncrypt : .messageDecrypt) { $0.current = nil }
    }

    /// C_EncryptMessage straight between the caller's buffers: the
    /// per-message parameter read with the process's mechanism, the
    /// ciphertext into `output`, and the IV (when generated) and tag for the
    /// C layer to write back through the returned pointers. The C layer's
    /// session (looked up once, for the argument order) and one lock for the
    /// whole call: this is the per-message path.
    public func encryptMessage(session s: Session, parameter: UnsafeRawBufferPointer?,
                               aad: UnsafeRawBufferPointer?, plaintext: UnsafeRawBufferPointer?,
                               output: UnsafeMutableRawPointer?, capacity: Int?) throws
        -> (DirectMessageOutput, MessageParameters.Pointers) {
        try s.withMessageOperation(.messageEncrypt) { op in
            guard let parameter, parameter.count > 0 else { throw PKCS11Error.argumentsBad }
            let (p, pointers) = try MessageParameters.decode(op.mechanism, parameter, readTag: false)
            // The tag goes straight to the caller's pTag (no array), the
            // output's length having been checked against ulTagBits.
            let tagTo = pointers.tagLength == p.tagBytes ? pointers.tag : nil
            return (try Self.encryptMessage(op, p, aad: aad, plaintext: plaintext, output: output, capacity: capacity,
                                            tagInto: tagTo), pointers)
        }
    }

    /// C_EncryptMessage with decoded parameters (the Swift tests' entry).
    public func encryptMessage(session h: CK_SESSION_HANDLE, parameters p: MessageParameters,
                               aad: UnsafeRawBufferPointer?, plaintext: UnsafeRawBufferPointer?,
                               output: UnsafeMutableRawPointer?, capacity: Int?) throws -> DirectMessageOutput {
        try session(h).withMessageOperation(.messageEncrypt) { op in
            try Self.encryptMessage(op, p, aad: aad, plaintext: plaintext, output: output, capacity: capacity)
        }
    }

    /// The body of C_EncryptMessage, with the session lock held. Buffers
    /// that overlap other than exactly go through a copy of the input.
    /// `tagInto`: where the tag goes (the caller's pTag, p.tagBytes long),
    /// written only when the message is; nil: returned in the output.
    private static func encryptMessage(_ op: MessageCipherOperation, _ p: MessageParameters, aad: UnsafeRawBufferPointer?,
                                       plaintext: UnsafeRawBufferPointer?, output: UnsafeMutableRawPointer?,
                                       capacity: Int?, tagInto: UnsafeMutableRawPointer? = nil) throws -> DirectMessageOutput {
        guard op.current == nil else {
            op.current = nil
            throw PKCS11Error.operationActive
        }
        guard let aad, let plaintext else { throw PKCS11Error.argumentsBad }
        try op.checkTag(p)
        switch OutputResult.decide(needed: plaintext.count, capacity: capacity) {
        case .length(let n)?: return DirectMessageOutput(result: .length(n), iv: nil, tag: nil)
        case .tooSmall(let n)?: return DirectMessageOutput(result: .tooSmall(n), iv: nil, tag: nil)
        default: break
        }
        guard let output else { throw PKCS11Error.argumentsBad }
        let (iv, generated) = try op.iv(for: p)
        let ctx = try op.start(iv: iv, aad: aad)
        let out = UnsafeMutableRawBufferPointer(start: output, count: plaintext.count)
        let n: Int
        if let i = plaintext.baseAddress, i != UnsafeRawPointer(output), i < UnsafeRawPointer(output) + plaintext.count,
           UnsafeRawPointer(output) < i + plaintext.count {
            n = try Array(plaintext).withUnsafeBytes { try ctx.update($0, into: out) }
        } else {
            n = try ctx.update(plaintext, into: out)
        }
        if let tagInto {
            try ctx.finishEncrypt(tagInto: UnsafeMutableRawBufferPointer(start: tagInto, count: p.tagBytes))
            return DirectMessageOutput(result: .written(n), iv: generated ? iv : nil, tag: nil)
        }
        let tag = try ctx.finishEncrypt(tagLength: p.tagBytes)
        return DirectMessageOutput(result: .written(n), iv: generated ? iv : nil, tag: tag)
    }

    /// C_EncryptMessage with arrays (the Swift tests' form of the call above).
    public func encryptMessage(session h: CK_SESSION_HANDLE, parameters p: MessageParameters, aad: [UInt8]?,
                               plaintext: [UInt8]?, capacity: Int?) throws -> MessageOutput {
        var out = [UInt8](repeating: 0, count: Swift.max(1, capacity ?? 0))
        let d = try withOptionalBytes(aad) { a in
            try withOptionalBytes(plaintext) { pt in
                try out.withUnsafeMutableBytes { o in
                    try encryptMessage(session: h, parameters: p, aad: a, plaintext: pt,
                                       output: capacity == nil ? nil : o.baseAddress, capacity: capacity)
                }
            }
        }
        switch d.result {
        case .length(let n): return MessageOutput(result: .length(n), iv: d.iv, tag: d.tag)
        case .tooSmall(let n): return MessageOutput(result: .tooSmall(n), iv: d.iv, tag: d.tag)
        case .written(let n): return MessageOutput(result: .bytes(Array(out[..<n])), iv: d.iv, tag: d.tag)
        }
    }

    /// C_DecryptMessage: the plaintext, after the tag (read from pTag) is verified.
    public func decryptMessage(session h: CK_SESSION_HANDLE, parameters p: MessageParameters, aad: [UInt8]?,
                               ciphertext: [UInt8]?, capacity: Int?) throws -> OutputResult {
        try session(h).withMessageOperation(.messageDecrypt) { op in
            guard op.current == nil else {
                op.current = nil
                throw PKCS11Error.operationActive
            }
            guard let aad, let ciphertext else { throw PKCS11Error.argumentsBad }
            try op.checkTag(p)
            if let r = OutputResult.decide(needed: ciphertext.count, capacity: capacity) { return r }
            return .bytes(try Self.open(op, iv: p.iv, aad: aad, ciphertext: ciphertext, tag: p.tag))
        }
    }

    /// C_EncryptMessageBegin / C_DecryptMessageBegin: a message in parts
    /// starts. Returns the generated IV to write back (encryption), or nil.
    public func messageBegin(session h: CK_SESSION_HANDLE, encrypt: Bool, parameters p: MessageParameters,
                             aad: [UInt8]?) throws -> [UInt8]? {
        try session(h).withMessageOperation(encrypt ? .messageEncrypt : .messageDecrypt) { op in
            guard op.current == nil else {
                op.current = nil
                throw PKCS11Error.operationActive
            }
            guard let aad else { throw PKCS11Error.argumentsBad }
            if encrypt {
                if op.mechanism == .chacha20Poly1305, p.tagBytes != AEADAlgorithm.chachaTagSize { throw PKCS11Error.argumentsBad }
                let (iv, generated) = try op.iv(for: p)
                let stream = try aad.withUnsafeBytes { try op.start(iv: iv, aad: $0) }
                op.current = MessageCipherOperation.Message(iv: iv, tagBytes: p.tagBytes, aad: [], stream: stream)
                return generated ? iv : nil
            }
            // The tag comes with the last part; only its length is known now.
            op.current = MessageCipherOperation.Message(iv: p.iv, tagBytes: p.tagBytes, aad: aad, stream: nil)
            return nil
        }
    }

    /// C_EncryptMessageNext: the ciphertext of `part` at once (a counter
    /// mode), and with `last` the tag. An error ends the message.
    public func encryptMessageNext(session h: CK_SESSION_HANDLE, parameters p: MessageParameters, part: [UInt8]?,
                                   capacity: Int?, last: Bool) throws -> MessageOutput {
        try session(h).withMessageOperation(.messageEncrypt) { op in
            guard let m = op.current, let stream = m.stream else { throw PKCS11Error.operationNotInitialized }
            do {
                guard let part else { throw PKCS11Error.argumentsBad }
                // The parameter must describe the message Begin started (Kryoptic checks the same).
                guard p.iv.count == m.iv.count, p.tagBytes == m.tagBytes else { throw PKCS11Error.argumentsBad }
                if let r = OutputResult.decide(needed: part.count, capacity: capacity) {
                    return MessageOutput(result: r, iv: nil, tag: nil)
                }
                let ct = try stream.update(part)
                guard last else { return MessageOutput(result: .bytes(ct), iv: nil, tag: nil) }
                let tag = try stream.finishEncrypt(tagLength: m.tagBytes)
                op.current = nil
                return MessageOutput(result: .bytes(ct), iv: nil, tag: tag)
            } catch {
                op.current = nil
                throw error
            }
        }
    }

    /// C_DecryptMessageNext: collects the ciphertext; the part with `last`
    /// carries the tag and gets the whole plaintext, once verified.
    public func decryptMessageNext(session h: CK_SESSION_HANDLE, parameters p: MessageParameters, part: [UInt8]?,
                                   capacity: Int?, last: Bool) throws -> OutputResult {
        try session(h).withMessageOperation(.messageDecrypt) { op in
            guard let m = op.current, m.stream == nil else { throw PKCS11Error.operationNotInitialized }
            do {
                guard let part else { throw PKCS11Error.argumentsBad }
                guard p.iv == m.iv, p.tagBytes == m.tagBytes else { throw PKCS11Error.argumentsBad }
                let needed = last ? m.collected.count + part.count : 0
                if let r = OutputResult.decide(needed: needed, capacity: capacity) { return r }
                guard m.collected.count + part.count <= 1 << 26 else { throw PKCS11Error(CKR_ENCRYPTED_DATA_LEN_RANGE) }
                m.collected += part
                guard last else { return .bytes([]) }
                try op.checkTag(p)
                op.current = nil
                return .bytes(try Self.open(op, iv: m.iv, aad: m.aad, ciphertext: m.collected, tag: p.tag))
            } catch {
                op.current = nil
                throw error
            }
        }
    }

    /// One AEAD decryption; a tag that does not verify is CKR_ENCRYPTED_DATA_INVALID.
    private static func open(_ op: MessageCipherOperation, iv: [UInt8], aad: [UInt8], ciphertext: [UInt8],
                             tag: [UInt8]) throws -> [UInt8] {
        let ctx = try aad.withUnsafeBytes { try op.start(iv: iv, aad: $0) }
        var pt = try ctx.update(ciphertext)
        do {
            try ctx.finishDecrypt(tag: tag)
        } catch {
            for i in pt.indices { pt[i] = 0 }
            throw PKCS11Error(CKR_ENCRYPTED_DATA_INVALID)
        }
        return pt
    }
}
