/* pqfixture: makes the post-quantum identities 34-pq-cli.sh imports, with OpenSSL 3.5 (the
 * bundle keyshare links, or a system libcrypto >= 3.5), so that no private key is committed and
 * the certificates are what OpenSSL itself makes of ML-DSA and ML-KEM keys (issue 18).
 *
 * usage: pqfixture DIR              makes the identities (the PKCS #12 password is read from the
 *                                    environment, PQ_P12_PASSWORD)
 *        pqfixture check-p12 FILE    opens a PKCS #12 (same password) with OpenSSL 3.5 and prints
 *                                    "KEYTYPE CN chain=N" when its key matches its certificate
 *        pqfixture check-csr FILE    verifies a PKCS #10 request (PEM or DER) with its own key and
 *                                    prints "KEYTYPE SUBJECT" (Debian 12's openssl 3.0 cannot)
 *
 * Writes, in DIR:
 *   ca.cert.pem                     an ML-DSA-65 root (self-signed; its key is not kept)
 *   NAME.cert.pem NAME.cert.der     each identity's certificate, issued by that root
 *   NAME.key.pem                    its private key, unencrypted PKCS #8 (for `keyshare import` of PEM)
 *   NAME.p12                        certificate + key + root in the modern profile (PBES2 with
 *                                   PBKDF2-HMAC-SHA256 and AES-256-CBC on both bags, HMAC-SHA256 MAC)
 * for NAME in (the category follows the key-sharing rules in Sources/KeySharing/CertificateCategory.swift):
 *   mldsa44-device    ML-DSA-44,  digitalSignature only, no SAN           -> device
 *   mldsa65-signature ML-DSA-65,  digitalSignature, rfc822Name SAN        -> signature
 *   mldsa87-auth      ML-DSA-87,  digitalSignature, UPN otherName SAN     -> authentication
 *   mlkem768-enc      ML-KEM-768, keyEncipherment only (a KEM key cannot sign its own certificate:
 *                     the root signs it)                                   -> encryption
 * Exit 0 when every file was written; otherwise one line on stderr and exit 1. */
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PQF_STRTOL_SHIM
/* The bundle was built against glibc 2.41 (Sources/COpenSSLSupport/support.c has the same shim). */
long __isoc23_strtol(const char *nptr, char **endptr, int base);
long __isoc23_strtol(const char *nptr, char **endptr, int base) { return strtol(nptr, endptr, base); }
#endif

static const char *dir;

static void die(const char *what) {
    unsigned long e = ERR_get_error();
    char buf[256] = "";
    if (e) ERR_error_string_n(e, buf, sizeof buf);
    fprintf(stderr, "pqfixture: %s%s%s\n", what, e ? ": " : "", buf);
    exit(1);
}

static EVP_PKEY *keygen(const char *alg) {
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, alg);
    if (!k) die(alg);
    return k;
}

static FILE *out(const char *name, const char *suffix, const char *mode) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s%s", dir, name, suffix);
    FILE *f = fopen(path, mode);
    if (!f) die(path);
    return f;
}

static void ext(X509 *x, X509 *issuer, int nid, const char *value) {
    X509V3_CTX c;
    X509V3_set_ctx(&c, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &c, nid, value);
    if (!e || !X509_add_ext(x, e, -1)) die("extension");
    X509_EXTENSION_free(e);
}

/* A certificate for `key`, signed by `signer` (pure ML-DSA: no digest). */
static X509 *cert(EVP_PKEY *key, const char *cn, long serial, X509 *issuer, EVP_PKEY *signer,
                  const char *ku, const char *san, int ca) {
    X509 *x = X509_new();
    X509_NAME *n = X509_NAME_new();
    if (!x || !n) die("x509");
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
    X509_NAME_add_entry_by_txt(n, "C", MBSTRING_ASC, (const unsigned char *)"US", -1, -1, 0);
    X509_NAME_add_entry_by_txt(n, "O", MBSTRING_ASC, (const unsigned char *)"keyshare tests", -1, -1, 0);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_subject_name(x, n);
    X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : n);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 10L * 365 * 86400);
    if (!X509_set_pubkey(x, key)) die("X509_set_pubkey");
    X509 *iss = issuer ? issuer : x;
    if (ca) ext(x, iss, NID_basic_constraints, "critical,CA:TRUE");
    ext(x, iss, NID_key_usage, ku);
    ext(x, iss, NID_subject_key_identifier, "hash");
    if (issuer) ext(x, iss, NID_authority_key_identifier, "keyid:always");
    if (san) ext(x, iss, NID_subject_alt_name, san);
    if (!X509_sign(x, signer, NULL)) die("X509_sign");
    X509_NAME_free(n);
    return x;
}

