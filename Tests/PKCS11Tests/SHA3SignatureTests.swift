import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// CKM_SHA3_*_RSA_PKCS, CKM_SHA3_*_RSA_PKCS_PSS and CKM_ECDSA_SHA3_*, each
/// checked against its definition composed from other mechanisms: PKCS #1
/// v1.5 is deterministic, so CKM_SHA3_256_RSA_PKCS must equal CKM_RSA_PKCS
/// of the DigestInfo built here from the NIST OID (RFC 8017 §9.2 with the
/// SHA-3 OIDs 2.16.840.1.101.3.4.2.7-10); PSS and ECDSA signatures must
/// verify as their raw forms over the SHA-3 digest (and back).
struct SHA3SignatureTests {
    @Test func sha3SignaturesMatchTheirDefinitions() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let (rsaPub, rsaPriv) = try f.rt.generateKeyPair(
            session: s, mechanism: try Mechanism(type: CKM_RSA_PKCS_KEY_PAIR_GEN, parameter: nil),
            publicTemplate: [.ulong(CKA_MODULUS_BITS, 2048)], privateTemplate: [.bool(CKA_SIGN, true)])
        let (ecPub, ecPriv) = try f.rt.generateKeyPair(
            session: s, mechanism: try Mechanism(type: CKM_EC_KEY_PAIR_GEN, parameter: nil),
            publicTemplate: [Attribute(CKA_EC_PARAMS, ECCurve.brainpoolP384r1.paramsDER)], privateTemplate: [.bool(CKA_SIGN, true)])
        let msg = Array("SHA-3 signature".utf8)
        let table: [(DigestAlgorithm, CK_MECHANISM_TYPE, CK_MECHANISM_TYPE, CK_MECHANISM_TYPE, CK_MECHANISM_TYPE, CK_ULONG, UInt8)] = [
            (.sha3_224, CKM_SHA3_224_RSA_PKCS, CKM_SHA3_224_RSA_PKCS_PSS, CKM_ECDSA_SHA3_224, CKM_SHA3_224, CK_ULONG(CKG_MGF1_SHA3_224), 7),
            (.sha3_256, CKM_SHA3_256_RSA_PKCS, CKM_SHA3_256_RSA_PKCS_PSS, CKM_ECDSA_SHA3_256, CKM_SHA3_256, CK_ULONG(CKG_MGF1_SHA3_256), 8),
            (.sha3_384, CKM_SHA3_384_RSA_PKCS, CKM_SHA3_384_RSA_PKCS_PSS, CKM_ECDSA_SHA3_384, CKM_SHA3_384, CK_ULONG(CKG_MGF1_SHA3_384), 9),
            (.sha3_512, CKM_SHA3_512_RSA_PKCS, CKM_SHA3_512_RSA_PKCS_PSS, CKM_ECDSA_SHA3_512, CKM_SHA3_512, CK_ULONG(CKG_MGF1_SHA3_512), 10),
        ]
        func sign(_ m: Mechanism, _ key: CK_OBJECT_HANDLE, _ data: [UInt8]) throws -> [UInt8] {
            try f.rt.signInit(session: s, mechanism: m, key: key)
            guard case .bytes(let b) = try f.rt.sign(session: s, data: data, capacity: 512) else { return [] }
            return b
        }
        for (d, pkcs, pss, ecdsa, hashMech, mgf, oidLast) in table {
            let h = d.hash(msg)
            // DigestInfo ::= SEQUENCE { SEQUENCE { OID, NULL }, OCTET STRING h }.
            let oid: [UInt8] = [0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, oidLast]
            let alg: [UInt8] = [0x30, UInt8(oid.count + 2)] + oid + [0x05, 0x00]
            let inner = alg + [0x04, UInt8(h.count)] + h
            let digestInfo = [0x30, UInt8(inner.count)] + inner
            #expect(try sign(try Mechanism(type: pkcs, parameter: nil), rsaPriv, msg) == (try sign(.rsaPKCS, rsaPriv, digestInfo)),
                    "\(d)")
            var pp = CK_RSA_PKCS_PSS_PARAMS(hashAlg: hashMech, mgf: mgf, sLen: CK_ULONG(d.outputSize))
            let pssM = try withUnsafeBytes(of: &pp) { try Mechanism(type: pss, parameter: $0) }
            let rawPSS = try withUnsafeBytes(of: &pp) { try Mechanism(type: CKM_RSA_PKCS_PSS, parameter: $0) }
            let pssSig = try sign(pssM, rsaPriv, msg)
            try f.rt.verifyInit(session: s, mechanism: rawPSS, key: rsaPub)
            try f.rt.verify(session: s, data: h, signature: pssSig)
            let ecSig = try sign(try Mechanism(type: ecdsa, parameter: nil), ecPriv, msg)
            try f.rt.verifyInit(session: s, mechanism: .ecdsa, key: ecPub)
            try f.rt.verify(session: s, data: h, signature: ecSig)
            let rawEC = try sign(.ecdsa, ecPriv, h)
            try f.rt.verifyInit(session: s, mechanism: try Mechanism(type: ecdsa, parameter: nil), key: ecPub)
            try f.rt.verify(session: s, data: msg, signature: rawEC)
            // The PSS hash must be the mechanism's.
            var wrong = CK_RSA_PKCS_PSS_PARAMS(hashAlg: CKM_SHA256, mgf: mgf, sLen: 32)
            #expect(rv { _ = try withUnsafeBytes(of: &wrong) { try Mechanism(type: pss, parameter: $0) } } == CKR_MECHANISM_PARAM_INVALID)
        }
        let info = try f.rt.mechanismInfo(slot: slot, type: CKM_ECDSA_SHA3_256)
        #expect(info.minKeySize == 192 && info.flags & CKF_SIGN != 0)
        #expect(try f.rt.mechanismInfo(slot: slot, type: CKM_SHA3_512_RSA_PKCS_PSS).minKeySize == 1024)
    }
}
