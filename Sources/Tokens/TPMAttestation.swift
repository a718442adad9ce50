import Keychain
import KeyshareCrypto
import KeyshareTPM

/// Key attestation for TPM tokens (issue 31, docs/tpm.md "Key attestation"):
/// TPM2_Certify of a token's key by the token's attestation key (AK), the
/// endorsement key (EK) and its certificate, so a relying party can check
/// with tpm2-tools and openssl alone that the key was born in this TPM.
public struct TPMAttestation: Sendable {
    public var certification: TPMCertification
    /// Which EK template the certificate (if any) names; TPM2_ActivateCredential uses the same one.
    public var endorsementKind: TPMEndorsementKind
    /// The EK's marshalled TPM2B_PUBLIC.
    public var endorsementPublic: [UInt8]
    /// The EK certificate (DER) from the TPM's NV index, nil when the TPM has none.
    public var endorsementCertificate: [UInt8]?
}

extension TPMToken {
    /// CKA_APPLICATION of the CKO_DATA object that holds a key's attestation made at generation time.
    public static let attestationApplication = "keyshare attestation"

    /// The seed of a token's attestation key: one AK per token, derived by the TPM from its
    /// endorsement seed and this value, so the token keeps nothing but its ID to re-create it.
    public static func attestationSeed(_ token: TokenID) -> [UInt8] {
        DigestAlgorithm.sha256.hash(Array("keyshare attestation key v1|\(token)".utf8))
    }

    /// The EK keyshare attests with: RSA 2048 (L-1) when the TPM holds its certificate (NV
    /// 0x01C00002), else ECC P-256 (L-2) when it holds that one (0x01C0000A), else RSA 2048
    /// without a certificate (the template tpm2-tools' createek and makecredential default to).
    public static func endorsement(_ c: TPMConnection) throws -> (TPMEndorsementKind, [UInt8]?) {
        for kind in TPMEndorsementKind.allCases {
            // An index the owner cannot read (an owner password set) counts as no certificate; no TPM is an error.
            let cert: [UInt8]?
            do { cert = try c.readNV(kind.certificateIndex) } catch let e as TPMError where e.kind != .unreachable { cert = nil }
            if let cert, !cert.isEmpty { return (kind, Self.trimDER(cert)) }
        }
        return (.rsa, nil)
    }

    /// NV indices are often larger than the certificate they hold: the DER SEQUENCE's own length.
    static func trimDER(_ b: [UInt8]) -> [UInt8] {
        guard b.count >= 4, b[0] == 0x30 else { return b }
        let total: Int
        switch b[1] {
        case 0..<0x80: total = 2 + Int(b[1])
        case 0x81: total = 3 + Int(b[2])
        case 0x82: total = 4 + (Int(b[2]) << 8 | Int(b[3]))
        default: return b
        }
        return total <= b.count ? Array(b[..<total]) : b
    }

    /// TPM2_Certify of a TPM key blob with qualifying data `nonce`, plus the EK and its certificate.
    public static func attest(blob: [UInt8], auth: [UInt8], token: TokenID, nonce: [UInt8], site: TPMSite) throws -> TPMAttestation {
        try TPM.with(site) { c in
            let cert = try c.certify(blob: blob, auth: auth, seed: attestationSeed(token), qualifyingData: nonce)
            let (kind, ekCert) = try endorsement(c)
            return TPMAttestation(certification: cert, endorsementKind: kind, endorsementPublic: try c.endorsementKeyPublicArea(kind),
                                  endorsementCertificate: ekCert)
        }
    }

    /// The CKO_DATA object (vendor-defined use, PKCS #11 has no attestation object) that carries
    /// a key's attestation made when it was generated: CKA_APPLICATION "keyshare attestation",
    /// CKA_ID the key's, CKA_VALUE four fields, each a 2-byte big-endian length and the bytes:
    /// TPMS_ATTEST, TPMT_SIGNATURE, the key's TPM2B_PUBLIC, the AK's TPM2B_PUBLIC. Qualifying
    /// data empty: it proves where the key was born, not when (`keyshare key attest --nonce`).
    public static func attestationObject(_ c: TPMCertification, label: String, id: [UInt8]) -> AttributeMap {
        var value: [UInt8] = []
        for part in [c.attest, c.signature, c.keyPublic, c.akPublic] {
            value += [UInt8(part.count >> 8), UInt8(part.count & 0xFF)] + part
        }
        return [
            CKA.class: AttributeCoding.ulong(CKO.data),
            CKA.token: AttributeCoding.bool(true),
            CKA.private: AttributeCoding.bool(false),
            CKA.modifiable: AttributeCoding.bool(false),
            CKA.label: Array(label.utf8),
            CKA.application: Array(attestationApplication.utf8),
            CKA.id: id,
            CKA.value: value,
        ]
    }

    /// The generation-time attestation object of a new key, or nil when the TPM would not
    /// certify it (an endorsement hierarchy with a password, say): the key is made anyway.
    public static func generationAttestation(blob: [UInt8], auth: [UInt8], token: TokenID, label: String, id: [UInt8],
                                             site: TPMSite) -> AttributeMap? {
        guard let c = try? TPM.with(site, { try $0.certify(blob: blob, auth: auth, seed: attestationSeed(token), qualifyingData: []) })
        else { return nil }
        return attestationObject(c, label: label, id: id)
    }
}
