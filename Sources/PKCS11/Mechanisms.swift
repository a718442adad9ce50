import CPKCS11
import KeyshareCrypto

/// RSASSA-PSS parameters (CK_RSA_PKCS_PSS_PARAMS) in Swift terms.
public struct PSSParameters: Sendable, Equatable {
    public var hash: DigestAlgorithm
    public var mgf1: DigestAlgorithm
    public var saltLength: Int
}

/// A CK_MECHANISM decoded once, at C_*Init, into Swift values.
///
/// Extension point: a new mechanism gets a case here, its parameter decoding
/// in `init(type:parameter:)`, its row in `MechanismCatalog`, and a branch in
/// the chapter that runs it (e.g. `SignatureOperation.make`).
public enum Mechanism: Sendable, Equatable {
    case rsaPKCS
    case rsaPKCSWith(DigestAlgorithm)
    case rsaPSS(PSSParameters)
    case rsaPSSWith(DigestAlgorithm, PSSParameters)
    case rsaX509
    case ecdsa
    case ecdsaWith(DigestAlgorithm)
    case eddsa
    case digest(DigestAlgorithm)
    /// CKM_RSA_PKCS_OAEP (Cipher.swift).
    case rsaOAEP(OAEPParameters)
    /// CKM_AES_CBC (pad false) and CKM_AES_CBC_PAD (pad true), with the IV.
    case aesCBC(iv: [UInt8], pad: Bool)
    case aesGCM(GCMParameters)
    /// CKM_SHA*_HMAC (HMACSign.swift).
    case hmac(DigestAlgorithm)
    /// CKM_ECDH1_DERIVE (Derive.swift).
    case ecdh(ECDHParameters)
    /// CKM_AES_KEY_WRAP (pad false) and CKM_AES_KEY_WRAP_PAD (Wrap.swift).
    case aesKeyWrap(pad: Bool)
    // Digest, MAC and key-derivation mechanisms: decoded in
    // MechanismParameters+KDF.swift, run in HMACSign.swift, KeyDerivation.swift
    // and SecretKeyGeneration.swift.
    /// CKM_SHA*_HMAC_GENERAL: HMAC truncated to `length` bytes (CK_MAC_GENERAL_PARAMS).
    case hmacGeneral(DigestAlgorithm, length: Int)
    /// CKM_HKDF_DERIVE (`data` false) and CKM_HKDF_DATA (`data` true: a CKO_DATA result).
    case hkdf(HKDFParameters, data: Bool)
    /// CKM_SP800_108_COUNTER_KDF and CKM_SP800_108_FEEDBACK_KDF.
    case sp800108(SP800108Parameters)
    /// CKM_PKCS5_PBKD2, a C_GenerateKey mechanism.
    case pbkdf2(PBKDF2Parameters)
    /// CKM_CONCATENATE_BASE_AND_KEY / _BASE_AND_DATA / _DATA_AND_BASE,
    /// CKM_XOR_BASE_AND_DATA, CKM_EXTRACT_KEY_FROM_KEY.
    case simpleDerive(SimpleDerivation)
    // Asymmetric additions (issue 13; MechanismParameters+Asymmetric.swift).
    /// CKM_EDDSA with CK_EDDSA_PARAMS (Sign.swift, EdDSAVariant).
    case eddsaWith(EdDSAParameters)
    /// CKM_RSA_AES_KEY_WRAP (RSAWrap.swift).
    case rsaAESKeyWrap(RSAAESKeyWrapParameters)
    /// A mechanism no chapter decodes yet; the raw parameter is kept for it.
    case undecoded(CK_MECHANISM_TYPE, [UInt8])

