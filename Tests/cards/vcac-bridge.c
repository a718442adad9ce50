/*
 * vcac-bridge: a virtual CAC smart card for the tests, inserted into pcscd's
 * vpcd reader (vsmartcard).
 *
 * libcacard (Debian libcacard-dev) emulates a CAC card whose certificates and
 * RSA keys live in an NSS database; this program connects that card to vpcd's
 * socket and answers what vpcd asks. Starting it is a card insertion, stopping
 * it (SIGTERM) is a removal, exactly as pulling a card from a reader: vpcd sees
 * its socket close.
 *
 * The vpcd protocol: every message is a 2-byte big-endian length, then the
 * payload. vpcd sends one-byte control payloads (0 power off, 1 power on,
 * 2 reset, 4 get ATR: answered with the ATR) and APDUs (answered with the
 * response APDU). Nothing else is sent unasked.
 *
 * The card PIN is the NSS database's password: it arrives only in the
 * client's VERIFY APDU (libcacard checks it with NSS), never on this
 * program's command line.
 *
 *   vcac-bridge --db DIR --cert NICKNAME [--cert NICKNAME ...]
 *               [--port 35963] [--host 127.0.0.1] [--reader NAME] [--verbose]
 *
 * It prints "connected" on stdout once vpcd accepted it, so a test can wait
 * for the insertion to have reached the reader.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <libcacard.h>

#define MAX_CERTS 3 /* a CAC card has three PKI applets */
#define MAX_MESSAGE 65538

static int verbose;

static void logmsg(const char *fmt, ...) {
    if (!verbose) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("vcac-bridge: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("vcac-bridge: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* libcacard queues reader and card events; nobody here needs them, but the
 * queue must be drained or it grows for the life of the card. */
static gpointer drain_events(gpointer unused) {
    (void)unused;
    for (;;) {
        VEvent *e = vevent_wait_next_vevent();
        if (e == NULL) return NULL;
        int last = e->type == VEVENT_LAST;
        vevent_delete(e);
        if (last) return NULL;
    }
}

static int read_full(int fd, uint8_t *buf, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        got += (size_t)n;
    }
    return 0;
}

static int write_full(int fd, const uint8_t *buf, size_t len) {
    size_t put = 0;
    while (put < len) {
        ssize_t n = write(fd, buf + put, len - put);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        put += (size_t)n;
    }
    return 0;
}

static int send_message(int fd, const uint8_t *payload, int len) {
    uint8_t head[2] = {(uint8_t)(len >> 8), (uint8_t)(len & 0xff)};
    return write_full(fd, head, 2) == 0 && write_full(fd, payload, (size_t)len) == 0 ? 0 : -1;
}

/* vpcd may not be listening yet when the card is "inserted" (pcscd starts the
 * driver lazily): retry for up to five seconds. */
static int connect_vpcd(const char *host, int port) {
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) die("not an IPv4 address: %s", host);
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) die("socket: %s", strerror(errno));
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            return fd;
        }
        close(fd);
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    die("cannot connect to vpcd at %s:%d", host, port);
    return -1;
}

int main(int argc, char **argv) {
    const char *db = NULL, *host = "127.0.0.1", *reader_name = "keyshare-test";
    const char *certs[MAX_CERTS];
    int ncerts = 0, port = 35963;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--verbose")) { verbose = 1; continue; }
        if (v == NULL) die("%s needs a value", a);
        if (!strcmp(a, "--db")) db = v;
        else if (!strcmp(a, "--host")) host = v;
        else if (!strcmp(a, "--reader")) reader_name = v;
        else if (!strcmp(a, "--port")) port = atoi(v);
        else if (!strcmp(a, "--cert")) {
            if (ncerts == MAX_CERTS) die("at most %d certificates", MAX_CERTS);
            certs[ncerts++] = v;
        } else die("unknown option %s", a);
        i++;
    }
    if (db == NULL || ncerts == 0) die("usage: vcac-bridge --db DIR --cert NICKNAME [--cert ...] [--port N] [--host IP]");
    if (port <= 0 || port > 65535) die("bad port");
    for (const char *p = reader_name; *p; p++)
        if (*p == ',' || *p == '(' || *p == ')' || *p == '"') die("bad reader name");
    signal(SIGPIPE, SIG_IGN);

    /* libcacard's option string: an NSS database, no hardware, one soft CAC
     * card in a reader of its own whose certificates are these nicknames. */
    char options[4096];
    int n = snprintf(options, sizeof options, "db=\"sql:%s\" use_hw=no soft=(,%s,CAC,", db, reader_name);
    for (int i = 0; i < ncerts; i++) n += snprintf(options + n, sizeof options - (size_t)n, ",%s", certs[i]);
    n += snprintf(options + n, sizeof options - (size_t)n, ")");
    if (n >= (int)sizeof options) die("options too long");

    GThread *events = g_thread_new("vcac-events", drain_events, NULL);
    (void)events;
    VCardEmulOptions *opts = vcard_emul_options(options);
    if (opts == NULL) die("libcacard refused the options");
    if (vcard_emul_init(opts) != VCARD_EMUL_OK) die("libcacard could not start the card (is the NSS database at %s?)", db);
    VReader *reader = vreader_get_reader_by_name(reader_name);
    if (reader == NULL) die("libcacard made no reader");
    if (vreader_card_is_present(reader) != VREADER_OK) die("no card in the virtual reader (certificates %s... not in %s?)", certs[0], db);

    int fd = connect_vpcd(host, port);
    printf("connected\n");
    fflush(stdout);
    logmsg("connected to %s:%d", host, port);

    static uint8_t in[MAX_MESSAGE], out[MAX_MESSAGE];
    for (;;) {
        uint8_t head[2];
        if (read_full(fd, head, 2) != 0) break;
        int len = head[0] << 8 | head[1];
        if (read_full(fd, in, (size_t)len) != 0) break;
        if (len == 1) {
            switch (in[0]) {
            case 0: /* power off */
                logmsg("power off");
                vreader_power_off(reader);
                break;
            case 1: /* power on */
                logmsg("power on");
                vreader_power_on(reader, NULL, NULL);
                break;
            case 2: /* reset */
                logmsg("reset");
                vreader_power_off(reader);
                vreader_power_on(reader, NULL, NULL);
                break;
            case 4: { /* get ATR */
                int atr_len = (int)sizeof out;
                vcard_emul_get_atr(NULL, out, &atr_len);
                logmsg("ATR (%d bytes)", atr_len);
                if (send_message(fd, out, atr_len) != 0) goto done;
                break;
            }
            default:
                logmsg("unknown control byte %u", in[0]);
            }
            continue;
        }
        int out_len = (int)sizeof out;
        if (vreader_xfr_bytes(reader, in, len, out, &out_len) != VREADER_OK) {
            /* No card answer: a transmission error, as a real reader reports
             * it (status word 6F00, "no precise diagnosis"). */
            out[0] = 0x6f;
            out[1] = 0x00;
            out_len = 2;
        }
        logmsg("APDU %02x %02x -> %d bytes, SW %02x%02x", in[0], len > 1 ? in[1] : 0, out_len,
               out_len >= 2 ? out[out_len - 2] : 0, out_len >= 2 ? out[out_len - 1] : 0);
        if (send_message(fd, out, out_len) != 0) break;
    }
done:
    logmsg("vpcd closed the connection");
    close(fd);
    vreader_free(reader);
    return 0;
}
