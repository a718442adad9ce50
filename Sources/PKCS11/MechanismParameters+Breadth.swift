import CPKCS11
import KeyshareCrypto

// Parameter decoding and catalog rows of the second round of issue 13's
// mechanisms (PKCS #11 3.0 Current Mechanisms): CKM_DES2_KEY_GEN (§2.29),
// CBC-MAC with AES (§2.10 CKM_AES_MAC, CKM_AES_MAC_GENERAL) and 3DES
// (CKM_DES3_MAC, CKM_DES3_MAC_GENERAL), AES-CCM (§2.12, CK_CCM_PARAMS), key
// derivation by data encryption (§2.16, CKM_AES/DES3_ECB/CBC_ENCRYPT_DATA)
// and CKM_AES_KEY_WRAP_KWP (§2.14, RFC 5649). As elsewhere, every length is
// checked before a pointer is read.

/// CBC-MAC with a block cipher (CBCMACSign.swift).
public struct CBCMACMechanism: Sendable, Equatable {
    public enum Cipher: Sendable, Equatable { case aes, tripleDES }
    public var cipher: Cipher
    /// Bytes of the last chaining block the MAC keeps.
    public var macLength: Int

    var blockSize: Int { cipher == .aes ? 16 : DES.blockSize }
}

/// CK_CCM_PARAMS copied at C_*Init.
public struct CCMParameters: Sendable, Equatable {
    /// ulDataLen: the plaintext's length, which CCM encodes before any data.
    public var dataLength: Int
    public var nonce: [UInt8]
    public var aad: [UInt8]
    public var tagLength: Int
}

/// CKM_AES_ECB_ENCRYPT_DATA, CKM_AES_CBC_ENCRYPT_DATA, CKM_DES3_ECB_ENCRYPT_DATA,
/// CKM_DES3_CBC_ENCRYPT_DATA: the new key's value is the encryption of `data`
/// under the base key (EncryptDataDerivation.swift).
public struct EncryptDataDerivation: Sendable, Equatable {
    public var cipher: CBCMACMechanism.Cipher
    /// The CBC IV; nil for ECB.
    public var iv: [UInt8]?
    public var data: [UInt8]

    public var mechanismType: CK_MECHANISM_TYPE {
        switch (cipher, iv == nil) {
        case (.aes, true): CKM_AES_ECB_ENCRYPT_DATA
        case (.aes, false): CKM_AES_CBC_ENCRYPT_DATA
        case (.tripleDES, true): CKM_DES3_ECB_ENCRYPT_DATA
        case (.tripleDES, false): CKM_DES3_CBC_ENCRYPT_DATA
        }
    }
}

