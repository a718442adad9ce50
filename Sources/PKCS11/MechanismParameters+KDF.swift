import CPKCS11
import KeyshareCrypto

// Decoding of the digest, MAC and key-derivation mechanisms (PKCS #11 3.0
// Current Mechanisms §2.22-2.25 SHA-2/SHA-512/t, §2.26 SHA-3, §2.41
// SP 800-108, §2.42 simple derivations, §2.43 PKCS #5 PBKDF2, §2.62 HKDF).
// As in MechanismParameters.swift, every (pointer, length) pair is checked
// before the pointer is read: a NULL pointer with a length, a wrong struct
// size, an unknown PRF or a zero length where the spec wants data is
// CKR_MECHANISM_PARAM_INVALID, never a crash. Nested pointers (data
// parameters, additional-key templates) are copied here, while the caller's
// memory is valid.

/// CK_HKDF_PARAMS in Swift terms. The salt is read only when `extract` is
/// set and the info only when `expand` is (the spec: "The salt should be
/// ignored if bExtract is false. The pInfo should be ignored if bExpand is
/// set to false").
public struct HKDFParameters: Sendable, Equatable {
    public enum Salt: Sendable, Equatable {
        /// CKF_HKDF_SALT_NULL: HashLen zero bytes (RFC 5869 §2.2).
        case null
        case data([UInt8])
        /// CKF_HKDF_SALT_KEY: the value of a secret key object.
        case key(CK_OBJECT_HANDLE)
    }
    public var extract: Bool
    public var expand: Bool
    public var prf: DigestAlgorithm
    public var salt: Salt
    public var info: [UInt8]
}

/// CK_SP800_108_KDF_PARAMS / CK_SP800_108_FEEDBACK_KDF_PARAMS.
public struct SP800108Parameters: Sendable, Equatable {
    /// One CK_PRF_DATA_PARAM.
    public enum DataParam: Sendable, Equatable {
        /// CK_SP800_108_ITERATION_VARIABLE in counter mode: the counter i.
        case iterationCounter(bits: Int, littleEndian: Bool)
        /// CK_SP800_108_ITERATION_VARIABLE in feedback mode: K(i-1).
        case iterationFeedback
        /// CK_SP800_108_COUNTER (feedback mode only): the counter i.
        case counter(bits: Int, littleEndian: Bool)
        /// CK_SP800_108_DKM_LENGTH: L in bits, the sum of the keys' lengths
        /// or of the PRF segments they take.
        case dkmLength(sumOfSegments: Bool, bits: Int, littleEndian: Bool)
        /// CK_SP800_108_BYTE_ARRAY.
        case bytes([UInt8])
    }
    public var prf: MACAlgorithm
    /// The PRF as a mechanism (CKM_SHA256_HMAC, CKM_AES_CMAC, ...), which
    /// decides the base key types it accepts.
    public var prfMechanism: CK_MECHANISM_TYPE
    /// nil in counter mode; the IV (possibly empty) in feedback mode.
    public var feedbackIV: [UInt8]?
    public var data: [DataParam]
    public var additionalKeys: [AdditionalDerivedKey]
}

/// CK_DERIVED_KEY: one more key an SP 800-108 derivation makes.
public struct AdditionalDerivedKey: Sendable, Equatable {
    public var template: Template
    /// CK_DERIVED_KEY.phKey as an address: the C layer writes the new
    /// handle there (the caller's memory, valid during the C_DeriveKey call).
    public var handleAddress: UInt
}

/// CK_PKCS5_PBKD2_PARAMS2 (or the older CK_PKCS5_PBKD2_PARAMS).
public struct PBKDF2Parameters: Sendable, Equatable {
    public var prf: DigestAlgorithm
    public var salt: [UInt8]
    public var iterations: Int
    public var password: [UInt8]
}

/// The parameters of the simple derivations (§2.42).
public enum SimpleDerivation: Sendable, Equatable {
    case concatenateBaseAndKey(CK_OBJECT_HANDLE)
    case concatenateBaseAndData([UInt8])
    case concatenateDataAndBase([UInt8])
    case xorBaseAndData([UInt8])
    /// CK_EXTRACT_PARAMS: the bit of the base key that is the first bit of the new key.
    case extractKeyFromKey(bitOffset: CK_ULONG)