    // Symmetric mechanisms of issue 13 (MechanismParameters+Symmetric.swift
    // decodes them; SymmetricCipher.swift, CMACSign.swift and Wrap.swift run them).
    /// CKM_AES_ECB.
    case aesECB
    /// CKM_AES_CTR: the 16-byte counter block and how many of its low bits count.
    case aesCTR(counterBlock: [UInt8], counterBits: Int)
    /// CKM_AES_CTS (CS1), with the IV.
    case aesCTS(iv: [UInt8])
    /// CKM_AES_CMAC (16-byte MAC) and CKM_AES_CMAC_GENERAL (1-16 bytes).
    case aesCMAC(macLength: Int)
    /// CKM_DES_{ECB,CBC,CBC_PAD} and CKM_DES3_{ECB,CBC,CBC_PAD} (legacy).
    case des(DESMechanism)
    /// CKM_CHACHA20_POLY1305 (C_Encrypt / C_Decrypt; the message API has its own decoding).
    case chacha20Poly1305(ChaChaPolyParameters)
    /// CKM_AES_KEY_WRAP(_PAD) with an alternative initial value.
    case aesKeyWrapWithIV(pad: Bool, iv: [UInt8])

    // Mechanism breadth, issue 13's second round (MechanismParameters+Breadth.swift).
    // CKM_AES_KEY_WRAP_KWP decodes to .aesKeyWrap(pad: true) / .aesKeyWrapWithIV.
    /// CKM_AES_MAC(_GENERAL), CKM_DES3_MAC(_GENERAL): CBC-MAC (CBCMACSign.swift).
    case cbcMAC(CBCMACMechanism)
    /// CKM_AES_CCM (AESCCMCipher.swift).
    case aesCCM(CCMParameters)
    /// CKM_{AES,DES3}_{ECB,CBC}_ENCRYPT_DATA (EncryptDataDerivation.swift).
    case encryptData(EncryptDataDerivation)
    /// CKM_DSA (nil: the input is the digest) and CKM_DSA_SHA* (FFCKeys.swift).
    case dsa(DigestAlgorithm?)
    /// CKM_DH_PKCS_DERIVE with the other party's public value (FFCKeys.swift).
    case dhDerive(publicValue: [UInt8])
    /// ML-DSA and SLH-DSA, pure and pre-hash (PKCS #11 3.2; PostQuantum.swift).
    case pqSign(PQSignMechanism)