static void write_identity(const char *name, EVP_PKEY *key, X509 *x, X509 *root, const char *password) {
    FILE *f = out(name, ".cert.pem", "w");
    if (!PEM_write_X509(f, x)) die("PEM_write_X509");
    fclose(f);
    f = out(name, ".cert.der", "wb");
    if (!i2d_X509_fp(f, x)) die("i2d_X509_fp");
    fclose(f);
    f = out(name, ".key.pem", "w");
    if (!PEM_write_PKCS8PrivateKey(f, key, NULL, NULL, 0, NULL, NULL)) die("PEM_write_PKCS8PrivateKey");
    fclose(f);
    STACK_OF(X509) *chain = sk_X509_new_null();
    sk_X509_push(chain, root);
    PKCS12 *p12 = PKCS12_create_ex2(password, name, key, x, chain, NID_aes_256_cbc, NID_aes_256_cbc, 2048, 2048, 0,
                                    NULL, NULL, NULL, NULL);
    if (!p12) die("PKCS12_create");
    if (!PKCS12_set_mac(p12, password, -1, NULL, 0, 2048, EVP_sha256())) die("PKCS12_set_mac");
    f = out(name, ".p12", "wb");
    if (!i2d_PKCS12_fp(f, p12)) die("i2d_PKCS12_fp");
    fclose(f);
    PKCS12_free(p12);
    sk_X509_free(chain);
}

static int check_p12(const char *path, const char *password) {
    FILE *f = fopen(path, "rb");
    if (!f) die(path);
    PKCS12 *p12 = d2i_PKCS12_fp(f, NULL);
    fclose(f);
    if (!p12) die("not a PKCS #12");
    if (!PKCS12_mac_present(p12) || !PKCS12_verify_mac(p12, password, -1)) die("MAC check failed");
    EVP_PKEY *k = NULL;
    X509 *x = NULL;
    STACK_OF(X509) *ca = NULL;
    if (!PKCS12_parse(p12, password, &k, &x, &ca) || !k || !x) die("PKCS12_parse (no key or no certificate)");
    if (!X509_check_private_key(x, k)) die("the key does not match the certificate");
    char cn[256] = "";
    X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof cn);
    printf("%s %s chain=%d\n", EVP_PKEY_get0_type_name(k), cn, ca ? sk_X509_num(ca) : 0);
    return 0;
}

static int check_csr(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) die(path);
    X509_REQ *r = PEM_read_X509_REQ(f, NULL, NULL, NULL);
    if (!r) { rewind(f); ERR_clear_error(); r = d2i_X509_REQ_fp(f, NULL); }
    fclose(f);
    if (!r) die("not a PKCS #10 request");
    EVP_PKEY *k = X509_REQ_get0_pubkey(r);
    if (!k) die("no public key");
    if (X509_REQ_verify(r, k) != 1) die("the request's signature does not verify");
    char name[512];
    X509_NAME_oneline(X509_REQ_get_subject_name(r), name, sizeof name);
    printf("%s %s\n", EVP_PKEY_get0_type_name(k), name);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "check-csr")) return check_csr(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "check-p12")) {
        const char *pw = getenv("PQ_P12_PASSWORD");
        if (!pw) { fprintf(stderr, "pqfixture: PQ_P12_PASSWORD is not set\n"); return 2; }
        return check_p12(argv[2], pw);
    }
    if (argc != 2) { fprintf(stderr, "usage: pqfixture DIR (PQ_P12_PASSWORD in the environment)\n"); return 2; }
    dir = argv[1];
    const char *password = getenv("PQ_P12_PASSWORD");
    if (!password || !*password) { fprintf(stderr, "pqfixture: PQ_P12_PASSWORD is not set\n"); return 2; }

    EVP_PKEY *rootKey = keygen("ML-DSA-65");
    X509 *root = cert(rootKey, "keyshare PQ test root", 1, NULL, rootKey, "critical,keyCertSign,cRLSign", NULL, 1);
    FILE *f = out("ca", ".cert.pem", "w");
    if (!PEM_write_X509(f, root)) die("PEM_write_X509");
    fclose(f);

    static const struct { const char *name, *alg, *ku, *san; long serial; } ids[] = {
        {"mldsa44-device", "ML-DSA-44", "critical,digitalSignature", NULL, 0x44},
        {"mldsa65-signature", "ML-DSA-65", "critical,digitalSignature", "email:pq.user@mail.example", 0x65},
        {"mldsa87-auth", "ML-DSA-87", "critical,digitalSignature", "otherName:1.3.6.1.4.1.311.20.2.3;UTF8:1234567890@mil", 0x87},
        {"mlkem768-enc", "ML-KEM-768", "critical,keyEncipherment", NULL, 0x768},
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        EVP_PKEY *k = keygen(ids[i].alg);
        X509 *x = cert(k, ids[i].name, ids[i].serial, root, rootKey, ids[i].ku, ids[i].san, 0);
        write_identity(ids[i].name, k, x, root, password);
        X509_free(x);
        EVP_PKEY_free(k);
    }
    X509_free(root);
    EVP_PKEY_free(rootKey);
    return 0;
}
