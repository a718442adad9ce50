import KeyshareCrypto

/// RSA signatures with a TPM key are made by the raw private operation
/// (TPM2_RSA_Decrypt, no scheme) over a block encoded here, as tpm2-pkcs11
/// does: the TPM's own RSASSA/RSAPSS schemes take only a digest and fix the
/// PSS salt length, while PKCS #11 callers give a DigestInfo (CKM_RSA_PKCS)
/// or any salt length.
public enum RSASignaturePadding {
    /// EMSA-PKCS1-v1_5 (RFC 8017 §9.2) around an encoded DigestInfo `t`.
    public static func pkcs1(_ t: [UInt8], modulusBytes k: Int) throws -> [UInt8] {
        guard t.count + 11 <= k else { throw CryptoError(.dataTooLong, "RSA PKCS #1 sign", reason: "input longer than modulus size - 11") }
        return [0x00, 0x01] + [UInt8](repeating: 0xFF, count: k - t.count - 3) + [0x00] + t
    }

    /// The DER DigestInfo of a digest (RFC 8017 §9.2 note 1), for the hashing mechanisms.
    public static func digestInfo(_ digest: [UInt8], _ algorithm: DigestAlgorithm) throws -> [UInt8] {
        let oid: [UInt8]
        let nist: [UInt8] = [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02]
        switch algorithm {
        case .sha1: oid = [0x2B, 0x0E, 0x03, 0x02, 0x1A]
        case .sha256: oid = nist + [0x01]
        case .sha384: oid = nist + [0x02]
        case .sha512: oid = nist + [0x03]
        case .sha224: oid = nist + [0x04]
        case .sha512_224: oid = nist + [0x05]
        case .sha512_256: oid = nist + [0x06]
        case .sha3_224: oid = nist + [0x07]
        case .sha3_256: oid = nist + [0x08]
        case .sha3_384: oid = nist + [0x09]
        case .sha3_512: oid = nist + [0x0A]
        }
        guard digest.count == algorithm.outputSize else {
            throw CryptoError(.invalidInput, "sign", reason: "digest must be \(algorithm.outputSize) bytes for \(algorithm.name)")
        }
        let algID: [UInt8] = [0x30, UInt8(oid.count + 4), 0x06, UInt8(oid.count)] + oid + [0x05, 0x00]
        let body = algID + [0x04, UInt8(digest.count)] + digest
        return [0x30, UInt8(body.count)] + body
    }

    /// EMSA-PSS-ENCODE (RFC 8017 §9.1.1) of a digest, for a modulus of `modulusBits` bits.
    public static func pss(digest mHash: [UInt8], hash: DigestAlgorithm, mgf1: DigestAlgorithm, saltLength sLen: Int,
                           modulusBits: Int) throws -> [UInt8] {
        let hLen = hash.outputSize
        let emBits = modulusBits - 1
        let emLen = (emBits + 7) / 8
        guard mHash.count == hLen else { throw CryptoError(.invalidInput, "PSS sign", reason: "digest must be \(hLen) bytes") }
        guard sLen >= 0, emLen >= hLen + sLen + 2 else {
            throw CryptoError(.invalidInput, "PSS sign", reason: "salt length \(sLen) does not fit the modulus")
        }
        let salt = sLen == 0 ? [] : try SecureRandom.bytes(sLen)
        let h = hash.hash([UInt8](repeating: 0, count: 8) + mHash + salt)
        var db = [UInt8](repeating: 0, count: emLen - sLen - hLen - 2) + [0x01] + salt
        let mask = mgf(h, count: db.count, mgf1)
        for i in db.indices { db[i] ^= mask[i] }
        db[0] &= UInt8(0xFF >> (8 * emLen - emBits))
        let em = db + h + [0xBC]
        // The block the raw operation takes is the modulus' size.
        return [UInt8](repeating: 0, count: (modulusBits + 7) / 8 - em.count) + em
    }

    static func mgf(_ seed: [UInt8], count: Int, _ hash: DigestAlgorithm) -> [UInt8] {
        var out: [UInt8] = []
        var counter: UInt32 = 0
        while out.count < count {
            let c: [UInt8] = [UInt8(counter >> 24), UInt8(counter >> 16 & 0xFF), UInt8(counter >> 8 & 0xFF), UInt8(counter & 0xFF)]
            out += hash.hash(seed + c)
            counter += 1
        }
        return Array(out.prefix(count))
    }
}