    /// - Parameter parameter: pMechanism->pParameter as bytes; valid only during the call.
    public init(type: CK_MECHANISM_TYPE, parameter: UnsafeRawBufferPointer?) throws {
        // The per-message ciphers first: an application that calls
        // C_EncryptInit for every message pays for each lookup below
        // (digestOrKDF's four tables cost more than decoding CK_GCM_PARAMS;
        // docs/benchmarks.md, "Symmetric encryption rows"), and their
        // parameter struct is read in place, not copied to an array first.
        switch type {
        case CKM_AES_GCM: self = .aesGCM(try Self.gcm(try Self.load(parameter, as: CK_GCM_PARAMS.self))); return
        case CKM_AES_CTR: self = try Self.aesCTR(try Self.load(parameter, as: CK_AES_CTR_PARAMS.self)); return
        case CKM_CHACHA20_POLY1305:
            self = .chacha20Poly1305(try Self.chachaPoly(try Self.load(parameter, as: CK_SALSA20_CHACHA20_POLY1305_PARAMS.self)))
            return
        default: break
        }
        let p = parameter.map { Array($0) } ?? []
        func noParameter() throws { guard p.isEmpty else { throw PKCS11Error.mechanismParamInvalid } }
        // ML-DSA, SLH-DSA, ML-KEM (PKCS #11 3.2; PostQuantum.swift).
        if let m = try Self.postQuantum(type, p) {
            self = m
            return
        }
        // SHA-3, SHA-512/t, general HMAC, KDFs (MechanismParameters+KDF.swift).
        if let m = try Self.digestOrKDF(type, p) {
            self = m
            return
        }
        // CBC-MAC, CCM, ENCRYPT_DATA, KWP, DES2 (MechanismParameters+Breadth.swift).
        if let m = try Self.breadth(type, p) {
            self = m
            return
        }
        switch type {
        case CKM_RSA_PKCS: try noParameter(); self = .rsaPKCS
        case CKM_RSA_X_509: try noParameter(); self = .rsaX509
        case CKM_ECDSA: try noParameter(); self = .ecdsa
        case CKM_EDDSA: self = p.isEmpty ? .eddsa : .eddsaWith(try Self.eddsa(p))
        case CKM_RSA_PKCS_PSS: self = .rsaPSS(try Self.pss(p, required: nil))
        case CKM_RSA_PKCS_OAEP: self = .rsaOAEP(try Self.oaep(p))
        case CKM_AES_CBC: self = .aesCBC(iv: try Self.cbcIV(p), pad: false)
        case CKM_AES_CBC_PAD: self = .aesCBC(iv: try Self.cbcIV(p), pad: true)
        case CKM_AES_GCM: self = .aesGCM(try Self.gcm(p))
        case CKM_ECDH1_DERIVE: self = .ecdh(try Self.ecdh(p))
        case CKM_AES_KEY_WRAP: self = try Self.keyWrapMechanism(p, padded: false)
        case CKM_AES_KEY_WRAP_PAD: self = try Self.keyWrapMechanism(p, padded: true)
        // Asymmetric additions: cofactor ECDH is ECDH on every curve offered (cofactor 1).
        case CKM_ECDH1_COFACTOR_DERIVE:
            var e = try Self.ecdh(p)
            e.cofactor = true
            self = .ecdh(e)
        case CKM_RSA_AES_KEY_WRAP: self = .rsaAESKeyWrap(try Self.rsaAESKeyWrap(p))
        case CKM_EC_MONTGOMERY_KEY_PAIR_GEN: try noParameter(); self = .undecoded(type, [])
        // Symmetric mechanisms of issue 13 (MechanismParameters+Symmetric.swift).
        case CKM_AES_ECB, CKM_AES_CTR, CKM_AES_CTS, CKM_AES_CMAC, CKM_AES_CMAC_GENERAL, CKM_DES_ECB, CKM_DES_CBC,
             CKM_DES_CBC_PAD, CKM_DES3_ECB, CKM_DES3_CBC, CKM_DES3_CBC_PAD, CKM_CHACHA20_POLY1305, CKM_DES_KEY_GEN,
             CKM_DES3_KEY_GEN, CKM_CHACHA20_KEY_GEN:
            self = try Self.symmetric(type, p)
        case CKM_RSA_PKCS_KEY_PAIR_GEN, CKM_EC_KEY_PAIR_GEN, CKM_EC_EDWARDS_KEY_PAIR_GEN, CKM_AES_KEY_GEN,
             CKM_GENERIC_SECRET_KEY_GEN:
            try noParameter(); self = .undecoded(type, [])
        default:
            if let d = Self.digestOf[type] {
                try noParameter()
                self = .digest(d)
            } else if let d = Self.rsaPKCSDigest[type] {
                try noParameter()
                self = .rsaPKCSWith(d)
            } else if let d = Self.ecdsaDigest[type] {
                try noParameter()
                self = .ecdsaWith(d)
            } else if let d = Self.hmacDigest[type] {
                try noParameter()
                self = .hmac(d)
            } else if let d = Self.rsaPSSDigest[type] {
                self = .rsaPSSWith(d, try Self.pss(p, required: d))
            } else if MechanismCatalog.info(type) != nil {
                self = .undecoded(type, p)
            } else {
                throw PKCS11Error.mechanismInvalid
            }
        }
    }

