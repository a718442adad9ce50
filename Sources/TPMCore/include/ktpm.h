// keyshare's TPM work over tpm2-tss ESAPI (docs/tpm.md). Byte buffers in and
// out; every function returns a TSS2_RC (0 is success). An object's blob is
// its marshalled TPM2B_PUBLIC followed by its marshalled TPM2B_PRIVATE: the
// private part is encrypted by the TPM under the storage root key, which only
// this TPM can re-create. Every transient object a call loads is flushed
// before it returns (a TPM without a resource manager holds about 3).
#ifndef KTPM_H
#define KTPM_H
#include <stddef.h>
#include <stdint.h>

enum {
    KTPM_EC_P256 = 1,
    KTPM_EC_P384 = 2,
    KTPM_RSA_2048 = 3,
    KTPM_RSA_3072 = 4,
};

// RSA decryption schemes (TPM2_RSA_Decrypt); OAEP takes a TPM hash algorithm ID.
enum {
    KTPM_RSA_RAW = 0,
    KTPM_RSA_PKCS1 = 1,
    KTPM_RSA_OAEP = 2,
};

// Our own response codes (outside the TPM's and the TSS's layers).
#define KTPM_RC_BAD_BLOB 0x004B0001u
#define KTPM_RC_BUFFER 0x004B0002u
#define KTPM_RC_ARGUMENT 0x004B0003u

typedef struct ktpm ktpm;

/// Opens a TCTI (tpm2-tss syntax, e.g. "swtpm:host=127.0.0.1,port=2321") and an ESAPI context.
uint32_t ktpm_open(const char *tcti, ktpm **out);
/// Flushes the storage root key if it was created, and closes the connection.
void ktpm_close(ktpm *t);
/// Whether a TPM answers: one TPM2_GetRandom of 1 byte (opening a connection
/// need not reach the TPM: keyshare's swtpm TCTI connects per command).
uint32_t ktpm_probe(ktpm *t);

/// The endorsement key's public point x||y (ECC P-256, TCG EK template L-2): names this TPM.
uint32_t ktpm_ek_public(ktpm *t, uint8_t *out, size_t cap, size_t *len);
/// TPM2_TestParms: 0 when the TPM offers this key kind.
uint32_t ktpm_supports(ktpm *t, int kind);

/// A signing key (RSA keys also decrypt) created inside the TPM under the storage root key.
uint32_t ktpm_create_key(ktpm *t, int kind, const uint8_t *auth, size_t authlen, int noda,
                         uint8_t *blob, size_t cap, size_t *len);
/// An existing private key brought in by TPM2_Import (no outer wrapper: it is in this process already).
uint32_t ktpm_import_ec(ktpm *t, int kind, const uint8_t *d, size_t dlen, const uint8_t *x, const uint8_t *y,
                        size_t clen, const uint8_t *auth, size_t authlen, int noda, uint8_t *blob, size_t cap,
                        size_t *len);
uint32_t ktpm_import_rsa(ktpm *t, int kind, const uint8_t *n, size_t nlen, uint32_t e, const uint8_t *p,
                         size_t plen, const uint8_t *auth, size_t authlen, int noda, uint8_t *blob, size_t cap,
                         size_t *len);

/// What a key blob's public part holds: EC: a = x, b = y; RSA: a = modulus, b = exponent (big-endian).
uint32_t ktpm_public_info(const uint8_t *blob, size_t len, int *kind, uint8_t *a, size_t acap, size_t *alen,
                          uint8_t *b, size_t bcap, size_t *blen);

/// ECDSA over a digest of exactly the curve's size (SHA-256 size for P-256, SHA-384 for P-384).
uint32_t ktpm_sign_ecdsa(ktpm *t, const uint8_t *blob, size_t len, const uint8_t *auth, size_t authlen,
                         const uint8_t *digest, size_t dlen, uint8_t *r, uint8_t *s, size_t half);
/// TPM2_RSA_Decrypt; with KTPM_RSA_RAW it is the raw private operation (how PKCS #1 and PSS signatures are made).
uint32_t ktpm_rsa_decrypt(ktpm *t, const uint8_t *blob, size_t len, const uint8_t *auth, size_t authlen,
                          int scheme, uint16_t oaep_hash, const uint8_t *in, size_t inlen, uint8_t *out, size_t cap,
                          size_t *outlen);