    public var mechanismType: CK_MECHANISM_TYPE {
        switch self {
        case .concatenateBaseAndKey: CKM_CONCATENATE_BASE_AND_KEY
        case .concatenateBaseAndData: CKM_CONCATENATE_BASE_AND_DATA
        case .concatenateDataAndBase: CKM_CONCATENATE_DATA_AND_BASE
        case .xorBaseAndData: CKM_XOR_BASE_AND_DATA
        case .extractKeyFromKey: CKM_EXTRACT_KEY_FROM_KEY
        }
    }
}

/// Limits on what a parameter may carry. Generous for every protocol use,
/// small enough that a caller's garbage length is refused before it is read.
enum KDFLimits {
    static let dataBytes = 1 << 16
    static let dataParams = 64
    static let additionalKeys = 32
    static let templateAttributes = 64
    /// PBKDF2 passwords: also the line between a length and a pointer in the
    /// two CK_PKCS5_PBKD2 layouts (no user-space pointer is below 64 KiB:
    /// Linux's vm.mmap_min_addr is 65536 on Debian).
    static let password = 65535
    /// The longest secret a derivation makes (bytes), as CKM_ECDH1_DERIVE's KDF.
    static let derivedLength = 1024
    /// The key sizes C_GenerateKey makes for HMAC key types (bytes), as
    /// CKM_GENERIC_SECRET_KEY_GEN.
    static let generatedSecret: ClosedRange<CK_ULONG> = 1...512
    /// CKM_PKCS5_PBKD2's work: iterations times the PRF output blocks the
    /// key needs (PBKDF2 runs `iterations` HMACs per block), at most 2^24 =
    /// 16,777,216 HMACs: the largest published vector (RFC 6070's
    /// 16,777,216-iteration case) still runs, and that is 13 times OWASP's
    /// 2023 figure for PBKDF2-HMAC-SHA1 (1,300,000) and 28 times its SHA-256
    /// one (600,000). The spec and OpenSSL set no upper bound (OpenSSL's
    /// PBKDF2 wants at least 1; SoftHSM2 has no PBKDF2); without one, a
    /// caller's 2^31 - 1 holds the session for about 26 minutes in one call
    /// that neither C_SessionCancel nor anything else can stop (one
    /// HMAC-SHA256 block at the 1.4 million HMACs a second the old code ran
    /// in AttributeSchemaTests on the 2-core build machine; 14 hours for a
    /// 1024-byte key's 32 blocks). At the bound: about 12 s for HMAC-SHA256
    /// at that rate, 30 s under load.
    /// Above it: CKR_MECHANISM_PARAM_INVALID, before any work
    /// (docs/pkcs11-conformance.md, "PBKDF2 parameter layouts").
    static let pbkdf2Work = 1 << 24
}