    static let digestOf: [CK_MECHANISM_TYPE: DigestAlgorithm] = [
        CKM_SHA_1: .sha1, CKM_SHA224: .sha224, CKM_SHA256: .sha256, CKM_SHA384: .sha384, CKM_SHA512: .sha512,
    ]
    static let rsaPKCSDigest: [CK_MECHANISM_TYPE: DigestAlgorithm] = [
        CKM_SHA1_RSA_PKCS: .sha1, CKM_SHA224_RSA_PKCS: .sha224, CKM_SHA256_RSA_PKCS: .sha256,
        CKM_SHA384_RSA_PKCS: .sha384, CKM_SHA512_RSA_PKCS: .sha512,
        CKM_SHA3_224_RSA_PKCS: .sha3_224, CKM_SHA3_256_RSA_PKCS: .sha3_256, CKM_SHA3_384_RSA_PKCS: .sha3_384,
        CKM_SHA3_512_RSA_PKCS: .sha3_512,
    ]
    static let rsaPSSDigest: [CK_MECHANISM_TYPE: DigestAlgorithm] = [
        CKM_SHA1_RSA_PKCS_PSS: .sha1, CKM_SHA224_RSA_PKCS_PSS: .sha224, CKM_SHA256_RSA_PKCS_PSS: .sha256,
        CKM_SHA384_RSA_PKCS_PSS: .sha384, CKM_SHA512_RSA_PKCS_PSS: .sha512,
        CKM_SHA3_224_RSA_PKCS_PSS: .sha3_224, CKM_SHA3_256_RSA_PKCS_PSS: .sha3_256,
        CKM_SHA3_384_RSA_PKCS_PSS: .sha3_384, CKM_SHA3_512_RSA_PKCS_PSS: .sha3_512,
    ]
    static let ecdsaDigest: [CK_MECHANISM_TYPE: DigestAlgorithm] = [
        CKM_ECDSA_SHA1: .sha1, CKM_ECDSA_SHA224: .sha224, CKM_ECDSA_SHA256: .sha256,
        CKM_ECDSA_SHA384: .sha384, CKM_ECDSA_SHA512: .sha512,
        CKM_ECDSA_SHA3_224: .sha3_224, CKM_ECDSA_SHA3_256: .sha3_256, CKM_ECDSA_SHA3_384: .sha3_384,
        CKM_ECDSA_SHA3_512: .sha3_512,
    ]
    static let hmacDigest: [CK_MECHANISM_TYPE: DigestAlgorithm] = [
        CKM_SHA_1_HMAC: .sha1, CKM_SHA224_HMAC: .sha224, CKM_SHA256_HMAC: .sha256, CKM_SHA384_HMAC: .sha384,
        CKM_SHA512_HMAC: .sha512,
    ]
    /// The SHA-3 digests PSS parameters may name (CKM_SHA3_*_RSA_PKCS_PSS).
    static let sha3Digest: [CK_MECHANISM_TYPE: DigestAlgorithm] = [
        CKM_SHA3_224: .sha3_224, CKM_SHA3_256: .sha3_256, CKM_SHA3_384: .sha3_384, CKM_SHA3_512: .sha3_512,
    ]
    static let mgf1: [CK_RSA_PKCS_MGF_TYPE: DigestAlgorithm] = [
        CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA1): .sha1, CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA224): .sha224,
        CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA256): .sha256, CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA384): .sha384,
        CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA512): .sha512,
        CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA3_224): .sha3_224, CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA3_256): .sha3_256,
        CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA3_384): .sha3_384, CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA3_512): .sha3_512,
    ]

    static func pss(_ p: [UInt8], required: DigestAlgorithm?) throws -> PSSParameters {
        guard p.count == MemoryLayout<CK_RSA_PKCS_PSS_PARAMS>.size else { throw PKCS11Error.mechanismParamInvalid }
        let raw = p.withUnsafeBytes { $0.loadUnaligned(as: CK_RSA_PKCS_PSS_PARAMS.self) }
        // hashAlg: a SHA-1, SHA-2 or (with the SHA-3 signature mechanisms) SHA-3 digest mechanism.
        guard let hash = digestOf[raw.hashAlg] ?? sha3Digest[raw.hashAlg], let mgf = mgf1[raw.mgf], raw.sLen <= 1 << 16 else {
            throw PKCS11Error.mechanismParamInvalid
        }
        if let required, required != hash { throw PKCS11Error.mechanismParamInvalid }
        return PSSParameters(hash: hash, mgf1: mgf, saltLength: Int(raw.sLen))
    }
}

public struct MechanismInfo: Sendable, Equatable {
    public var minKeySize: CK_ULONG
    public var maxKeySize: CK_ULONG
    public var flags: CK_FLAGS
}