extension Mechanism {
    /// The mechanisms of this file, or nil for another one.
    static func breadth(_ type: CK_MECHANISM_TYPE, _ p: [UInt8]) throws -> Mechanism? {
        func none() throws { guard p.isEmpty else { throw PKCS11Error.mechanismParamInvalid } }
        switch type {
        case CKM_DES2_KEY_GEN: try none(); return .undecoded(type, [])
        // "CKM_AES_MAC ... the output is half the block size": 8 bytes; 3DES: 4.
        case CKM_AES_MAC: try none(); return .cbcMAC(CBCMACMechanism(cipher: .aes, macLength: 8))
        case CKM_AES_MAC_GENERAL: return .cbcMAC(CBCMACMechanism(cipher: .aes, macLength: try macLength(p, max: 16)))
        case CKM_DES3_MAC: try none(); return .cbcMAC(CBCMACMechanism(cipher: .tripleDES, macLength: 4))
        case CKM_DES3_MAC_GENERAL:
            return .cbcMAC(CBCMACMechanism(cipher: .tripleDES, macLength: try macLength(p, max: DES.blockSize)))
        case CKM_AES_CCM: return .aesCCM(try ccm(p))
        // DSA and DH (FFCKeys.swift).
        case CKM_DSA_PARAMETER_GEN, CKM_DSA_KEY_PAIR_GEN, CKM_DH_PKCS_PARAMETER_GEN, CKM_DH_PKCS_KEY_PAIR_GEN:
            try none(); return .undecoded(type, [])
        case CKM_DSA: try none(); return .dsa(nil)
        case CKM_DSA_SHA1: try none(); return .dsa(.sha1)
        case CKM_DSA_SHA224: try none(); return .dsa(.sha224)
        case CKM_DSA_SHA256: try none(); return .dsa(.sha256)
        case CKM_DSA_SHA384: try none(); return .dsa(.sha384)
        case CKM_DSA_SHA512: try none(); return .dsa(.sha512)
        case CKM_DH_PKCS_DERIVE:
            // The parameter is the public value itself (a big-endian integer below p).
            guard !p.isEmpty, p.count <= 512 else { throw PKCS11Error.mechanismParamInvalid }
            return .dhDerive(publicValue: p)
        case CKM_AES_KEY_WRAP_KWP: return try keyWrapMechanism(p, padded: true)
        case CKM_AES_ECB_ENCRYPT_DATA:
            return .encryptData(EncryptDataDerivation(cipher: .aes, iv: nil, data: try encryptData(stringData(p), block: 16)))
        case CKM_DES3_ECB_ENCRYPT_DATA:
            return .encryptData(EncryptDataDerivation(cipher: .tripleDES, iv: nil,
                                                      data: try encryptData(stringData(p), block: DES.blockSize)))
        case CKM_AES_CBC_ENCRYPT_DATA:
            let raw = try load(p, as: CK_AES_CBC_ENCRYPT_DATA_PARAMS.self)
            let data = try copy(raw.pData, raw.length, max: KDFLimits.dataBytes)
            return .encryptData(EncryptDataDerivation(cipher: .aes, iv: withUnsafeBytes(of: raw.iv) { Array($0) },
                                                      data: try encryptData(data, block: 16)))
        case CKM_DES3_CBC_ENCRYPT_DATA:
            let raw = try load(p, as: CK_DES_CBC_ENCRYPT_DATA_PARAMS.self)
            let data = try copy(raw.pData, raw.length, max: KDFLimits.dataBytes)
            return .encryptData(EncryptDataDerivation(cipher: .tripleDES, iv: withUnsafeBytes(of: raw.iv) { Array($0) },
                                                      data: try encryptData(data, block: DES.blockSize)))
        default: return nil
        }
    }

    /// The data of an ENCRYPT_DATA derivation: whole blocks, at least one
    /// (the mechanisms do not pad; SoftHSM2 refuses other lengths too).
    static func encryptData(_ d: [UInt8], block: Int) throws -> [UInt8] {
        guard !d.isEmpty, d.count % block == 0 else { throw PKCS11Error.mechanismParamInvalid }
        return d
    }

    /// CK_CCM_PARAMS (Current Mechanisms §2.12.3): a 7-13 byte nonce, a MAC
    /// of 4-16 bytes, even (SP 800-38C Appendix A; RFC 3610), ulDataLen within
    /// what the nonce leaves for the length field (L = 15 - nonce length).
    static func ccm(_ p: [UInt8]) throws -> CCMParameters {
        let raw = try load(p, as: CK_CCM_PARAMS.self)
        let nonce = try copy(raw.pNonce, raw.ulNonceLen, max: 64)
        guard AESCCM.nonceSizes.contains(nonce.count), let tag = Int(exactly: raw.ulMACLen), AESCCM.validTagLength(tag),
              let n = Int(exactly: raw.ulDataLen), n <= CCMOperation.maxData,
              UInt64(n) <= AESCCM.maxPayload(nonceLength: nonce.count) else {
            throw PKCS11Error.mechanismParamInvalid
        }
        return CCMParameters(dataLength: n, nonce: nonce, aad: try copy(raw.pAAD, raw.ulAADLen), tagLength: tag)
    }
}

