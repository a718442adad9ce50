import CPKCS11
import KeyshareCrypto

// Parameter decoding of the symmetric mechanisms added for issue 13
// (PKCS #11 3.0 Current Mechanisms §2.10 AES, §2.11 AES-CTR / CTS / CMAC,
// §2.14 key wrap, §2.29 DES/3DES, §2.43 ChaCha20-Poly1305, and the
// message-based parameters of §2.12.3 / §2.43). As in
// MechanismParameters.swift, every length is checked before a pointer is
// read, a NULL pointer with a non-zero length is an error, never a crash.

/// DES or Triple DES in ECB or CBC mode (SymmetricCipher.swift).
public struct DESMechanism: Sendable, Equatable {
    public var variant: DES.Variant
    public var mode: DES.Mode
    /// The 8-byte IV (CBC only).
    public var iv: [UInt8]
    public var pad: Bool
}

/// CK_SALSA20_CHACHA20_POLY1305_PARAMS copied at C_*Init.
public struct ChaChaPolyParameters: Sendable, Equatable {
    public var nonce: [UInt8]
    public var aad: [UInt8]
}

/// The per-message parameter of C_EncryptMessage / C_DecryptMessage and
/// their Begin/Next forms (CK_GCM_MESSAGE_PARAMS or
/// CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS), copied out of the caller's
/// memory. The C layer keeps the struct's pointers to write back the IV a
/// generator made and the tag (MessageCrypto.swift).
public struct MessageParameters: Sendable, Equatable {
    /// The IV / nonce as the caller passed it (the fixed part, for a generator).
    public var iv: [UInt8]
    public var ivFixedBits: Int
    public var generator: CK_ULONG
    public var tagBytes: Int
    /// The tag read from pTag (decryption only).
    public var tag: [UInt8]

    public init(iv: [UInt8], ivFixedBits: Int = 0, generator: CK_ULONG = CK_ULONG(CKG_NO_GENERATE), tagBytes: Int,
                tag: [UInt8] = []) {
        self.iv = iv
        self.ivFixedBits = ivFixedBits
        self.generator = generator
        self.tagBytes = tagBytes
        self.tag = tag
    }
}

/// Which AEAD a message-based operation runs (C_MessageEncryptInit's mechanism).
public enum MessageMechanism: Sendable, Equatable {
    case aesGCM
    case chacha20Poly1305

    var aead: AEADAlgorithm { self == .aesGCM ? .aesGCM : .chacha20Poly1305 }

    /// C_MessageEncryptInit / C_MessageDecryptInit: the per-message
    /// parameters come with each message, so the mechanism's own parameter
    /// is empty. A caller may also pass a message-parameter struct there
    /// (the cryptoki crate does); it is accepted and ignored, as NSS
    /// softoken and Kryoptic ignore it. Any other size is refused.
    public init(type: CK_MECHANISM_TYPE, parameter: UnsafeRawBufferPointer?) throws {
        let n = parameter?.count ?? 0
        switch type {
        case CKM_AES_GCM:
            guard n == 0 || n == MemoryLayout<CK_GCM_MESSAGE_PARAMS>.size else { throw PKCS11Error.mechanismParamInvalid }
            self = .aesGCM
        case CKM_CHACHA20_POLY1305:
            guard n == 0 || n == MemoryLayout<CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS>.size else {
                throw PKCS11Error.mechanismParamInvalid
            }
            self = .chacha20Poly1305
        default:
            throw PKCS11Error.mechanismInvalid
        }
    }
}

