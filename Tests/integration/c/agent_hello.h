/* A new client's hello frame to the agent, as the module sends it (Sources/AgentProtocol,
 * agent_protocol.h), for the test hosts that speak the protocol themselves (policyrace.c,
 * shmhostile.c): magic, version, flags, an all-zero token, then the tagged fields
 * (KEYSHARE_ACCESS_GROUPS when set; hello.c). */
#ifndef KS_IT_AGENT_HELLO_H
#define KS_IT_AGENT_HELLO_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "agent_protocol.h"

static void hello_put(uint8_t **p, const void *v, size_t n) { memcpy(*p, v, n); *p += n; }

/* Writes the frame (u32 length + payload) into msg (at least 8,192 bytes); returns its size. */
static size_t agent_hello(uint8_t *msg, uint16_t flags) {
    uint8_t *p = msg + 4;
    uint32_t magic = KSA_MAGIC, n;
    uint16_t version = KSA_VERSION;
    uint8_t token[16] = {0};
    hello_put(&p, &magic, 4); hello_put(&p, &version, 2); hello_put(&p, &flags, 2); hello_put(&p, token, 16);
    const char *groups = getenv("KEYSHARE_ACCESS_GROUPS");
    uint16_t count = groups != NULL, tag = KSA_HELLO_GROUPS;
    hello_put(&p, &count, 2);
    if (groups) {
        n = (uint32_t)strlen(groups);
        if (n > 2048) n = 0;
        hello_put(&p, &tag, 2); hello_put(&p, &n, 4); hello_put(&p, groups, n);
    }
    n = (uint32_t)(p - msg - 4);
    memcpy(msg, &n, 4);
    return (size_t)(p - msg);
}
#endif
