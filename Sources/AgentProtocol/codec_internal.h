/* Shared between the codec files (codec.c, kdf_params.c, breadth_params.c); not public API. */
#ifndef KEYSHARE_AGENT_CODEC_INTERNAL_H
#define KEYSHARE_AGENT_CODEC_INTERNAL_H
#include "agent_protocol.h"

/* How a mechanism parameter crosses (the byte after the mechanism type). */
enum {
    PARAM_NONE = 0, PARAM_RAW = 1, PARAM_OAEP = 2, PARAM_GCM = 3, PARAM_ECDH1 = 4,
    PARAM_STRING = 5,  /* CK_KEY_DERIVATION_STRING_DATA */
    PARAM_HKDF = 6,    /* CK_HKDF_PARAMS */
    PARAM_SP800 = 7,   /* CK_SP800_108_KDF_PARAMS / CK_SP800_108_FEEDBACK_KDF_PARAMS */
    PARAM_PBKD2 = 8,   /* CK_PKCS5_PBKD2_PARAMS2 (a 2.20 PARAMS is normalised to it) */
    PARAM_SIZED = 9,   /* a wrong-sized struct: zeros of its length, for the module to refuse */
    /* struct_params.c */
    PARAM_CHACHA = 10,     /* CK_SALSA20_CHACHA20_POLY1305_PARAMS */
    PARAM_EDDSA = 11,      /* CK_EDDSA_PARAMS */
    PARAM_RSA_AES = 12,    /* CK_RSA_AES_KEY_WRAP_PARAMS with its CK_RSA_PKCS_OAEP_PARAMS */
    PARAM_GCM_MSG = 13,    /* CK_GCM_MESSAGE_PARAMS (C_MessageEncryptInit's mechanism, per-message) */
    PARAM_CHACHA_MSG = 14, /* CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS (likewise) */
    /* 40-43: breadth_params.c's own kinds (CCM, ENCRYPT_DATA). */
    /* pq_params.c (PKCS #11 3.2, issue 18) */
    PARAM_PQ_SIGN = 60,      /* CK_SIGN_ADDITIONAL_CONTEXT */
    PARAM_PQ_HASH_SIGN = 61, /* CK_HASH_SIGN_ADDITIONAL_CONTEXT */
    PARAM_PQ_SIZED = 62,     /* either, of a wrong size: zeros of that length for the module to refuse */
};

/* Input bytes: u8 present, u64 len, bytes when present (NULL, or too long to
 * cross: present 0 with the length). */
CK_RV ksa_put_bytes(ksa_buf *b, const void *p, CK_ULONG n);
int ksa_get_bytes(ksa_rd *r, void **p, CK_ULONG *n);
CK_RV ksa_put_template(ksa_buf *b, const CK_ATTRIBUTE *t, CK_ULONG count, int with_values);
int ksa_get_template(ksa_rd *r, ksa_arena *a, int with_values, CK_ATTRIBUTE **out, CK_ULONG *count);

/* KDF parameters (kdf_params.c). put: 1 when the mechanism is one of them
 * (*rv set), 0 otherwise. get: 0, or -1 malformed. */
int ksa_put_kdf_param(ksa_buf *b, const CK_MECHANISM *m, CK_RV *rv);
int ksa_get_kdf_param(ksa_rd *r, ksa_arena *a, CK_MECHANISM *m, uint8_t enc);
/* Reply: what a mechanism parameter hands back (the agent's side), and
 * applying it to the caller's parameter (validated in pass 0, written in pass 1). */
/* Issue 13's second-round parameters (breadth_params.c): CCM, the ENCRYPT_DATA
 * derivations. put as ksa_put_kdf_param; get: 1 when `enc` is one of its kinds
 * (*ok 0, or -1 malformed), 0 otherwise. */
int ksa_put_breadth_param(ksa_buf *b, const CK_MECHANISM *m, CK_RV *rv);
int ksa_get_breadth_param(ksa_rd *r, ksa_arena *a, CK_MECHANISM *m, uint8_t enc, int *ok);
/* The post-quantum signature parameters (pq_params.c): put and get as the breadth ones. */
int ksa_put_pq_param(ksa_buf *b, const CK_MECHANISM *m, CK_RV *rv);
int ksa_get_pq_param(ksa_rd *r, ksa_arena *a, CK_MECHANISM *m, uint8_t enc, int *ok);
void ksa_put_mechanism_outputs(ksa_buf *b, const CK_MECHANISM *m);
int ksa_apply_mechanism_outputs(ksa_rd *r, const CK_MECHANISM *m, int write);

/* The other pointer-carrying mechanism parameters (struct_params.c):
 * ChaCha20-Poly1305, EdDSA, RSA-AES key wrap, and in a C_Message*Init
 * (`message` 1) the message structs. put: 1 when it encoded (*rv set), 0 when
 * the mechanism is not one of them. get: 0, or -1 malformed (an encoding the
 * mechanism or the context does not allow included). */
int ksa_put_struct_param(ksa_buf *b, const CK_MECHANISM *m, int message, CK_RV *rv);
int ksa_get_struct_param(ksa_rd *r, ksa_arena *a, CK_MECHANISM *m, uint8_t enc, int message);
/* The per-message parameter (signature chars X: encrypt, Y: decrypt, whose
 * tag is an input, Z: opaque, only its size crosses) and its outputs (the IV
 * a generator made, the tag), applied only into the caller's buffers. */
CK_RV ksa_put_message_param(ksa_buf *b, ksa_arg *a, char sig);
int ksa_get_message_param(ksa_rd *r, ksa_arena *ar, ksa_arg *a, char sig);
void ksa_put_message_outputs(ksa_buf *b, const ksa_arg *a);
int ksa_apply_message_outputs(ksa_rd *r, const ksa_arg *a, int write);

/* Template-valued attributes (template_params.c): CKA_WRAP_TEMPLATE,
 * CKA_UNWRAP_TEMPLATE, CKA_DERIVE_TEMPLATE, rebuilt as arrays in the agent. */
int ksa_is_template_type(CK_ATTRIBUTE_TYPE t);
CK_RV ksa_put_template_value(ksa_buf *b, const CK_ATTRIBUTE *a);
int ksa_get_template_value(ksa_rd *r, ksa_arena *ar, CK_ATTRIBUTE *out);
int ksa_wants_template_caps(const CK_ATTRIBUTE *a);
void ksa_put_template_caps(ksa_buf *b, const CK_ATTRIBUTE *a);
int ksa_get_template_caps(ksa_rd *r, ksa_arena *ar, CK_ATTRIBUTE *out);
int ksa_template_reply_kind(const CK_ATTRIBUTE *a, int values_valid);
void ksa_put_template_reply(ksa_buf *b, const CK_ATTRIBUTE *a);
int ksa_apply_template_reply(ksa_rd *r, CK_ATTRIBUTE *a, CK_ULONG cap, uint64_t v, int write);

#endif
