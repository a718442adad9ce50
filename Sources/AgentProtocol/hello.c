/*
 * The hello (docs/agent.md, "Hello"): the first frame of a module connection
 * and the agent's answer. Parsed here, in C, so the fuzzer drives exactly the
 * code the agent runs (Tests/fuzz/hello_fuzz.c).
 *
 * Hello:  u32 magic, u16 version, u16 flags, 16-byte token (all zero: a new
 *         client), u16 field count (<= KSA_HELLO_MAX_FIELDS), then per field
 *         u16 tag, u32 length (<= KSA_HELLO_MAX_FIELD), bytes. Unknown tags
 *         are skipped (a later client may say more); nothing may follow.
 *         Fields: 1 KEYSHARE_ACCESS_GROUPS, 2 a display variable NAME=VALUE
 *         (at most KSA_HELLO_MAX_DISPLAY, names from a fixed list), 3 the
 *         client's terminal (/dev/...). There is no store field: the agent
 *         serves the store it was started for (paths.c), never one a client names.
 * Reply:  u32 magic, u16 version, u16 status, 16-byte token, u16 length,
 *         a one-line reason (status != 0; <= 512 bytes, printable).
 * The first 24 bytes of both are what protocol 4 had, so a client or agent of
 * another version can still read the other's version and status.
 */
#include <string.h>
#include "agent_protocol.h"

int ksa_hello_display_name(const char *name, size_t n) {
    static const char *const names[] = {"DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "XDG_SESSION_TYPE",
                                        "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "TERM", "LANG"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strlen(names[i]) == n && memcmp(names[i], name, n) == 0) return 1;
    return 0;
}

static void put_field(ksa_buf *b, uint16_t tag, const char *v) {
    size_t len = strlen(v);
    if (len > KSA_HELLO_MAX_FIELD) len = KSA_HELLO_MAX_FIELD;
    ksa_put_u16(b, tag);
    ksa_put_u32(b, (uint32_t)len);
    ksa_put_raw(b, v, len);
}

void ksa_hello_build_full(ksa_buf *b, uint16_t flags, const uint8_t token[KSA_TOKEN_LEN], const char *groups,
                          char *const *env, const char *tty) {
    ksa_put_u32(b, KSA_MAGIC);
    ksa_put_u16(b, KSA_VERSION);
    ksa_put_u16(b, flags);
    ksa_put_raw(b, token, KSA_TOKEN_LEN);
    const char *display[KSA_HELLO_MAX_DISPLAY];
    uint16_t nd = 0;
    for (char *const *e = env; e && *e && nd < KSA_HELLO_MAX_DISPLAY; e++) {
        const char *eq = strchr(*e, '=');
        if (eq && eq > *e && strlen(*e) <= KSA_HELLO_MAX_FIELD && ksa_hello_display_name(*e, (size_t)(eq - *e)))
            display[nd++] = *e;
    }
    int has_tty = tty && strncmp(tty, "/dev/", 5) == 0 && strlen(tty) > 5 && strlen(tty) < 256;
    ksa_put_u16(b, (uint16_t)((groups ? 1 : 0) + nd + (has_tty ? 1 : 0)));
    if (groups) put_field(b, KSA_HELLO_GROUPS, groups);
    for (uint16_t i = 0; i < nd; i++) put_field(b, KSA_HELLO_DISPLAY, display[i]);
    if (has_tty) put_field(b, KSA_HELLO_TTY, tty);
}

void ksa_hello_build(ksa_buf *b, uint16_t flags, const uint8_t token[KSA_TOKEN_LEN], const char *groups) {
    ksa_hello_build_full(b, flags, token, groups, NULL, NULL);
}

int ksa_hello_parse(const uint8_t *p, size_t n, ksa_hello *h) {
    memset(h, 0, sizeof *h);
    ksa_rd r = {p, n, 0};
    h->magic = ksa_get_u32(&r);
    h->version = ksa_get_u16(&r);
    h->flags = ksa_get_u16(&r);
    h->token = ksa_get_raw(&r, KSA_TOKEN_LEN);
    if (r.failed || h->magic != KSA_MAGIC) return -1;
    if (h->version != KSA_VERSION) return -2;
    uint16_t count = ksa_get_u16(&r);
    if (r.failed || count > KSA_HELLO_MAX_FIELDS) return -1;
    for (uint16_t i = 0; i < count; i++) {
        uint16_t tag = ksa_get_u16(&r);
        uint32_t len = ksa_get_u32(&r);
        if (r.failed || len > KSA_HELLO_MAX_FIELD) return -1;
        const uint8_t *v = len ? ksa_get_raw(&r, len) : r.p;
        if (r.failed) return -1;
        if (tag == KSA_HELLO_GROUPS) {
            if (h->groups) return -1;   /* once */
            if (memchr(v, 0, len)) return -1;
            h->groups = v;
            h->groups_len = len;
        } else if (tag == KSA_HELLO_DISPLAY) {
            const uint8_t *eq = memchr(v, '=', len);
            if (!eq || eq == v || memchr(v, 0, len) || h->display_count >= KSA_HELLO_MAX_DISPLAY) return -1;
            if (!ksa_hello_display_name((const char *)v, (size_t)(eq - v))) return -1;
            h->display[h->display_count++] = (ksa_span){v, len};
        } else if (tag == KSA_HELLO_TTY) {
            if (h->tty.p || len < 6 || len > 255 || memchr(v, 0, len) || memcmp(v, "/dev/", 5) != 0) return -1;
            h->tty = (ksa_span){v, len};
        }
    }
    if (r.left != 0) return -1;
    return 0;
}

void ksa_hello_reply_build(ksa_buf *b, uint16_t status, const uint8_t token[KSA_TOKEN_LEN], const char *reason) {
    ksa_put_u32(b, KSA_MAGIC);
    ksa_put_u16(b, KSA_VERSION);
    ksa_put_u16(b, status);
    ksa_put_raw(b, token, KSA_TOKEN_LEN);
    size_t len = reason ? strlen(reason) : 0;
    if (len > KSA_HELLO_MAX_REASON) len = KSA_HELLO_MAX_REASON;
    ksa_put_u16(b, (uint16_t)len);
    if (len) ksa_put_raw(b, reason, len);
}

int ksa_hello_reply_parse(const uint8_t *p, size_t n, ksa_hello_reply *h) {
    memset(h, 0, sizeof *h);
    ksa_rd r = {p, n, 0};
    uint32_t magic = ksa_get_u32(&r);
    h->version = ksa_get_u16(&r);
    h->status = ksa_get_u16(&r);
    h->token = ksa_get_raw(&r, KSA_TOKEN_LEN);
    if (r.failed || magic != KSA_MAGIC) return -1;
    if (h->version != KSA_VERSION) return -2;   /* another agent generation: version and status are all we read */
    uint16_t len = ksa_get_u16(&r);
    if (r.failed || len > KSA_HELLO_MAX_REASON) return -1;
    const uint8_t *reason = len ? ksa_get_raw(&r, len) : NULL;
    if (r.failed || r.left != 0) return -1;
    /* The reason is printed: printable ASCII only, anything else becomes '?'. */
    for (uint16_t i = 0; i < len; i++) h->reason[i] = reason[i] >= 0x20 && reason[i] < 0x7f ? (char)reason[i] : '?';
    h->reason[len] = '\0';
    return 0;
}