extension Mechanism {
    /// The symmetric mechanisms of this file, from their CK_MECHANISM.
    static func symmetric(_ type: CK_MECHANISM_TYPE, _ p: [UInt8]) throws -> Mechanism {
        func none() throws { guard p.isEmpty else { throw PKCS11Error.mechanismParamInvalid } }
        func iv(_ n: Int) throws -> [UInt8] {
            guard p.count == n else { throw PKCS11Error.mechanismParamInvalid }
            return p
        }
        switch type {
        case CKM_AES_ECB: try none(); return .aesECB
        case CKM_AES_CTR: return try aesCTR(p)
        case CKM_AES_CTS: return .aesCTS(iv: try iv(16))
        case CKM_AES_CMAC: try none(); return .aesCMAC(macLength: CMACOperation.macSize)
        case CKM_AES_CMAC_GENERAL: return .aesCMAC(macLength: try macLength(p, max: CMACOperation.macSize))
        case CKM_DES_ECB: try none(); return .des(DESMechanism(variant: .des, mode: .ecb, iv: [], pad: false))
        case CKM_DES_CBC: return .des(DESMechanism(variant: .des, mode: .cbc, iv: try iv(8), pad: false))
        case CKM_DES_CBC_PAD: return .des(DESMechanism(variant: .des, mode: .cbc, iv: try iv(8), pad: true))
        case CKM_DES3_ECB: try none(); return .des(DESMechanism(variant: .tripleDES, mode: .ecb, iv: [], pad: false))
        case CKM_DES3_CBC: return .des(DESMechanism(variant: .tripleDES, mode: .cbc, iv: try iv(8), pad: false))
        case CKM_DES3_CBC_PAD: return .des(DESMechanism(variant: .tripleDES, mode: .cbc, iv: try iv(8), pad: true))
        case CKM_CHACHA20_POLY1305: return .chacha20Poly1305(try chachaPoly(p))
        case CKM_DES_KEY_GEN, CKM_DES3_KEY_GEN, CKM_CHACHA20_KEY_GEN: try none(); return .undecoded(type, [])
        default: throw PKCS11Error.mechanismInvalid
        }
    }

    /// CK_AES_CTR_PARAMS: 0 < ulCounterBits <= 128 (SoftHSM2's and
    /// Kryoptic's check), and a counter block with room for at least one block.
    static func aesCTR(_ p: [UInt8]) throws -> Mechanism { try aesCTR(try load(p, as: CK_AES_CTR_PARAMS.self)) }

    static func aesCTR(_ raw: CK_AES_CTR_PARAMS) throws -> Mechanism {
        guard (1...128).contains(raw.ulCounterBits) else { throw PKCS11Error.mechanismParamInvalid }
        let cb = withUnsafeBytes(of: raw.cb) { Array($0) }
        return .aesCTR(counterBlock: cb, counterBits: Int(raw.ulCounterBits))
    }

    /// CK_MAC_GENERAL_PARAMS (a CK_ULONG): 1 to `max` bytes.
    static func macLength(_ p: [UInt8], max: Int) throws -> Int {
        let n = try load(p, as: CK_ULONG.self)
        guard n >= 1, n <= CK_ULONG(max) else { throw PKCS11Error.mechanismParamInvalid }
        return Int(n)
    }

    /// CK_SALSA20_CHACHA20_POLY1305_PARAMS: a 96-bit nonce (RFC 8439).
    /// The 64-bit nonce of the original construction and XChaCha20's
    /// 192-bit one are different algorithms OpenSSL does not offer; they are
    /// refused, as NSS softoken refuses them.
    static func chachaPoly(_ p: [UInt8]) throws -> ChaChaPolyParameters {
        try chachaPoly(try load(p, as: CK_SALSA20_CHACHA20_POLY1305_PARAMS.self))
    }

    static func chachaPoly(_ raw: CK_SALSA20_CHACHA20_POLY1305_PARAMS) throws -> ChaChaPolyParameters {
        let nonce = try copy(raw.pNonce, raw.ulNonceLen, max: 64)
        guard nonce.count == AEADAlgorithm.chachaNonceSize else { throw PKCS11Error.mechanismParamInvalid }
        return ChaChaPolyParameters(nonce: nonce, aad: try copy(raw.pAAD, raw.ulAADLen))
    }