extension MechanismCatalog {
    /// The rows of this file's mechanisms. AES sizes in bytes; the DES2/DES3
    /// ones 0/0, as the other DES rows (one size per key type).
    static let breadthEntries: [(CK_MECHANISM_TYPE, MechanismInfo)] = [
        (CKM_DES2_KEY_GEN, MechanismInfo(minKeySize: 0, maxKeySize: 0, flags: CKF_GENERATE)),
        (CKM_AES_MAC, MechanismInfo(minKeySize: 16, maxKeySize: 32, flags: CKF_SIGN | CKF_VERIFY)),
        (CKM_AES_MAC_GENERAL, MechanismInfo(minKeySize: 16, maxKeySize: 32, flags: CKF_SIGN | CKF_VERIFY)),
        (CKM_DES3_MAC, MechanismInfo(minKeySize: 0, maxKeySize: 0, flags: CKF_SIGN | CKF_VERIFY)),
        (CKM_DES3_MAC_GENERAL, MechanismInfo(minKeySize: 0, maxKeySize: 0, flags: CKF_SIGN | CKF_VERIFY)),
        (CKM_AES_CCM, MechanismInfo(minKeySize: 16, maxKeySize: 32, flags: CKF_ENCRYPT | CKF_DECRYPT)),
        (CKM_AES_KEY_WRAP_KWP, MechanismInfo(minKeySize: 16, maxKeySize: 32, flags: CKF_WRAP | CKF_UNWRAP)),
        (CKM_AES_ECB_ENCRYPT_DATA, MechanismInfo(minKeySize: 16, maxKeySize: 32, flags: CKF_DERIVE)),
        (CKM_AES_CBC_ENCRYPT_DATA, MechanismInfo(minKeySize: 16, maxKeySize: 32, flags: CKF_DERIVE)),
        (CKM_DES3_ECB_ENCRYPT_DATA, MechanismInfo(minKeySize: 0, maxKeySize: 0, flags: CKF_DERIVE)),
        (CKM_DES3_CBC_ENCRYPT_DATA, MechanismInfo(minKeySize: 0, maxKeySize: 0, flags: CKF_DERIVE)),
    ] + ffcEntries

    /// DSA and DH, sizes of p in bits (FFCRules).
    static let ffcEntries: [(CK_MECHANISM_TYPE, MechanismInfo)] = {
        let dsa = (CK_ULONG(FFCRules.dsaBits.lowerBound), CK_ULONG(FFCRules.dsaBits.upperBound))
        let dh = (CK_ULONG(FFCRules.dhBits.lowerBound), CK_ULONG(FFCRules.dhBits.upperBound))
        var e: [(CK_MECHANISM_TYPE, MechanismInfo)] = [
            (CKM_DSA_PARAMETER_GEN, MechanismInfo(minKeySize: dsa.0, maxKeySize: dsa.1, flags: CKF_GENERATE)),
            (CKM_DSA_KEY_PAIR_GEN, MechanismInfo(minKeySize: dsa.0, maxKeySize: dsa.1, flags: CKF_GENERATE_KEY_PAIR)),
            (CKM_DH_PKCS_PARAMETER_GEN, MechanismInfo(minKeySize: dh.0, maxKeySize: dh.1, flags: CKF_GENERATE)),
            (CKM_DH_PKCS_KEY_PAIR_GEN, MechanismInfo(minKeySize: dh.0, maxKeySize: dh.1, flags: CKF_GENERATE_KEY_PAIR)),
            (CKM_DH_PKCS_DERIVE, MechanismInfo(minKeySize: dh.0, maxKeySize: dh.1, flags: CKF_DERIVE)),
        ]
        for t in [CKM_DSA, CKM_DSA_SHA1, CKM_DSA_SHA224, CKM_DSA_SHA256, CKM_DSA_SHA384, CKM_DSA_SHA512] {
            e.append((t, MechanismInfo(minKeySize: dsa.0, maxKeySize: dsa.1, flags: CKF_SIGN | CKF_VERIFY)))
        }
        return e
    }()
}