extension Mechanism {
    static let extraDigests: [CK_MECHANISM_TYPE: DigestAlgorithm] = [
        CKM_SHA512_224: .sha512_224, CKM_SHA512_256: .sha512_256,
        CKM_SHA3_224: .sha3_224, CKM_SHA3_256: .sha3_256, CKM_SHA3_384: .sha3_384, CKM_SHA3_512: .sha3_512,
    ]
    static let extraHMACs: [CK_MECHANISM_TYPE: DigestAlgorithm] = [
        CKM_SHA512_224_HMAC: .sha512_224, CKM_SHA512_256_HMAC: .sha512_256,
        CKM_SHA3_224_HMAC: .sha3_224, CKM_SHA3_256_HMAC: .sha3_256, CKM_SHA3_384_HMAC: .sha3_384,
        CKM_SHA3_512_HMAC: .sha3_512,
    ]
    static let hmacGeneralDigest: [CK_MECHANISM_TYPE: DigestAlgorithm] = [
        CKM_SHA_1_HMAC_GENERAL: .sha1, CKM_SHA224_HMAC_GENERAL: .sha224, CKM_SHA256_HMAC_GENERAL: .sha256,
        CKM_SHA384_HMAC_GENERAL: .sha384, CKM_SHA512_HMAC_GENERAL: .sha512,
        CKM_SHA512_224_HMAC_GENERAL: .sha512_224, CKM_SHA512_256_HMAC_GENERAL: .sha512_256,
        CKM_SHA3_224_HMAC_GENERAL: .sha3_224, CKM_SHA3_256_HMAC_GENERAL: .sha3_256,
        CKM_SHA3_384_HMAC_GENERAL: .sha3_384, CKM_SHA3_512_HMAC_GENERAL: .sha3_512,
    ]
    /// The per-type key generation mechanisms and the key type each makes.
    static let secretKeyGen: [CK_MECHANISM_TYPE: CK_KEY_TYPE] = [
        CKM_SHA_1_KEY_GEN: CKK_SHA_1_HMAC, CKM_SHA224_KEY_GEN: CKK_SHA224_HMAC, CKM_SHA256_KEY_GEN: CKK_SHA256_HMAC,
        CKM_SHA384_KEY_GEN: CKK_SHA384_HMAC, CKM_SHA512_KEY_GEN: CKK_SHA512_HMAC,
        CKM_SHA512_224_KEY_GEN: CKK_SHA512_224_HMAC, CKM_SHA512_256_KEY_GEN: CKK_SHA512_256_HMAC,
        CKM_SHA3_224_KEY_GEN: CKK_SHA3_224_HMAC, CKM_SHA3_256_KEY_GEN: CKK_SHA3_256_HMAC,
        CKM_SHA3_384_KEY_GEN: CKK_SHA3_384_HMAC, CKM_SHA3_512_KEY_GEN: CKK_SHA3_512_HMAC,
        CKM_HKDF_KEY_GEN: CKK_HKDF,
    ]
    /// Every digest and HMAC mechanism by its hash: HKDF's prfHashMechanism
    /// may name either (Kryoptic accepts both; NSS sends the digest).
    static func hashOf(_ m: CK_MECHANISM_TYPE) -> DigestAlgorithm? {
        digestOf[m] ?? extraDigests[m] ?? hmacDigest[m] ?? extraHMACs[m]
    }

    static let pbkdf2PRF: [CK_ULONG: DigestAlgorithm] = [
        CK_ULONG(CKP_PKCS5_PBKD2_HMAC_SHA1): .sha1, CK_ULONG(CKP_PKCS5_PBKD2_HMAC_SHA224): .sha224,
        CK_ULONG(CKP_PKCS5_PBKD2_HMAC_SHA256): .sha256, CK_ULONG(CKP_PKCS5_PBKD2_HMAC_SHA384): .sha384,
        CK_ULONG(CKP_PKCS5_PBKD2_HMAC_SHA512): .sha512, CK_ULONG(CKP_PKCS5_PBKD2_HMAC_SHA512_224): .sha512_224,
        CK_ULONG(CKP_PKCS5_PBKD2_HMAC_SHA512_256): .sha512_256,
    ]

    /// The mechanisms of this file, or nil for any other type (Mechanism.init goes on).
    static func digestOrKDF(_ type: CK_MECHANISM_TYPE, _ p: [UInt8]) throws -> Mechanism? {
        func noParameter() throws { guard p.isEmpty else { throw PKCS11Error.mechanismParamInvalid } }
        if let d = extraDigests[type] {
            try noParameter()
            return .digest(d)
        }
        if let d = extraHMACs[type] {
            try noParameter()
            return .hmac(d)
        }
        if let d = hmacGeneralDigest[type] {
            // CK_MAC_GENERAL_PARAMS: the MAC length in bytes, 1 to the hash size.
            let n = try load(p, as: CK_ULONG.self)
            guard n >= 1, n <= CK_ULONG(d.outputSize) else { throw PKCS11Error.mechanismParamInvalid }
            return .hmacGeneral(d, length: Int(n))
        }
        if secretKeyGen[type] != nil {
            try noParameter()
            return .undecoded(type, [])
        }
        switch type {
        case CKM_HKDF_DERIVE: return .hkdf(try hkdf(p), data: false)
        case CKM_HKDF_DATA: return .hkdf(try hkdf(p), data: true)
        case CKM_SP800_108_COUNTER_KDF: return .sp800108(try sp800108(p, feedback: false))
        case CKM_SP800_108_FEEDBACK_KDF: return .sp800108(try sp800108(p, feedback: true))
        case CKM_PKCS5_PBKD2: return .pbkdf2(try pbkdf2(p))
        case CKM_CONCATENATE_BASE_AND_KEY:
            return .simpleDerive(.concatenateBaseAndKey(try load(p, as: CK_OBJECT_HANDLE.self)))
        case CKM_CONCATENATE_BASE_AND_DATA: return .simpleDerive(.concatenateBaseAndData(try stringData(p)))
        case CKM_CONCATENATE_DATA_AND_BASE: return .simpleDerive(.concatenateDataAndBase(try stringData(p)))
        case CKM_XOR_BASE_AND_DATA: return .simpleDerive(.xorBaseAndData(try stringData(p)))
        case CKM_EXTRACT_KEY_FROM_KEY:
            return .simpleDerive(.extractKeyFromKey(bitOffset: try load(p, as: CK_ULONG.self)))
        default: return nil
        }
    }

