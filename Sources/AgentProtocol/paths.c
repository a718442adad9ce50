/* Where the agent listens; shared by the module (client) and the agent. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "agent_protocol.h"

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

int ksa_agent_dir(char *dir, size_t n) {
    const char *sock = env("KEYSHARE_AGENT_SOCKET");
    int w;
    if (sock) {
        const char *slash = strrchr(sock, '/');
        if (!slash) w = snprintf(dir, n, ".");
        else if (slash == sock) w = snprintf(dir, n, "/");
        else w = snprintf(dir, n, "%.*s", (int)(slash - sock), sock);
    } else if (env("XDG_RUNTIME_DIR")) {
        w = snprintf(dir, n, "%s/keyshare", env("XDG_RUNTIME_DIR"));
    } else {
        w = snprintf(dir, n, "/tmp/keyshare-agent-%u", (unsigned)getuid());
    }
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

int ksa_socket_path(char *path, size_t n) {
    const char *sock = env("KEYSHARE_AGENT_SOCKET");
    int w;
    if (sock) {
        w = snprintf(path, n, "%s", sock);
    } else {
        char dir[512];
        if (ksa_agent_dir(dir, sizeof dir)) return -1;
        w = snprintf(path, n, "%s/agent.sock", dir);
    }
    /* sun_path is 108 bytes with the NUL. */
    return w < 0 || (size_t)w >= n || w >= 108 ? -1 : 0;
}

int ksa_prepare_dir(const char *dir, int create) {
    if (create && mkdir(dir, 0700) != 0 && errno != EEXIST) return -1;
    struct stat st;
    if (lstat(dir, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) != 0) {
        errno = EPERM;
        return -1;
    }
    return 0;
}
