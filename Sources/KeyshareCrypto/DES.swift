import COpenSSL

/// DES and Triple DES (three-key, 24-byte keys) in ECB and CBC mode, for
/// CKM_DES_* and CKM_DES3_*. Both are legacy: DES falls to exhaustive
/// search, and 3DES has a 64-bit block (SP 800-67 Rev. 2 limits a key to
/// 2^20 blocks; NIST disallows it for encryption after 2023). They exist
/// for interoperability with old peers; nothing in keyshare makes them by
/// default.
///
/// Single DES lives only in OpenSSL 3's "legacy" provider. It is fetched
/// from a library context of keyshare's own (`LegacyDESContext`), never from
/// the default one: loading a provider into the default context changes
/// what every EVP call of the host process finds, and stops OpenSSL from
/// auto-loading "default" there. Triple DES is in the default provider and
/// is fetched like AES.
public enum DES: Sendable {
    /// CKK_DES (8-byte key) or CKK_DES3 (24-byte key).
    public enum Variant: Sendable, Equatable {
        case des, tripleDES
        public var keySize: Int { self == .des ? 8 : 24 }
    }

    public enum Mode: Sendable, Equatable { case ecb, cbc }

    public static let blockSize = 8

    /// CKK_DES2: two-key Triple DES (K1 K2), 16 bytes.
    public static let twoKeySize = 16

    /// The three-key form K1 K2 K1 of a two-key 3DES key (SP 800-67 Rev. 2
    /// §3.1, keying option 2), which DES-EDE3 runs exactly as two-key DES-EDE.
    public static func expandTwoKey(_ key: [UInt8]) -> [UInt8] {
        precondition(key.count == twoKeySize)
        return key + key[0..<8]
    }

    public static func cipher(_ variant: Variant, _ mode: Mode) throws -> OpaquePointer {
        switch variant {
        case .tripleDES:
            guard let c = mode == .ecb ? Fetched.tdesECB : Fetched.tdesCBC else {
                throw CryptoError(.unsupported, "3DES", reason: "this OpenSSL has no DES-EDE3")
            }
            return c
        case .des:
            let legacy = LegacyDESContext.shared
            guard let c = mode == .ecb ? legacy.ecb : legacy.cbc else {
                throw CryptoError(.unsupported, "DES", reason: legacy.error ?? "the legacy provider has no DES")
            }
            return c
        }
    }

    public static func context(_ variant: Variant, _ mode: Mode, key: [UInt8], iv: [UInt8]?, encrypt: Bool,
                               padding: Bool) throws -> CipherContext {
        guard key.count == variant.keySize else {
            throw CryptoError(.invalidInput, "DES", reason: "key must be \(variant.keySize) bytes")
        }
        return try CipherContext(cipher: try cipher(variant, mode), key: key, iv: mode == .cbc ? iv : nil,
                                 encrypt: encrypt, padding: padding,
                                 operation: variant == .des ? "DES" : "3DES")
    }

    /// Sets each byte's low bit so the byte has an odd number of ones (FIPS
    /// 46-3: the eighth bit of each byte is the parity bit). PKCS #11 3.0
    /// (DES and DES3 secret key objects): generated keys have it set, and a
    /// key created or unwrapped without it is an error.
    public static func setOddParity(_ key: inout [UInt8]) {
        for i in key.indices {
            let high = key[i] & 0xFE
            key[i] = high | (high.nonzeroBitCount % 2 == 0 ? 1 : 0)
        }
    }

    public static func hasOddParity(_ key: [UInt8]) -> Bool {
        key.allSatisfy { $0.nonzeroBitCount % 2 == 1 }
    }
}

/// keyshare's own OSSL_LIB_CTX with the legacy provider, made once, on first
/// use of single DES (a process that never uses it never loads the
/// provider). Never freed: the module stays mapped (-z nodelete) and the
/// fetched ciphers live as long as the process.
final class LegacyDESContext: @unchecked Sendable {
    let context: OpaquePointer?
    let ecb: OpaquePointer?
    let cbc: OpaquePointer?
    /// Why DES is unavailable (the provider is missing, say), or nil.
    let error: String?

    static let shared = LegacyDESContext()

    private init() {
        guard let lib = OSSL_LIB_CTX_new() else {
            (context, ecb, cbc, error) = (nil, nil, nil, "cannot create an OpenSSL library context")
            return
        }
        guard OSSL_PROVIDER_load(lib, "legacy") != nil else {
            let e = CryptoError.openssl("load legacy provider")
            OSSL_LIB_CTX_free(lib)
            (context, ecb, cbc) = (nil, nil, nil)
            error = "OpenSSL legacy provider unavailable (\(e.reason)); install it or set OPENSSL_MODULES"
            return
        }
        context = lib
        ecb = EVP_CIPHER_fetch(lib, "DES-ECB", nil)
        cbc = EVP_CIPHER_fetch(lib, "DES-CBC", nil)
        error = ecb == nil || cbc == nil ? CryptoError.openssl("fetch DES").reason : nil
    }
}

extension Fetched {
    nonisolated(unsafe) static let tdesECB: OpaquePointer? = EVP_CIPHER_fetch(CryptoEngine.context, "DES-EDE3-ECB", nil) ?? EVP_des_ede3_ecb()
    nonisolated(unsafe) static let tdesCBC: OpaquePointer? = EVP_CIPHER_fetch(CryptoEngine.context, "DES-EDE3-CBC", nil) ?? EVP_des_ede3_cbc()
}