    /// CK_KEY_DERIVATION_STRING_DATA: 1 to 64 KiB of data (Kryoptic also
    /// refuses empty data: a derivation that adds nothing is a caller bug).
    static func stringData(_ p: [UInt8]) throws -> [UInt8] {
        let raw = try load(p, as: CK_KEY_DERIVATION_STRING_DATA.self)
        let data = try copy(raw.pData, raw.ulLen, max: KDFLimits.dataBytes)
        guard !data.isEmpty else { throw PKCS11Error.mechanismParamInvalid }
        return data
    }

    /// A CK_BBOOL inside a parameter: 0 or 1, anything else is a caller bug.
    static func parameterBool(_ b: CK_BBOOL) throws -> Bool {
        switch b {
        case 0: return false
        case 1: return true
        default: throw PKCS11Error.mechanismParamInvalid
        }
    }

    static func hkdf(_ p: [UInt8]) throws -> HKDFParameters {
        let raw = try load(p, as: CK_HKDF_PARAMS.self)
        let extract = try parameterBool(raw.bExtract), expand = try parameterBool(raw.bExpand)
        guard extract || expand, let prf = hashOf(raw.prfHashMechanism) else { throw PKCS11Error.mechanismParamInvalid }
        var salt = HKDFParameters.Salt.null
        if extract {
            switch raw.ulSaltType {
            case CK_ULONG(CKF_HKDF_SALT_NULL):
                guard raw.pSalt == nil, raw.ulSaltLen == 0 else { throw PKCS11Error.mechanismParamInvalid }
            case CK_ULONG(CKF_HKDF_SALT_DATA):
                let s = try copy(raw.pSalt, raw.ulSaltLen, max: KDFLimits.dataBytes)
                guard !s.isEmpty else { throw PKCS11Error.mechanismParamInvalid }
                salt = .data(s)
            case CK_ULONG(CKF_HKDF_SALT_KEY):
                salt = .key(raw.hSaltKey)
            default:
                throw PKCS11Error.mechanismParamInvalid
            }
        }
        let info = expand ? try copy(raw.pInfo, raw.ulInfoLen, max: KDFLimits.dataBytes) : []
        return HKDFParameters(extract: extract, expand: expand, prf: prf, salt: salt, info: info)
    }

    static let sp800108PRF: [CK_MECHANISM_TYPE: MACAlgorithm] = {
        var t: [CK_MECHANISM_TYPE: MACAlgorithm] = [CKM_AES_CMAC: .cmacAES]
        for (m, d) in hmacDigest { t[m] = .hmac(d) }
        for (m, d) in extraHMACs { t[m] = .hmac(d) }
        return t
    }()

