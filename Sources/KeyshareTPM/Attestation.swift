#if canImport(Glibc)
import Glibc
#endif
import KeyshareCrypto
import TPMCore

/// Which endorsement key (TCG EK Credential Profile low-range templates): L-1 RSA 2048 or L-2 ECC P-256.
public enum TPMEndorsementKind: Int32, Sendable, CaseIterable {
    case rsa = 0, ecc = 1

    /// The NV index of this EK's certificate.
    public var certificateIndex: UInt32 { self == .rsa ? KTPM_NV_EK_CERT_RSA : KTPM_NV_EK_CERT_ECC }
}

/// What TPM2_Certify produced for one key (issue 31, docs/tpm.md "Key attestation"),
/// each part in the TCG's own encoding.
public struct TPMCertification: Sendable, Equatable {
    /// The TPMS_ATTEST as the TPM marshalled it (what the signature covers).
    public var attest: [UInt8]
    /// The marshalled TPMT_SIGNATURE.
    public var signature: [UInt8]
    /// The marshalled TPM2B_PUBLIC of the certified key and of the attestation key.
    public var keyPublic: [UInt8]
    public var akPublic: [UInt8]
}

extension TPMConnection {
    /// The marshalled TPM2B_PUBLIC of the attestation key derived from `seed` (32 bytes).
    public func attestationKeyPublic(seed: [UInt8]) throws -> [UInt8] {
        guard seed.count == 32 else { throw TPMError(rc: KTPM_RC_ARGUMENT, operation: "deriving the attestation key") }
        return try blobCall("deriving the attestation key (endorsement hierarchy)") { ktpm_ak_public(handle, seed, $0, $1, $2) }
    }

    /// TPM2_Certify of a key blob by the attestation key of `seed`, with `qualifyingData` (at most 64 bytes).
    public func certify(blob: [UInt8], auth: [UInt8], seed: [UInt8], qualifyingData: [UInt8]) throws -> TPMCertification {
        guard seed.count == 32, qualifyingData.count <= 64 else { throw TPMError(rc: KTPM_RC_ARGUMENT, operation: "certifying a key") }
        var attest = [UInt8](repeating: 0, count: 1024), sig = [UInt8](repeating: 0, count: 1024)
        var ak = [UInt8](repeating: 0, count: 1024)
        var alen = 0, slen = 0, aklen = 0
        let rc = ktpm_certify(handle, blob, blob.count, auth, auth.count, seed, qualifyingData, qualifyingData.count,
                              &attest, attest.count, &alen, &sig, sig.count, &slen, &ak, ak.count, &aklen)
        try Self.check(rc, "certifying the key (TPM2_Certify)")
        return TPMCertification(attest: Array(attest[..<alen]), signature: Array(sig[..<slen]),
                                keyPublic: try TPM.publicArea(ofBlob: blob), akPublic: Array(ak[..<aklen]))
    }

    /// The marshalled TPM2B_PUBLIC of the endorsement key of this template.
    public func endorsementKeyPublicArea(_ kind: TPMEndorsementKind) throws -> [UInt8] {
        try blobCall("creating the endorsement key") { ktpm_ek_public_area(handle, kind.rawValue, $0, $1, $2) }
    }

    /// An NV index's whole contents; nil when the TPM has no such index (TPM_RC_HANDLE).
    public func readNV(_ index: UInt32) throws -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: 8192)
        var len = 0
        let rc = ktpm_nv_read(handle, index, &out, out.count, &len)
        // TPM_RC_HANDLE (0x08B) for a handle or index that does not exist, with or without its handle number.
        if rc & 0xFFFF_0000 == 0, rc & 0x80 != 0, rc & 0x3F == 0x0B { return nil }
        try Self.check(rc, "reading NV index 0x\(String(index, radix: 16))")
        return Array(out[..<len])
    }

    /// TPM2_ActivateCredential: the secret of a tpm2_makecredential file made for this TPM's
    /// endorsement key `ek` and the attestation key of `seed`.
    public func activateCredential(seed: [UInt8], ek: TPMEndorsementKind, credential: [UInt8]) throws -> [UInt8] {
        guard seed.count == 32 else { throw TPMError(rc: KTPM_RC_ARGUMENT, operation: "activating a credential") }
        var out = [UInt8](repeating: 0, count: 128)
        var len = 0
        let rc = ktpm_activate(handle, seed, ek.rawValue, credential, credential.count, &out, out.count, &len)
        defer { out.withUnsafeMutableBytes { explicit_bzero($0.baseAddress!, $0.count) } }
        try Self.check(rc, "activating the credential (TPM2_ActivateCredential)")
        return Array(out[..<len])
    }
}

extension TPM {
    /// The marshalled TPM2B_PUBLIC at the start of a key blob (its public part), read without a TPM.
    public static func publicArea(ofBlob blob: [UInt8]) throws -> [UInt8] {
        guard blob.count >= 2 else { throw TPMError(rc: KTPM_RC_BAD_BLOB, operation: "reading a key blob") }
        let n = Int(blob[0]) << 8 | Int(blob[1])
        guard blob.count >= 2 + n else { throw TPMError(rc: KTPM_RC_BAD_BLOB, operation: "reading a key blob") }
        return Array(blob[..<(2 + n)])
    }

    /// A TPM object's Name: nameAlg (here SHA-256, 0x000B) || SHA-256(TPMT_PUBLIC), from its marshalled TPM2B_PUBLIC.
    public static func name(ofPublicArea tpm2b: [UInt8]) throws -> [UInt8] {
        guard tpm2b.count > 4, Int(tpm2b[0]) << 8 | Int(tpm2b[1]) == tpm2b.count - 2 else {
            throw TPMError(rc: KTPM_RC_BAD_BLOB, operation: "reading a public area")
        }
        let area = Array(tpm2b[2...])
        // TPMT_PUBLIC: type (2 bytes), nameAlg (2 bytes), ...
        guard area[2] == 0x00, area[3] == 0x0B else { throw TPMError(rc: KTPM_RC_BAD_BLOB, operation: "a name algorithm other than SHA-256") }
        return [0x00, 0x0B] + DigestAlgorithm.sha256.hash(area)
    }

    /// The public key in a marshalled TPM2B_PUBLIC (EC P-256/P-384, RSA 2048/3072), read without a TPM.
    public static func publicKey(ofPublicArea tpm2b: [UInt8]) throws -> TPMPublicKey {
        var kind: Int32 = 0
        var a = [UInt8](repeating: 0, count: 512), b = [UInt8](repeating: 0, count: 512)
        var alen = 0, blen = 0
        let rc = ktpm_tpm2b_public_info(tpm2b, tpm2b.count, &kind, &a, a.count, &alen, &b, b.count, &blen)
        guard rc == 0, let k = TPMKeyKind(rawValue: kind) else {
            throw TPMError(rc: rc == 0 ? KTPM_RC_BAD_BLOB : rc, operation: "reading a public area")
        }
        return k.isRSA ? .rsa(k, modulus: Array(a[..<alen]), exponent: Array(b[..<blen]))
            : .ec(k, x: Array(a[..<alen]), y: Array(b[..<blen]))
    }

    /// objectAttributes of a marshalled TPM2B_PUBLIC (TPMA_OBJECT: bit 1 fixedTPM, 4 fixedParent, 5 sensitiveDataOrigin).
    public static func objectAttributes(ofPublicArea tpm2b: [UInt8]) -> UInt32? {
        guard tpm2b.count >= 10 else { return nil }
        return tpm2b[6...9].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }
}