/// Seals a secret (at most 128 bytes) to this TPM, optionally to the current values of the
/// SHA-256 PCRs in pcrmask (bit n = PCR n).
uint32_t ktpm_seal(ktpm *t, const uint8_t *secret, size_t slen, const uint8_t *auth, size_t authlen, int noda,
                   uint32_t pcrmask, uint8_t *blob, size_t cap, size_t *len);
uint32_t ktpm_unseal(ktpm *t, const uint8_t *blob, size_t len, const uint8_t *auth, size_t authlen,
                     uint32_t pcrmask, uint8_t *out, size_t cap, size_t *outlen);

/// Extends a SHA-256 PCR (tests: a PCR-bound seal must then refuse).
uint32_t ktpm_pcr_extend(ktpm *t, int pcr, const uint8_t digest[32]);

// MARK: attestation (issue 31, docs/tpm.md "Key attestation")

/// Endorsement key templates of the TCG EK Credential Profile: L-1 (RSA 2048) and L-2 (ECC P-256).
enum {
    KTPM_EK_RSA = 0,
    KTPM_EK_ECC = 1,
};
/// The TCG's NV indices of the matching EK certificates.
#define KTPM_NV_EK_CERT_RSA 0x01C00002u
#define KTPM_NV_EK_CERT_ECC 0x01C0000Au

/// The endorsement key of one template (ktpm_ek_public, above, is L-2's point only): its marshalled TPM2B_PUBLIC.
uint32_t ktpm_ek_public_area(ktpm *t, int ek, uint8_t *out, size_t cap, size_t *len);
/// A token's attestation key: a primary restricted ECDSA P-256/SHA-256 signing key in the
/// endorsement hierarchy whose template's unique.ecc.x is `seed`, so the TPM derives the same
/// key again from its endorsement seed. Its marshalled TPM2B_PUBLIC.
uint32_t ktpm_ak_public(ktpm *t, const uint8_t seed[32], uint8_t *out, size_t cap, size_t *len);
/// TPM2_Certify of a key blob by the attestation key of `seed`, qualifying data `qual` (at most
/// 64 bytes). attest: the TPMS_ATTEST as the TPM marshalled it; sig: the marshalled TPMT_SIGNATURE;
/// akpub: the AK's marshalled TPM2B_PUBLIC.
uint32_t ktpm_certify(ktpm *t, const uint8_t *blob, size_t len, const uint8_t *auth, size_t authlen,
                      const uint8_t seed[32], const uint8_t *qual, size_t qlen, uint8_t *attest, size_t acap,
                      size_t *alen, uint8_t *sig, size_t scap, size_t *slen, uint8_t *akpub, size_t akcap,
                      size_t *aklen);
/// The whole contents of an NV index (TPM2_NV_ReadPublic, then TPM2_NV_Read in chunks, owner
/// authorization empty). A missing index is the TPM's TPM_RC_HANDLE.
uint32_t ktpm_nv_read(ktpm *t, uint32_t index, uint8_t *out, size_t cap, size_t *len);
/// TPM2_ActivateCredential with the attestation key of `seed` and the endorsement key `ek`
/// (a PolicySecret(endorsement) session, empty endorsement authorization). `cred` is the file
/// tpm2_makecredential writes: 0xBADCC0DE, version 1 (big-endian 32-bit each), TPM2B_ID_OBJECT,
/// TPM2B_ENCRYPTED_SECRET.
uint32_t ktpm_activate(ktpm *t, const uint8_t seed[32], int ek, const uint8_t *cred, size_t credlen, uint8_t *out,
                       size_t cap, size_t *outlen);
/// What a marshalled TPM2B_PUBLIC holds, as ktpm_public_info (EC P-256/P-384, RSA 2048/3072).
uint32_t ktpm_tpm2b_public_info(const uint8_t *pub, size_t len, int *kind, uint8_t *a, size_t acap, size_t *alen,
                                uint8_t *b, size_t bcap, size_t *blen);

/// A short text for a response code (tpm2-tss's decoder, or ours).
const char *ktpm_rc_text(uint32_t rc);

#endif