    static func sp800108(_ p: [UInt8], feedback: Bool) throws -> SP800108Parameters {
        let prfType: CK_MECHANISM_TYPE
        let count: CK_ULONG, params: UnsafeMutablePointer<CK_PRF_DATA_PARAM>?
        let keyCount: CK_ULONG, keys: UnsafeMutablePointer<CK_DERIVED_KEY>?
        var iv: [UInt8]?
        if feedback {
            let raw = try load(p, as: CK_SP800_108_FEEDBACK_KDF_PARAMS.self)
            (prfType, count, params, keyCount, keys) =
                (raw.prfType, raw.ulNumberOfDataParams, raw.pDataParams, raw.ulAdditionalDerivedKeys, raw.pAdditionalDerivedKeys)
            // "If ulIVLen is set to 0, this parameter must be set to NULL_PTR."
            if raw.ulIVLen == 0, raw.pIV != nil { throw PKCS11Error.mechanismParamInvalid }
            iv = try copy(raw.pIV, raw.ulIVLen, max: KDFLimits.dataBytes)
        } else {
            let raw = try load(p, as: CK_SP800_108_KDF_PARAMS.self)
            (prfType, count, params, keyCount, keys) =
                (raw.prfType, raw.ulNumberOfDataParams, raw.pDataParams, raw.ulAdditionalDerivedKeys, raw.pAdditionalDerivedKeys)
        }
        // CKM_DES3_CMAC is not offered (no DES keys); any other PRF is unknown.
        guard let prf = sp800108PRF[prfType] else { throw PKCS11Error.mechanismParamInvalid }
        guard count >= 1, count <= CK_ULONG(KDFLimits.dataParams), let params else {
            throw PKCS11Error.mechanismParamInvalid
        }
        var data: [SP800108Parameters.DataParam] = []
        var iterations = 0, counters = 0, lengths = 0
        for i in 0..<Int(count) {
            let d = params[i]
            switch d.type {
            case CK_ULONG(CK_SP800_108_ITERATION_VARIABLE):
                iterations += 1
                if feedback {
                    // "For all other KDF types, pValue must be set to NULL_PTR and ulValueLen must be set to 0."
                    guard d.pValue == nil, d.ulValueLen == 0 else { throw PKCS11Error.mechanismParamInvalid }
                    data.append(.iterationFeedback)
                } else {
                    let (bits, le) = try counterFormat(d)
                    data.append(.iterationCounter(bits: bits, littleEndian: le))
                }
            case CK_ULONG(CK_SP800_108_COUNTER):
                // "This data field type is invalid for this KDF type" (counter mode).
                guard feedback else { throw PKCS11Error.mechanismParamInvalid }
                counters += 1
                let (bits, le) = try counterFormat(d)
                data.append(.counter(bits: bits, littleEndian: le))
            case CK_ULONG(CK_SP800_108_DKM_LENGTH):
                lengths += 1
                guard d.ulValueLen == CK_ULONG(MemoryLayout<CK_SP800_108_DKM_LENGTH_FORMAT>.size), let v = d.pValue else {
                    throw PKCS11Error.mechanismParamInvalid
                }
                let f = v.loadUnaligned(as: CK_SP800_108_DKM_LENGTH_FORMAT.self)
                let sumOfSegments: Bool
                switch f.dkmLengthMethod {
                case CK_ULONG(CK_SP800_108_DKM_LENGTH_SUM_OF_KEYS): sumOfSegments = false
                case CK_ULONG(CK_SP800_108_DKM_LENGTH_SUM_OF_SEGMENTS): sumOfSegments = true
                default: throw PKCS11Error.mechanismParamInvalid
                }
                guard f.ulWidthInBits % 8 == 0, (8...64).contains(f.ulWidthInBits) else {
                    throw PKCS11Error.mechanismParamInvalid
                }
                data.append(.dkmLength(sumOfSegments: sumOfSegments, bits: Int(f.ulWidthInBits),
                                       littleEndian: try parameterBool(f.bLittleEndian)))
            case CK_ULONG(CK_SP800_108_BYTE_ARRAY):
                // "ulValueLen must be set to a non-zero length."
                let b = try copy(d.pValue, d.ulValueLen, max: KDFLimits.dataBytes)
                guard !b.isEmpty else { throw PKCS11Error.mechanismParamInvalid }
                data.append(.bytes(b))
            default:
                // CK_SP800_108_KEY_HANDLE (3.1) and anything else.
                throw PKCS11Error.mechanismParamInvalid
            }
        }
        // One iteration variable (mandatory); at most one counter and one DKM length.
        guard iterations == 1, counters <= 1, lengths <= 1 else { throw PKCS11Error.mechanismParamInvalid }
        // "If pAdditionalDerivedKeys is set to NULL_PTR, this parameter must be set to 0" and the reverse.
        guard keyCount <= CK_ULONG(KDFLimits.additionalKeys), (keyCount == 0) == (keys == nil) else {
            throw PKCS11Error.mechanismParamInvalid
        }
        var additional: [AdditionalDerivedKey] = []
        for i in 0..<Int(keyCount) {
            guard let k = keys?[i], let ph = k.phKey else { throw PKCS11Error.mechanismParamInvalid }
            additional.append(AdditionalDerivedKey(template: try nestedTemplate(k.pTemplate, k.ulAttributeCount),
                                                   handleAddress: UInt(bitPattern: ph)))
        }
        return SP800108Parameters(prf: prf, prfMechanism: prfType, feedbackIV: iv, data: data, additionalKeys: additional)
    }

