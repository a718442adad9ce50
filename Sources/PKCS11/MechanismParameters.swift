import CPKCS11
import KeyshareCrypto

/// CK_RSA_PKCS_OAEP_PARAMS copied out of the caller's memory at C_*Init.
public struct OAEPParameters: Sendable, Equatable {
    public var hash: DigestAlgorithm
    public var mgf1: DigestAlgorithm
    public var label: [UInt8]
}

/// CK_GCM_PARAMS copied at C_*Init (the IV and AAD pointers die with the call).
public struct GCMParameters: Sendable, Equatable {
    public var iv: [UInt8]
    public var aad: [UInt8]
    public var tagBytes: Int
}

/// CK_ECDH1_DERIVE_PARAMS: the KDF (nil for CKD_NULL), shared info and the peer's point.
public struct ECDHParameters: Sendable, Equatable {
    public var kdf: DigestAlgorithm?
    public var sharedData: [UInt8]
    public var publicData: [UInt8]
    /// CKM_ECDH1_COFACTOR_DERIVE rather than CKM_ECDH1_DERIVE.
    public var cofactor = false
}

/// Decoding of the pointer-carrying parameters. Every length is checked
/// before a pointer is read, and a NULL pointer with a non-zero length is
/// CKR_MECHANISM_PARAM_INVALID, never a crash.
extension Mechanism {
    /// The struct a parameter must be, exactly (a wrong ulParameterLen is the
    /// commonest caller bug; it is refused rather than read past).
    static func load<T>(_ p: [UInt8], as: T.Type) throws -> T {
        guard p.count == MemoryLayout<T>.size else { throw PKCS11Error.mechanismParamInvalid }
        return p.withUnsafeBytes { $0.loadUnaligned(as: T.self) }
    }

    /// Bytes behind a (pointer, length) pair inside a parameter struct.
    static func copy(_ ptr: UnsafeRawPointer?, _ len: CK_ULONG, max: Int = 1 << 20) throws -> [UInt8] {
        guard let n = Int(exactly: len), n <= max else { throw PKCS11Error.mechanismParamInvalid }
        if n == 0 { return [] }
        guard let ptr else { throw PKCS11Error.mechanismParamInvalid }
        return Array(UnsafeRawBufferPointer(start: ptr, count: n))
    }

    static func oaep(_ p: [UInt8]) throws -> OAEPParameters {
        let raw = try load(p, as: CK_RSA_PKCS_OAEP_PARAMS.self)
        guard let hash = digestOf[raw.hashAlg], let mgf = mgf1[raw.mgf] else { throw PKCS11Error.mechanismParamInvalid }
        var label: [UInt8] = []
        switch raw.source {
        case 0: guard raw.ulSourceDataLen == 0 else { throw PKCS11Error.mechanismParamInvalid }
        case CK_ULONG(CKZ_DATA_SPECIFIED):
            label = try copy(raw.pSourceData, raw.ulSourceDataLen, max: 1 << 16)
        default: throw PKCS11Error.mechanismParamInvalid
        }
        return OAEPParameters(hash: hash, mgf1: mgf, label: label)
    }

    static func gcm(_ p: [UInt8]) throws -> GCMParameters {
        let raw = try load(p, as: CK_GCM_PARAMS.self)
        let iv = try copy(raw.pIv, raw.ulIvLen, max: 256)
        guard !iv.isEmpty else { throw PKCS11Error.mechanismParamInvalid }
        // ulIvLen is authoritative. PKCS #11 3.0 §2.12.3 (CK_GCM_PARAMS) and
        // its errata: "Do not use ulIvBits to specify the length of the
        // initialization vector, but ulIvLen instead"; callers fill ulIvBits
        // inconsistently (0, 8*ulIvLen, or garbage from 2.40 code), and
        // SoftHSM2, Kryoptic and NSS ignore it, so a disagreeing value is
        // tolerated, not CKR_MECHANISM_PARAM_INVALID.
        let aad = try copy(raw.pAAD, raw.ulAADLen)
        guard raw.ulTagBits % 8 == 0, (32...128).contains(raw.ulTagBits) else { throw PKCS11Error.mechanismParamInvalid }
        return GCMParameters(iv: iv, aad: aad, tagBytes: Int(raw.ulTagBits / 8))
    }

    /// CKM_AES_CBC / CKM_AES_CBC_PAD: the parameter is the 16-byte IV itself.
    static func cbcIV(_ p: [UInt8]) throws -> [UInt8] {
        guard p.count == 16 else { throw PKCS11Error.mechanismParamInvalid }
        return p
    }

    static let kdfDigest: [CK_ULONG: DigestAlgorithm] = [
        CK_ULONG(CKD_SHA1_KDF): .sha1, CK_ULONG(CKD_SHA224_KDF): .sha224,
        CK_ULONG(CKD_SHA256_KDF): .sha256, CK_ULONG(CKD_SHA384_KDF): .sha384,
        CK_ULONG(CKD_SHA512_KDF): .sha512,
    ]

    static func ecdh(_ p: [UInt8]) throws -> ECDHParameters {
        let raw = try load(p, as: CK_ECDH1_DERIVE_PARAMS.self)
        var kdf: DigestAlgorithm?
        if raw.kdf != CK_ULONG(CKD_NULL) {
            guard let d = kdfDigest[raw.kdf] else { throw PKCS11Error.mechanismParamInvalid }
            kdf = d
        }
        let shared = try copy(raw.pSharedData, raw.ulSharedDataLen, max: 1 << 16)
        // CKD_NULL takes no shared data (PKCS #11 3.0 §2.3.15).
        if kdf == nil, !shared.isEmpty { throw PKCS11Error.mechanismParamInvalid }
        // Empty only for C_EncapsulateKey / C_DecapsulateKey (3.2 elliptic_curves.md: "must be set to
        // NULL and 0"); C_DeriveKey refuses it (Derive.swift).
        let pub = try copy(raw.pPublicData, raw.ulPublicDataLen, max: 1024)
        return ECDHParameters(kdf: kdf, sharedData: shared, publicData: pub)
    }
}