/// What C_GetMechanismList and C_GetMechanismInfo report: only mechanisms
/// some chapter actually runs, with the key sizes OpenSSL accepts for them.
public enum MechanismCatalog {
    /// Generation and use share one range (PrivateKey.rsaGenerationBits), so
    /// a caller that reads CKM_RSA_PKCS_KEY_PAIR_GEN's info can generate
    /// every size it is told of.
    static let rsaSizes = (CK_ULONG(PrivateKey.rsaGenerationBits.lowerBound), CK_ULONG(PrivateKey.rsaGenerationBits.upperBound))
    /// P-192 to P-521 (ECCurve), in field bits.
    static let ecSizes = (CK_ULONG(192), CK_ULONG(521))
    /// Ed25519 to Ed448 and X25519 to X448, in key bits as Kryoptic counts
    /// them (ECXCurve.bits: 256, 456; 256, 448).
    static let edwardsSizes = (CK_ULONG(ECXCurve.ed25519.bits), CK_ULONG(ECXCurve.ed448.bits))
    static let montgomerySizes = (CK_ULONG(ECXCurve.x25519.bits), CK_ULONG(ECXCurve.x448.bits))
    static let ecFlags = CKF_EC_F_P | CKF_EC_NAMEDCURVE | CKF_EC_UNCOMPRESS

