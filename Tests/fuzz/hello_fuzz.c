/*
 * libFuzzer target for the hello (Sources/AgentProtocol/hello.c, docs/agent.md
 * "Hello"): the first frame a module client sends and the agent's answer,
 * both read from a peer that may be hostile. Every input goes through both:
 *   ksa_hello_parse (the agent reading a client's hello): on 0 the token,
 *     the groups, the display entries and the tty lie inside the input and
 *     hold no NUL, a display entry is NAME=VALUE with a listed name (at most
 *     KSA_HELLO_MAX_DISPLAY), the tty is /dev/... of 6 to 255 bytes, magic and
 *     version are this protocol's; on -2 the version is another one. A parsed
 *     hello built again (ksa_hello_build_full) parses to the same fields.
 *   ksa_hello_reply_parse (the client reading the agent's reply): on 0 the
 *     reason is NUL-terminated within KSA_HELLO_MAX_REASON and printable
 *     ASCII; built again, it parses to the same status, token and reason.
 * A broken invariant is an abort (a crash input for libFuzzer).
 * Without -DFUZZ_MAIN_REPLAY a libFuzzer target (clang -fsanitize=fuzzer,address,undefined
 * with hello.c and codec.c); with it, a plain program that replays files
 * (Tests/integration/62-fuzz-replay.sh, make test). With -DFUZZ_MAKE_SEEDS it
 * writes seeds built with ksa_hello_build and ksa_hello_reply_build to a directory.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../Sources/AgentProtocol/include/agent_protocol.h"

static int inside(const uint8_t *p, size_t n, const uint8_t *data, size_t size) {
    return p >= data && n <= size && (size_t)(p - data) <= size - n;
}

static void check_hello(const uint8_t *data, size_t size) {
    ksa_hello h;
    int rc = ksa_hello_parse(data, size, &h);
    if (rc != 0 && rc != -1 && rc != -2) abort();
    if (rc == -2 && (h.magic != KSA_MAGIC || h.version == KSA_VERSION)) abort();
    if (rc != 0) return;
    if (h.magic != KSA_MAGIC || h.version != KSA_VERSION) abort();
    if (!h.token || !inside(h.token, KSA_TOKEN_LEN, data, size)) abort();
    if (h.groups) {
        if (h.groups_len > KSA_HELLO_MAX_FIELD || !inside(h.groups, h.groups_len, data, size)) abort();
        if (memchr(h.groups, 0, h.groups_len)) abort();
    } else if (h.groups_len != 0) {
        abort();
    }
    if (h.display_count > KSA_HELLO_MAX_DISPLAY) abort();
    static char display[KSA_HELLO_MAX_DISPLAY][KSA_HELLO_MAX_FIELD + 1];
    char *env[KSA_HELLO_MAX_DISPLAY + 1];
    for (uint32_t i = 0; i < h.display_count; i++) {
        ksa_span d = h.display[i];
        if (!d.p || d.len > KSA_HELLO_MAX_FIELD || !inside(d.p, d.len, data, size) || memchr(d.p, 0, d.len)) abort();
        const uint8_t *eq = memchr(d.p, '=', d.len);
        if (!eq || eq == d.p || !ksa_hello_display_name((const char *)d.p, (size_t)(eq - d.p))) abort();
        memcpy(display[i], d.p, d.len);
        display[i][d.len] = '\0';
        env[i] = display[i];
    }
    env[h.display_count] = NULL;
    char tty[256];
    if (h.tty.p) {
        if (h.tty.len < 6 || h.tty.len > 255 || !inside(h.tty.p, h.tty.len, data, size)) abort();
        if (memchr(h.tty.p, 0, h.tty.len) || memcmp(h.tty.p, "/dev/", 5) != 0) abort();
        memcpy(tty, h.tty.p, h.tty.len);
        tty[h.tty.len] = '\0';
    } else if (h.tty.len != 0) {
        abort();
    }
    /* Built again from what was parsed: the same fields (unknown tags are dropped). */
    char groups[KSA_HELLO_MAX_FIELD + 1];
    if (h.groups) {
        memcpy(groups, h.groups, h.groups_len);
        groups[h.groups_len] = '\0';
    }
    ksa_buf b;
    ksa_buf_init(&b);
    ksa_hello_build_full(&b, h.flags, h.token, h.groups ? groups : NULL, env, h.tty.p ? tty : NULL);
    ksa_hello again;
    if (b.failed || ksa_hello_parse(b.data, b.len, &again) != 0) abort();
    if (again.flags != h.flags || memcmp(again.token, h.token, KSA_TOKEN_LEN) != 0) abort();
    if (!again.groups != !h.groups || again.groups_len != h.groups_len) abort();
    if (h.groups && memcmp(again.groups, h.groups, h.groups_len) != 0) abort();
    if (again.display_count != h.display_count) abort();
    for (uint32_t i = 0; i < h.display_count; i++)
        if (again.display[i].len != h.display[i].len || memcmp(again.display[i].p, h.display[i].p, h.display[i].len) != 0) abort();
    if (!again.tty.p != !h.tty.p || again.tty.len != h.tty.len) abort();
    if (h.tty.p && memcmp(again.tty.p, h.tty.p, h.tty.len) != 0) abort();
    ksa_buf_free(&b);
}