    /// CK_SP800_108_COUNTER_FORMAT: 8, 16, 24 or 32 bits (SP 800-108's r is at most 32).
    static func counterFormat(_ d: CK_PRF_DATA_PARAM) throws -> (Int, Bool) {
        guard d.ulValueLen == CK_ULONG(MemoryLayout<CK_SP800_108_COUNTER_FORMAT>.size), let v = d.pValue else {
            throw PKCS11Error.mechanismParamInvalid
        }
        let f = v.loadUnaligned(as: CK_SP800_108_COUNTER_FORMAT.self)
        guard [8, 16, 24, 32].contains(f.ulWidthInBits) else { throw PKCS11Error.mechanismParamInvalid }
        return (Int(f.ulWidthInBits), try parameterBool(f.bLittleEndian))
    }

    /// A template inside a parameter (CK_DERIVED_KEY), copied like the C
    /// layer copies C_DeriveKey's own.
    static func nestedTemplate(_ p: UnsafeMutablePointer<CK_ATTRIBUTE>?, _ n: CK_ULONG) throws -> Template {
        guard n <= CK_ULONG(KDFLimits.templateAttributes) else { throw PKCS11Error.mechanismParamInvalid }
        if n == 0 { return [] }
        guard let p else { throw PKCS11Error.mechanismParamInvalid }
        var out: Template = []
        for i in 0..<Int(n) {
            let a = p[i]
            if TemplateAttributes.isTemplateType(a.type), a.ulValueLen != 0 {
                // An embedded template: its pointers read now (TemplateAttributes.swift).
                guard let v = a.pValue else { throw PKCS11Error.argumentsBad }
                out.append(Attribute(a.type, try TemplateAttributes.embedded(v, a.ulValueLen)))
                continue
            }
            out.append(Attribute(a.type, try copy(a.pValue, a.ulValueLen, max: KDFLimits.dataBytes)))
        }
        return out
    }

    /// CKM_PKCS5_PBKD2's parameter. CK_PKCS5_PBKD2_PARAMS (2.20, whose
    /// ulPasswordLen is a CK_ULONG_PTR) and CK_PKCS5_PBKD2_PARAMS2 (2.40
    /// errata, 3.0: the length itself) have the same size on LP64, so
    /// ulParameterLen cannot tell them apart. The last field decides: a
    /// value up to 65535 is a length (PARAMS2); anything larger can only be
    /// a pointer (PARAMS), since no user-space address is that low, and it
    /// is read as one. Kryoptic reads PARAMS2 only; OpenJDK's SunPKCS11 and
    /// older NSS send PARAMS. A PARAMS2 caller with a password longer than
    /// 65535 bytes would be misread, so such passwords are refused in both
    /// layouts.
    static func pbkdf2(_ p: [UInt8]) throws -> PBKDF2Parameters {
        let raw = try load(p, as: CK_PKCS5_PBKD2_PARAMS2.self)
        var passwordLength = raw.ulPasswordLen
        if passwordLength > CK_ULONG(KDFLimits.password) {
            let old = try load(p, as: CK_PKCS5_PBKD2_PARAMS.self)
            guard let lengthPointer = old.ulPasswordLen else { throw PKCS11Error.mechanismParamInvalid }
            passwordLength = UnsafeRawPointer(lengthPointer).loadUnaligned(as: CK_ULONG.self)
            guard passwordLength <= CK_ULONG(KDFLimits.password) else { throw PKCS11Error.mechanismParamInvalid }
        }
        guard raw.saltSource == CK_ULONG(CKZ_SALT_SPECIFIED), let prf = pbkdf2PRF[raw.prf] else {
            throw PKCS11Error.mechanismParamInvalid
        }
        // The HMAC PRFs take no PRF data ("pPrfData must be NULL and ulPrfDataLen must be zero").
        guard raw.pPrfData == nil, raw.ulPrfDataLen == 0 else { throw PKCS11Error.mechanismParamInvalid }
        let salt = try copy(raw.pSaltSourceData, raw.ulSaltSourceDataLen, max: KDFLimits.dataBytes)
        guard !salt.isEmpty, raw.iterations >= 1, raw.iterations <= CK_ULONG(KDFLimits.pbkdf2Work) else {
            throw PKCS11Error.mechanismParamInvalid
        }
        let password = try copy(raw.pPassword, passwordLength, max: KDFLimits.password)
        return PBKDF2Parameters(prf: prf, salt: salt, iterations: Int(raw.iterations), password: password)
    }
}