    /// CKM_AES_KEY_WRAP(_PAD): no parameter or the standard IV (RFC 3394
    /// A6A6A6A6A6A6A6A6, RFC 5649 A65959A6) is the plain mechanism; another
    /// IV of the right size (8 or 4 bytes) is the alternative initial value
    /// both RFCs allow, which unwrap must be given again.
    static func keyWrapMechanism(_ p: [UInt8], padded: Bool) throws -> Mechanism {
        if p.isEmpty { return .aesKeyWrap(pad: padded) }
        guard p.count == AESKeyWrap.ivLength(padded: padded) else { throw PKCS11Error.mechanismParamInvalid }
        let standard: [UInt8] = padded ? [0xA6, 0x59, 0x59, 0xA6] : [UInt8](repeating: 0xA6, count: 8)
        return p == standard ? .aesKeyWrap(pad: padded) : .aesKeyWrapWithIV(pad: padded, iv: p)
    }
}

/// Decoding of the per-message parameter structs. Their errors are
/// CKR_ARGUMENTS_BAD: PKCS #11 3.0 lists no CKR_MECHANISM_PARAM_INVALID for
/// C_EncryptMessage and its relatives (Kryoptic answers the same).
extension MessageParameters {
    /// The caller's pIv / pTag, for writing back the generated IV and the tag.
    public struct Pointers {
        public var iv: UnsafeMutableRawPointer?
        public var ivLength: Int
        public var tag: UnsafeMutableRawPointer?
        public var tagLength: Int
    }

    /// - Parameter readTag: decryption reads the tag from pTag.
    public static func decode(_ mechanism: MessageMechanism, _ p: UnsafeRawBufferPointer, readTag: Bool) throws
        -> (MessageParameters, Pointers) {
        switch mechanism {
        case .aesGCM:
            guard p.count == MemoryLayout<CK_GCM_MESSAGE_PARAMS>.size, let base = p.baseAddress else {
                throw PKCS11Error.argumentsBad
            }
            let raw = base.loadUnaligned(as: CK_GCM_MESSAGE_PARAMS.self)
            guard let ivLen = Int(exactly: raw.ulIvLen), (1...256).contains(ivLen), let ivPtr = raw.pIv,
                  raw.ulTagBits % 8 == 0, (32...128).contains(raw.ulTagBits), let tagPtr = raw.pTag,
                  let fixed = Int(exactly: raw.ulIvFixedBits), fixed <= ivLen * 8 else {
                throw PKCS11Error.argumentsBad
            }
            let tagBytes = Int(raw.ulTagBits / 8)
            let iv = Array(UnsafeRawBufferPointer(start: ivPtr, count: ivLen))
            let tag = readTag ? Array(UnsafeRawBufferPointer(start: tagPtr, count: tagBytes)) : []
            let params = MessageParameters(iv: iv, ivFixedBits: fixed, generator: raw.ivGenerator, tagBytes: tagBytes, tag: tag)
            return (params, Pointers(iv: UnsafeMutableRawPointer(ivPtr), ivLength: ivLen,
                                     tag: UnsafeMutableRawPointer(tagPtr), tagLength: tagBytes))
        case .chacha20Poly1305:
            guard p.count == MemoryLayout<CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS>.size, let base = p.baseAddress else {
                throw PKCS11Error.argumentsBad
            }
            let raw = base.loadUnaligned(as: CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS.self)
            guard raw.ulNonceLen == CK_ULONG(AEADAlgorithm.chachaNonceSize), let nonce = raw.pNonce,
                  let tagPtr = raw.pTag else {
                throw PKCS11Error.argumentsBad
            }
            let n = AEADAlgorithm.chachaNonceSize, t = AEADAlgorithm.chachaTagSize
            let iv = Array(UnsafeRawBufferPointer(start: nonce, count: n))
            let tag = readTag ? Array(UnsafeRawBufferPointer(start: tagPtr, count: t)) : []
            return (MessageParameters(iv: iv, tagBytes: t, tag: tag),
                    Pointers(iv: UnsafeMutableRawPointer(nonce), ivLength: n, tag: UnsafeMutableRawPointer(tagPtr), tagLength: t))
        }
    }
}