    public static let entries: [(CK_MECHANISM_TYPE, MechanismInfo)] = {
        var e: [(CK_MECHANISM_TYPE, MechanismInfo)] = []
        let sv = CKF_SIGN | CKF_VERIFY
        let ed = CKF_ENCRYPT | CKF_DECRYPT
        e.append((CKM_RSA_PKCS_KEY_PAIR_GEN, MechanismInfo(minKeySize: rsaSizes.0, maxKeySize: rsaSizes.1, flags: CKF_GENERATE_KEY_PAIR)))
        // Recovery (SignRecover.swift) and RSA wrapping of secret keys (RSAWrap.swift).
        let recover = CKF_SIGN_RECOVER | CKF_VERIFY_RECOVER
        let wu = CKF_WRAP | CKF_UNWRAP
        // PKCS #11 3.2 rsa.md: CKM_RSA_PKCS, CKM_RSA_PKCS_OAEP and CKM_RSA_X_509 encapsulate too (RSAEncapsulation.swift).
        let kem = CK_FLAGS(CKF_ENCAPSULATE) | CK_FLAGS(CKF_DECAPSULATE)
        e.append((CKM_RSA_PKCS, MechanismInfo(minKeySize: rsaSizes.0, maxKeySize: rsaSizes.1, flags: sv | ed | recover | wu | kem)))
        e.append((CKM_RSA_X_509, MechanismInfo(minKeySize: rsaSizes.0, maxKeySize: rsaSizes.1, flags: sv | ed | recover | kem)))
        e.append((CKM_RSA_PKCS_OAEP, MechanismInfo(minKeySize: rsaSizes.0, maxKeySize: rsaSizes.1, flags: ed | wu | kem)))
        e.append((CKM_RSA_PKCS_PSS, MechanismInfo(minKeySize: rsaSizes.0, maxKeySize: rsaSizes.1, flags: sv)))
        for t in [CKM_SHA1_RSA_PKCS, CKM_SHA224_RSA_PKCS, CKM_SHA256_RSA_PKCS, CKM_SHA384_RSA_PKCS, CKM_SHA512_RSA_PKCS,
                  CKM_SHA1_RSA_PKCS_PSS, CKM_SHA224_RSA_PKCS_PSS, CKM_SHA256_RSA_PKCS_PSS, CKM_SHA384_RSA_PKCS_PSS,
                  CKM_SHA512_RSA_PKCS_PSS,
                  // SHA-3 (issue 13).
                  CKM_SHA3_224_RSA_PKCS, CKM_SHA3_256_RSA_PKCS, CKM_SHA3_384_RSA_PKCS, CKM_SHA3_512_RSA_PKCS,
                  CKM_SHA3_224_RSA_PKCS_PSS, CKM_SHA3_256_RSA_PKCS_PSS, CKM_SHA3_384_RSA_PKCS_PSS,
                  CKM_SHA3_512_RSA_PKCS_PSS] {
            e.append((t, MechanismInfo(minKeySize: rsaSizes.0, maxKeySize: rsaSizes.1, flags: sv)))
        }
        for t in [CKM_ECDSA, CKM_ECDSA_SHA1, CKM_ECDSA_SHA224, CKM_ECDSA_SHA256, CKM_ECDSA_SHA384, CKM_ECDSA_SHA512,
                  CKM_ECDSA_SHA3_224, CKM_ECDSA_SHA3_256, CKM_ECDSA_SHA3_384, CKM_ECDSA_SHA3_512] {
            e.append((t, MechanismInfo(minKeySize: ecSizes.0, maxKeySize: ecSizes.1, flags: sv | ecFlags)))
        }
        e.append((CKM_EC_KEY_PAIR_GEN, MechanismInfo(minKeySize: ecSizes.0, maxKeySize: ecSizes.1,
                                                     flags: CKF_GENERATE_KEY_PAIR | ecFlags)))
        // 3.2 elliptic_curves.md: both ECDH mechanisms encapsulate too (ECDHEncapsulation.swift).
        e.append((CKM_ECDH1_DERIVE, MechanismInfo(minKeySize: ecSizes.0, maxKeySize: ecSizes.1, flags: CKF_DERIVE | ecFlags | kem)))
        e.append((CKM_EC_EDWARDS_KEY_PAIR_GEN, MechanismInfo(minKeySize: edwardsSizes.0, maxKeySize: edwardsSizes.1,
                                                             flags: CKF_GENERATE_KEY_PAIR)))
        e.append((CKM_EDDSA, MechanismInfo(minKeySize: edwardsSizes.0, maxKeySize: edwardsSizes.1, flags: sv)))
        // Asymmetric additions (issue 13).
        e.append((CKM_ECDH1_COFACTOR_DERIVE, MechanismInfo(minKeySize: ecSizes.0, maxKeySize: ecSizes.1,
                                                           flags: CKF_DERIVE | ecFlags | kem)))
        e.append((CKM_EC_MONTGOMERY_KEY_PAIR_GEN, MechanismInfo(minKeySize: montgomerySizes.0, maxKeySize: montgomerySizes.1,
                                                                flags: CKF_GENERATE_KEY_PAIR)))
        e.append((CKM_RSA_AES_KEY_WRAP, MechanismInfo(minKeySize: rsaSizes.0, maxKeySize: rsaSizes.1, flags: wu)))
        // AES key sizes in bytes, as the spec counts them for AES.
        e.append((CKM_AES_KEY_GEN, MechanismInfo(minKeySize: 16, maxKeySize: 32, flags: CKF_GENERATE)))
        // CBC, CBC_PAD and GCM also wrap (Wrap.swift, BlockWrap.swift); GCM also serves the message API (MessageCrypto.swift).
        e.append((CKM_AES_CBC, MechanismInfo(minKeySize: 16, maxKeySize: 32, flags: ed | CKF_WRAP | CKF_UNWRAP)))
        e.append((CKM_AES_CBC_PAD, MechanismInfo(minKeySize: 16, maxKeySize: 32, flags: ed | CKF_WRAP | CKF_UNWRAP)))
        e.append((CKM_AES_GCM, MechanismInfo(minKeySize: 16, maxKeySize: 32,
                                             flags: ed | CKF_WRAP | CKF_UNWRAP | messageFlags)))
        for t in [CKM_AES_KEY_WRAP, CKM_AES_KEY_WRAP_PAD] {
            e.append((t, MechanismInfo(minKeySize: 16, maxKeySize: 32, flags: CKF_WRAP | CKF_UNWRAP)))
        }
        // Generic secrets and HMAC keys in bytes too.
        e.append((CKM_GENERIC_SECRET_KEY_GEN, MechanismInfo(minKeySize: 1, maxKeySize: 512, flags: CKF_GENERATE)))
        for t in [CKM_SHA_1_HMAC, CKM_SHA224_HMAC, CKM_SHA256_HMAC, CKM_SHA384_HMAC, CKM_SHA512_HMAC] {
            e.append((t, MechanismInfo(minKeySize: 1, maxKeySize: 512, flags: sv)))
        }
        for t in [CKM_SHA_1, CKM_SHA224, CKM_SHA256, CKM_SHA384, CKM_SHA512] {
            e.append((t, MechanismInfo(minKeySize: 0, maxKeySize: 0, flags: CKF_DIGEST)))
        }
        // SHA-3, SHA-512/t, general HMAC, HMAC key generation, KDFs (MechanismParameters+KDF.swift).
        e += digestKDFEntries
        e += symmetricEntries
        e += breadthEntries
        e += postQuantumEntries
        return e
    }()

