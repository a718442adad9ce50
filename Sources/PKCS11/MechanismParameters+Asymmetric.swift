import CPKCS11
import KeyshareCrypto

/// CK_EDDSA_PARAMS copied at C_SignInit / C_VerifyInit: which RFC 8032
/// instance the caller asks for. What each means for which key (and what
/// OpenSSL 3.0 can do) is decided in `EdDSAVariant` once the key is known.
public struct EdDSAParameters: Sendable, Equatable {
    public var prehash: Bool
    public var context: [UInt8]
}

/// CK_RSA_AES_KEY_WRAP_PARAMS: the size of the ephemeral AES key and the
/// OAEP parameters that wrap it.
public struct RSAAESKeyWrapParameters: Sendable, Equatable {
    public var aesKeyBytes: Int
    public var oaep: OAEPParameters
}

extension Mechanism {
    /// CKM_EDDSA's optional CK_EDDSA_PARAMS (PKCS #11 3.0 §2.3.14). RFC 8032
    /// caps a context at 255 bytes; longer is CKR_MECHANISM_PARAM_INVALID.
    static func eddsa(_ p: [UInt8]) throws -> EdDSAParameters {
        let raw = try load(p, as: CK_EDDSA_PARAMS.self)
        let context = try copy(raw.pContextData, raw.ulContextDataLen, max: 255)
        return EdDSAParameters(prehash: raw.phFlag != 0, context: context)
    }

    /// CKM_RSA_AES_KEY_WRAP (§2.1.21): ulAESKeyBits 128, 192 or 256, and the
    /// OAEP parameters, which are required (a NULL pOAEPParams is
    /// CKR_MECHANISM_PARAM_INVALID, never a crash).
    static func rsaAESKeyWrap(_ p: [UInt8]) throws -> RSAAESKeyWrapParameters {
        let raw = try load(p, as: CK_RSA_AES_KEY_WRAP_PARAMS.self)
        guard raw.ulAESKeyBits % 8 == 0, let bytes = Int(exactly: raw.ulAESKeyBits / 8),
              RSAAESKeyWrap.aesKeyBytes.contains(bytes) else { throw PKCS11Error.mechanismParamInvalid }
        guard let ptr = raw.pOAEPParams else { throw PKCS11Error.mechanismParamInvalid }
        let oaepBytes = Array(UnsafeRawBufferPointer(start: UnsafeRawPointer(ptr),
                                                     count: MemoryLayout<CK_RSA_PKCS_OAEP_PARAMS>.size))
        return RSAAESKeyWrapParameters(aesKeyBytes: bytes, oaep: try oaep(oaepBytes))
    }
}