static void check_reply(const uint8_t *data, size_t size) {
    ksa_hello_reply r;
    int rc = ksa_hello_reply_parse(data, size, &r);
    if (rc != 0 && rc != -1 && rc != -2) abort();
    if (rc == -2 && r.version == KSA_VERSION) abort();
    if (rc != 0) return;
    if (r.version != KSA_VERSION || !r.token || !inside(r.token, KSA_TOKEN_LEN, data, size)) abort();
    const char *end = memchr(r.reason, 0, sizeof r.reason);
    if (!end) abort();
    size_t len = (size_t)(end - r.reason);
    if (len > KSA_HELLO_MAX_REASON) abort();
    for (size_t i = 0; i < len; i++)
        if (r.reason[i] < 0x20 || r.reason[i] > 0x7e) abort();
    ksa_buf b;
    ksa_buf_init(&b);
    ksa_hello_reply_build(&b, r.status, r.token, len ? r.reason : NULL);
    ksa_hello_reply again;
    if (b.failed || ksa_hello_reply_parse(b.data, b.len, &again) != 0) abort();
    if (again.status != r.status || memcmp(again.token, r.token, KSA_TOKEN_LEN) != 0 ||
        strcmp(again.reason, r.reason) != 0)
        abort();
    ksa_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_hello(data, size);
    check_reply(data, size);
    return 0;
}

#include "replay_main.h"

#ifdef FUZZ_MAKE_SEEDS
/* Seeds: hellos and replies as the client and the agent build them. */

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    static const uint8_t zero[KSA_TOKEN_LEN], token[KSA_TOKEN_LEN] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    static char long_groups[KSA_HELLO_MAX_FIELD + 2];
    memset(long_groups, 'g', sizeof long_groups - 1);
    ksa_buf b;
    ksa_buf_init(&b);
    /* A new client: no groups, groups, both flags, an empty groups field. */
    const char *groups[] = {NULL, "com.example.app", "a,b,c", "", long_groups};
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        ksa_buf_reset(&b);
        ksa_hello_build(&b, (uint16_t)(i % 4), zero, groups[i]);
        write_seed(argv[1], &b);
    }
    /* A new client with its display and terminal (the display variables of its
     * environment; the others are left out), and one with all eight. */
    char *env[] = {"DISPLAY=:0", "HOME=/home/u", "WAYLAND_DISPLAY=wayland-0", "XAUTHORITY=/run/user/1000/xauth",
                   "XDG_SESSION_TYPE=wayland", "XDG_RUNTIME_DIR=/run/user/1000", "PIN=1234",
                   "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus", "TERM=xterm-256color", "LANG=C.UTF-8",
                   "DISPLAY=:1", NULL};
    ksa_buf_reset(&b);
    ksa_hello_build_full(&b, KSA_HELLO_SHM | KSA_HELLO_AUTHENTICATOR, zero, "app", env + 7, "/dev/pts/3");
    write_seed(argv[1], &b);
    ksa_buf_reset(&b);
    ksa_hello_build_full(&b, KSA_HELLO_SHM, zero, NULL, env, "/dev/tty1");
    write_seed(argv[1], &b);
    /* An attached client (its token), with the shared region and a log. */
    ksa_buf_reset(&b);
    ksa_hello_build(&b, KSA_HELLO_LOG | KSA_HELLO_SHM, token, NULL);
    write_seed(argv[1], &b);
    /* An unknown tag before the groups (a later client saying more). */
    ksa_buf_reset(&b);
    ksa_put_u32(&b, KSA_MAGIC);
    ksa_put_u16(&b, KSA_VERSION);
    ksa_put_u16(&b, 0);
    ksa_put_raw(&b, token, KSA_TOKEN_LEN);
    ksa_put_u16(&b, 2);
    ksa_put_u16(&b, 9);
    ksa_put_u32(&b, 3);
    ksa_put_raw(&b, "new", 3);
    ksa_put_u16(&b, KSA_HELLO_GROUPS);
    ksa_put_u32(&b, 1);
    ksa_put_raw(&b, "x", 1);
    write_seed(argv[1], &b);
    /* Other protocol versions: 4's hello (no field count), 6's. */
    for (uint16_t v = 4; v <= 6; v += 2) {
        ksa_buf_reset(&b);
        ksa_put_u32(&b, KSA_MAGIC);
        ksa_put_u16(&b, v);
        ksa_put_u16(&b, 0);
        ksa_put_raw(&b, zero, KSA_TOKEN_LEN);
        write_seed(argv[1], &b);
    }
    /* Replies: accepted, and each refusal with its reason. */
    const struct { uint16_t status; const char *reason; } replies[] = {
        {0, NULL}, {1, "the agent speaks protocol 5"}, {2, "unknown client token"},
        {3, "refused by the policy: no access group\tmatches"}, {4, "the agent failed"},
        {5, "the store cannot be opened safely"}, {6, "busy: too many connections of this client"},
    };
    for (size_t i = 0; i < sizeof replies / sizeof replies[0]; i++) {
        ksa_buf_reset(&b);
        ksa_hello_reply_build(&b, replies[i].status, i ? zero : token, replies[i].reason);
        write_seed(argv[1], &b);
    }
    ksa_buf_reset(&b);
    ksa_hello_reply_build(&b, 3, zero, long_groups);   /* cut at KSA_HELLO_MAX_REASON */
    write_seed(argv[1], &b);
    ksa_buf_free(&b);
    printf("%d seeds\n", seed_no);
    return 0;
}
#endif