    /// Message-based encryption and decryption, Begin/Next included (PKCS #11 3.0 §5.13-5.14).
    static let messageFlags = CKF_MESSAGE_ENCRYPT | CKF_MESSAGE_DECRYPT | CKF_MULTI_MESSAGE

    /// The symmetric mechanisms of issue 13. AES sizes in bytes; DES and
    /// DES3 report 0/0 ("key size not in use", as SoftHSM2 does: their keys
    /// have one size each); ChaCha20 keys are 32 bytes.
    static let symmetricEntries: [(CK_MECHANISM_TYPE, MechanismInfo)] = {
        let ed = CKF_ENCRYPT | CKF_DECRYPT
        var e: [(CK_MECHANISM_TYPE, MechanismInfo)] = []
        // ECB also wraps (BlockWrap.swift).
        e.append((CKM_AES_ECB, MechanismInfo(minKeySize: 16, maxKeySize: 32, flags: ed | CKF_WRAP | CKF_UNWRAP)))
        for t in [CKM_AES_CTR, CKM_AES_CTS] {
            e.append((t, MechanismInfo(minKeySize: 16, maxKeySize: 32, flags: ed)))
        }
        for t in [CKM_AES_CMAC, CKM_AES_CMAC_GENERAL] {
            e.append((t, MechanismInfo(minKeySize: 16, maxKeySize: 32, flags: CKF_SIGN | CKF_VERIFY)))
        }
        for t in [CKM_DES_KEY_GEN, CKM_DES3_KEY_GEN] {
            e.append((t, MechanismInfo(minKeySize: 0, maxKeySize: 0, flags: CKF_GENERATE)))
        }
        for t in [CKM_DES_ECB, CKM_DES_CBC, CKM_DES_CBC_PAD] {
            e.append((t, MechanismInfo(minKeySize: 0, maxKeySize: 0, flags: ed)))
        }
        // Triple DES also wraps (BlockWrap.swift); single DES (56 bits) does not.
        for t in [CKM_DES3_ECB, CKM_DES3_CBC, CKM_DES3_CBC_PAD] {
            e.append((t, MechanismInfo(minKeySize: 0, maxKeySize: 0, flags: ed | CKF_WRAP | CKF_UNWRAP)))
        }
        e.append((CKM_CHACHA20_KEY_GEN, MechanismInfo(minKeySize: 32, maxKeySize: 32, flags: CKF_GENERATE)))
        e.append((CKM_CHACHA20_POLY1305, MechanismInfo(minKeySize: 32, maxKeySize: 32, flags: ed | messageFlags)))
        return e
    }()

    public static func info(_ type: CK_MECHANISM_TYPE) -> MechanismInfo? {
        entries.first { $0.0 == type }?.1
    }
}

extension Runtime {
    public func mechanismList(slot: CK_SLOT_ID) throws -> [CK_MECHANISM_TYPE] {
        _ = try tokenRecord(slot: slot)
        return MechanismCatalog.entries.map(\.0)
    }

    public func mechanismInfo(slot: CK_SLOT_ID, type: CK_MECHANISM_TYPE) throws -> MechanismInfo {
        _ = try tokenRecord(slot: slot)
        guard let info = MechanismCatalog.info(type) else { throw PKCS11Error.mechanismInvalid }
        return info
    }
}