extension MechanismCatalog {
    /// The rows of this file's mechanisms. Key sizes are bytes, except the
    /// SP 800-108 KDFs, whose sizes the spec gives in bits (base key sizes).
    static var digestKDFEntries: [(CK_MECHANISM_TYPE, MechanismInfo)] {
        var e: [(CK_MECHANISM_TYPE, MechanismInfo)] = []
        let sv = CKF_SIGN | CKF_VERIFY
        let secret = (min: CK_ULONG(1), max: CK_ULONG(512))
        for t in [CKM_SHA512_224, CKM_SHA512_256, CKM_SHA3_224, CKM_SHA3_256, CKM_SHA3_384, CKM_SHA3_512] {
            e.append((t, MechanismInfo(minKeySize: 0, maxKeySize: 0, flags: CKF_DIGEST)))
        }
        for t in [CKM_SHA512_224_HMAC, CKM_SHA512_256_HMAC, CKM_SHA3_224_HMAC, CKM_SHA3_256_HMAC, CKM_SHA3_384_HMAC,
                  CKM_SHA3_512_HMAC,
                  CKM_SHA_1_HMAC_GENERAL, CKM_SHA224_HMAC_GENERAL, CKM_SHA256_HMAC_GENERAL, CKM_SHA384_HMAC_GENERAL,
                  CKM_SHA512_HMAC_GENERAL, CKM_SHA512_224_HMAC_GENERAL, CKM_SHA512_256_HMAC_GENERAL,
                  CKM_SHA3_224_HMAC_GENERAL, CKM_SHA3_256_HMAC_GENERAL, CKM_SHA3_384_HMAC_GENERAL,
                  CKM_SHA3_512_HMAC_GENERAL] {
            e.append((t, MechanismInfo(minKeySize: secret.min, maxKeySize: secret.max, flags: sv)))
        }
        for t in [CKM_SHA_1_KEY_GEN, CKM_SHA224_KEY_GEN, CKM_SHA256_KEY_GEN, CKM_SHA384_KEY_GEN, CKM_SHA512_KEY_GEN,
                  CKM_SHA512_224_KEY_GEN, CKM_SHA512_256_KEY_GEN, CKM_SHA3_224_KEY_GEN, CKM_SHA3_256_KEY_GEN,
                  CKM_SHA3_384_KEY_GEN, CKM_SHA3_512_KEY_GEN, CKM_HKDF_KEY_GEN] {
            e.append((t, MechanismInfo(minKeySize: secret.min, maxKeySize: secret.max, flags: CKF_GENERATE)))
        }
        e.append((CKM_PKCS5_PBKD2, MechanismInfo(minKeySize: 1, maxKeySize: CK_ULONG(KDFLimits.derivedLength),
                                                 flags: CKF_GENERATE)))
        for t in [CKM_HKDF_DERIVE, CKM_HKDF_DATA, CKM_CONCATENATE_BASE_AND_KEY, CKM_CONCATENATE_BASE_AND_DATA,
                  CKM_CONCATENATE_DATA_AND_BASE, CKM_XOR_BASE_AND_DATA, CKM_EXTRACT_KEY_FROM_KEY] {
            e.append((t, MechanismInfo(minKeySize: secret.min, maxKeySize: secret.max, flags: CKF_DERIVE)))
        }
        for t in [CKM_SP800_108_COUNTER_KDF, CKM_SP800_108_FEEDBACK_KDF] {
            e.append((t, MechanismInfo(minKeySize: 8 * secret.min, maxKeySize: 8 * secret.max, flags: CKF_DERIVE)))
        }
        return e
    }
}
