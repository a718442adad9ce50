import COpenSSL

/// The key-derivation functions of the PKCS #11 derive and generate
/// mechanisms: HKDF (RFC 5869), PBKDF2 (RFC 8018 §5.2) and the SP 800-108
/// counter and feedback modes. Inputs are byte strings; what they mean in
/// PKCS #11 terms (which key, which template) is the PKCS11 layer's.
public enum KDF {
    /// RFC 5869 §2.2: PRK = HMAC-Hash(salt, IKM). A nil salt is the RFC's
    /// "string of HashLen zeros".
    public static func hkdfExtract(_ d: DigestAlgorithm, salt: [UInt8]?, ikm: [UInt8]) throws -> [UInt8] {
        try HMAC.mac(d, key: salt ?? [UInt8](repeating: 0, count: d.outputSize), data: ikm)
    }

    /// RFC 5869 §2.3: T(i) = HMAC-Hash(PRK, T(i-1) | info | i), the first
    /// `length` bytes of T(1) | T(2) | ...; `length` at most 255 * HashLen.
    public static func hkdfExpand(_ d: DigestAlgorithm, prk: [UInt8], info: [UInt8], length: Int) throws -> [UInt8] {
        guard length >= 0, length <= 255 * d.outputSize else {
            throw CryptoError(.invalidInput, "HKDF expand", reason: "length above 255 * HashLen")
        }
        let keyed = try MACContext(.hmac(d), key: prk)
        var okm: [UInt8] = []
        okm.reserveCapacity(length)
        var t: [UInt8] = []
        var i: UInt8 = 1
        while okm.count < length {
            let ctx = try keyed.copy()
            try ctx.update(t)
            try ctx.update(info)
            try ctx.update([i])
            t = try ctx.finish()
            okm += t
            i &+= 1
        }
        for j in t.indices { t[j] = 0 }
        return Array(okm.prefix(length))
    }

    /// PBKDF2-HMAC (RFC 8018 §5.2) through OpenSSL's PKCS5_PBKDF2_HMAC,
    /// which applies no SP 800-132 lower bounds (the RFC 6070 vectors use a
    /// 4-byte salt and one iteration).
    public static func pbkdf2(_ d: DigestAlgorithm, password: [UInt8], salt: [UInt8], iterations: Int,
                              length: Int) throws -> [UInt8] {
        guard iterations >= 1, iterations <= Int(Int32.max), length >= 1, length <= Int(Int32.max),
              password.count <= Int(Int32.max), salt.count <= Int(Int32.max) else {
            throw CryptoError(.invalidInput, "PBKDF2", reason: "iterations or length out of range")
        }
        CryptoError.clearQueue()
        var out = [UInt8](repeating: 0, count: length)
        // Empty inputs still need valid pointers; the lengths exclude the extra byte.
        let pw = password.map { CChar(bitPattern: $0) } + [0]
        let s = salt + [0]
        let ok = pw.withUnsafeBufferPointer { p in
            s.withUnsafeBufferPointer { sp in
                out.withUnsafeMutableBufferPointer { o in
                    PKCS5_PBKDF2_HMAC(p.baseAddress, Int32(password.count), sp.baseAddress, Int32(salt.count),
                                      Int32(iterations), d.md, Int32(length), o.baseAddress)
                }
            }
        }
        guard ok == 1 else { throw CryptoError.openssl("PBKDF2") }
        return out
    }
}

/// NIST SP 800-108r1 KDFs in counter mode (§4.1) and feedback mode (§4.2),
/// with the PRF input laid out field by field as the caller says (PKCS #11's
/// CK_PRF_DATA_PARAM arrays allow any order, widths and endianness, which
/// OpenSSL's KBKDF, fixed to [i] || Label || 0x00 || Context || [L] with
/// big-endian fields, cannot express). The loop is the standard's:
///   counter:  K(i) = PRF(K_I, fields with i),            i = 1..n
///   feedback: K(i) = PRF(K_I, fields with K(i-1) and i), K(0) = IV
/// and the output is K(1) || ... || K(n).
public enum SP800108 {
    public enum Mode: Sendable, Equatable {
        case counter
        case feedback(iv: [UInt8])
    }

    /// One piece of the PRF input.
    public enum Field: Sendable, Equatable {
        /// The loop counter i as an unsigned integer of `bits` bits (8, 16, 24 or 32).
        case counter(bits: Int, littleEndian: Bool)
        /// Feedback mode's K(i-1) (the IV for i = 1).
        case previousBlock
        /// L, the length of the derived keying material, in `bits` bits (8 to 64).
        case length(bits: Int, littleEndian: Bool)
        case bytes([UInt8])
    }

    /// Encodes `value` in `bits` bits (a multiple of 8, at most 64); nil
    /// when it does not fit.
    public static func encode(_ value: UInt64, bits: Int, littleEndian: Bool) -> [UInt8]? {
        guard bits % 8 == 0, (8...64).contains(bits) else { return nil }
        if bits < 64, value >> UInt64(bits) != 0 { return nil }
        let n = bits / 8
        var be = [UInt8](repeating: 0, count: n)
        for i in 0..<n { be[n - 1 - i] = UInt8(truncatingIfNeeded: value >> UInt64(8 * i)) }
        return littleEndian ? be.reversed() : be
    }

    /// `blocks` PRF outputs concatenated. `lengthValue` is what a `.length`
    /// field encodes (in bits). Throws when the counter or the length does
    /// not fit its width.
    public static func derive(prf: MACAlgorithm, key: [UInt8], mode: Mode, fields: [Field], lengthValue: UInt64,
                              blocks: Int) throws -> [UInt8] {
        guard blocks >= 1 else { throw CryptoError(.invalidInput, "SP 800-108", reason: "no output asked for") }
        let keyed = try MACContext(prf, key: key)
        var out: [UInt8] = []
        out.reserveCapacity(blocks * prf.outputSize)
        var previous: [UInt8]
        if case .feedback(let iv) = mode { previous = iv } else { previous = [] }
        for i in 1...blocks {
            let ctx = try keyed.copy()
            for f in fields {
                switch f {
                case .counter(let bits, let le):
                    guard bits <= 32, let b = encode(UInt64(i), bits: bits, littleEndian: le) else {
                        throw CryptoError(.invalidInput, "SP 800-108", reason: "counter does not fit its width")
                    }
                    try ctx.update(b)
                case .previousBlock:
                    try ctx.update(previous)
                case .length(let bits, let le):
                    guard let b = encode(lengthValue, bits: bits, littleEndian: le) else {
                        throw CryptoError(.invalidInput, "SP 800-108", reason: "length does not fit its width")
                    }
                    try ctx.update(b)
                case .bytes(let b):
                    try ctx.update(b)
                }
            }
            previous = try ctx.finish()
            out += previous
        }
        return out
    }
}
