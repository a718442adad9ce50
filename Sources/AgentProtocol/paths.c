/*
 * Where the agent listens and which store it serves (docs/agent.md, "Which
 * agent, which store"); shared by the module (client), the CLI and the agent.
 *
 * One agent serves one store, as gpg-agent serves one GNUPGHOME: the user's
 * default store at BASE/agent.sock, any other store (KEYSHARE_HOME,
 * XDG_DATA_HOME) at BASE/s.<hash of its path>/agent.sock. BASE is
 * $XDG_RUNTIME_DIR/keyshare, else /tmp/keyshare-agent-EUID (said so in the
 * debug log: never silently). $KEYSHARE_AGENT_SOCKET names a socket outright
 * (a sandbox with the socket bound in). The agent takes its store from its
 * own environment when it starts and never from a client, so a client names
 * a store only by choosing which socket it talks to.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "agent_protocol.h"

/* Nothing in a setuid or setgid program (secure_getenv: AT_SECURE): its
 * environment is its invoker's (sudo or su with pam_p11), who must not pick
 * the store, the directory or the socket that a root process uses. */
static const char *env(const char *name) {
    const char *v = secure_getenv(name);
    return v && *v ? v : NULL;
}

/* The home directory of the effective uid from the password database (not $HOME). */
static int passwd_home(char *out, size_t n) {
    struct passwd pw, *res = NULL;
    char buf[2048];
    if (getpwuid_r(geteuid(), &pw, buf, sizeof buf, &res) != 0 || !res || !pw.pw_dir) return -1;
    int w = snprintf(out, n, "%s", pw.pw_dir);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

/* `v` made absolute against the working directory, symlinks resolved when it exists. */
static int absolute(const char *v, char *out, size_t n) {
    char joined[PATH_MAX];
    int w;
    if (v[0] == '/') {
        w = snprintf(joined, sizeof joined, "%s", v);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) return -1;
        w = snprintf(joined, sizeof joined, "%s/%s", cwd, v);
    }
    if (w < 0 || (size_t)w >= sizeof joined) return -1;
    char real[PATH_MAX];
    const char *use = realpath(joined, real) ? real : joined;
    w = snprintf(out, n, "%s", use);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

int ksa_store_home(char *out, size_t n) {
    char raw[PATH_MAX];
    int w;
    if (env("KEYSHARE_HOME")) w = snprintf(raw, sizeof raw, "%s", env("KEYSHARE_HOME"));
    else if (env("XDG_DATA_HOME")) w = snprintf(raw, sizeof raw, "%s/keyshare", env("XDG_DATA_HOME"));
    else if (env("HOME")) w = snprintf(raw, sizeof raw, "%s/.local/share/keyshare", env("HOME"));
    else {
        char home[PATH_MAX];
        if (passwd_home(home, sizeof home)) w = snprintf(raw, sizeof raw, "/tmp/keyshare-%u", (unsigned)geteuid());
        else w = snprintf(raw, sizeof raw, "%s/.local/share/keyshare", home);
    }
    if (w < 0 || (size_t)w >= sizeof raw) return -1;
    return absolute(raw, out, n);
}

int ksa_store_is_default(const char *store) {
    char home[PATH_MAX], def[PATH_MAX], real[PATH_MAX];
    if (passwd_home(home, sizeof home)) return 0;
    int w = snprintf(def, sizeof def, "%s/.local/share/keyshare", home);
    if (w < 0 || (size_t)w >= sizeof def) return 0;
    const char *d = realpath(def, real) ? real : def;
    return strcmp(d, store) == 0;
}

/* FNV-1a, 64 bits: a name for a store's socket directory, not a secret. */
static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (uint8_t)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

int ksa_agent_base(char *dir, size_t n, int *shared_tmp) {
    int w;
    *shared_tmp = 0;
    if (env("XDG_RUNTIME_DIR")) {
        w = snprintf(dir, n, "%s/keyshare", env("XDG_RUNTIME_DIR"));
    } else {
        *shared_tmp = 1;
        w = snprintf(dir, n, "/tmp/keyshare-agent-%u", (unsigned)geteuid());
    }
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

int ksa_agent_dir(char *dir, size_t n) {
    const char *sock = env("KEYSHARE_AGENT_SOCKET");
    int w;
    if (sock) {
        const char *slash = strrchr(sock, '/');
        if (!slash) w = snprintf(dir, n, ".");
        else if (slash == sock) w = snprintf(dir, n, "/");
        else w = snprintf(dir, n, "%.*s", (int)(slash - sock), sock);
        return w < 0 || (size_t)w >= n ? -1 : 0;
    }
    char base[PATH_MAX], store[PATH_MAX];
    int shared;
    if (ksa_agent_base(base, sizeof base, &shared) || ksa_store_home(store, sizeof store)) return -1;
    if (ksa_store_is_default(store)) w = snprintf(dir, n, "%s", base);
    else w = snprintf(dir, n, "%s/s.%016llx", base, (unsigned long long)fnv1a(store));
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

static void describe_owner(char *out, size_t n, uid_t uid) {
    struct passwd pw, *res = NULL;
    char buf[1024];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res && pw.pw_name)
        snprintf(out, n, "uid %u (%s)", (unsigned)uid, pw.pw_name);
    else
        snprintf(out, n, "uid %u", (unsigned)uid);
}

/* In a user namespace other than the initial one (a sandbox, a rootless
 * container), files of uids not mapped into it show as the overflow uid:
 * root's /, /tmp and /run among them. Such an ancestor cannot be told from
 * another user's; it is accepted (its mode is still judged), because what
 * keeps a PIN from another uid is the listener's credentials (SO_PEERCRED,
 * checked at connect), and the agent's own directory must still be ours. */
static uid_t unmapped_owner(void) {
    static int known;
    static uid_t overflow = (uid_t)-1;
    if (!__atomic_load_n(&known, __ATOMIC_ACQUIRE)) {
        uid_t o = (uid_t)-1;
        char map[256] = "";
        FILE *f = fopen("/proc/self/uid_map", "re");
        if (f) {
            size_t got = fread(map, 1, sizeof map - 1, f);
            map[got] = '\0';
            fclose(f);
        }
        unsigned long a, b, c;
        int initial = sscanf(map, "%lu %lu %lu", &a, &b, &c) == 3 && a == 0 && b == 0 && c == 4294967295ul &&
                      !strchr(strchr(map, '\n') ? strchr(map, '\n') + 1 : "", ' ');
        if (!initial) {
            FILE *g = fopen("/proc/sys/kernel/overflowuid", "re");
            unsigned long v = 65534;
            if (g) { if (fscanf(g, "%lu", &v) != 1) v = 65534; fclose(g); }
            o = (uid_t)v;
        }
        overflow = o;
        __atomic_store_n(&known, 1, __ATOMIC_RELEASE);
    }
    return overflow;
}

int ksa_in_user_namespace(void) { return unmapped_owner() != (uid_t)-1; }

/* One ancestor: owned by us or root, and not writable by others unless sticky. */
static int check_ancestor(const char *dir, const char *subject, char *why, size_t n) {
    struct stat st;
    if (stat(dir, &st) != 0) {
        snprintf(why, n, "refusing %s: cannot examine its parent %s: %s", subject, dir, strerror(errno));
        return -1;
    }
    char owner[128];
    describe_owner(owner, sizeof owner, st.st_uid);
    if (st.st_uid != geteuid() && st.st_uid != 0 && st.st_uid != unmapped_owner()) {
        snprintf(why, n, "refusing %s: its parent %s is owned by %s (mode %04o), not by uid %u or root: "
                 "another user controls it (set XDG_RUNTIME_DIR to a directory of your own)",
                 subject, dir, owner, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
        return -1;
    }
    if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX)) {
        snprintf(why, n, "refusing %s: its parent %s is writable by others (mode %04o, owner %s)",
                 subject, dir, (unsigned)(st.st_mode & 07777), owner);
        return -1;
    }
    return 0;
}

/* `path` (symlinks resolved) and every directory above it up to /, by the ancestor rule. */
static int check_chain(const char *path, const char *subject, char *why, size_t n) {
    char real[PATH_MAX];
    if (!realpath(path, real)) {
        snprintf(why, n, "cannot resolve %s: %s", path, strerror(errno));
        return -1;
    }
    for (;;) {
        if (check_ancestor(real, subject, why, n)) return -1;
        char *slash = strrchr(real, '/');
        if (!slash || (slash == real && real[1] == '\0')) return 0;
        if (slash == real) real[1] = '\0';
        else *slash = '\0';
    }
}

static void parent_of(const char *path, char *out, size_t n) {
    snprintf(out, n, "%s", path);
    char *slash = strrchr(out, '/');
    if (!slash) snprintf(out, n, ".");
    else if (slash == out) out[1] = '\0';
    else *slash = '\0';
}

int ksa_check_dir(const char *dir, int create, char *why, size_t n) {
    char tmp[PATH_MAX], parent[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp) {
        snprintf(why, n, "refusing the agent directory: its path is too long");
        return -1;
    }
    /* What exists above the directory is judged before anything is made in
     * it: nothing of ours is created under a directory another user controls. */
    parent_of(dir, parent, sizeof parent);
    struct stat st;
    while (lstat(parent, &st) != 0 && strcmp(parent, "/") != 0 && strcmp(parent, ".") != 0) {
        char up[PATH_MAX];
        parent_of(parent, up, sizeof up);
        snprintf(parent, sizeof parent, "%s", up);
    }
    if (check_chain(parent, dir, why, n)) { errno = EPERM; return -1; }
    if (create) {
        /* mkdir -p with 0700 for what is missing; what exists is judged below. */
        for (char *p = tmp + 1; *p; p++) {
            if (*p != '/') continue;
            *p = '\0';
            if (mkdir(tmp, 0700) != 0 && errno != EEXIST) { *p = '/'; break; }
            *p = '/';
        }
        if (mkdir(tmp, 0700) != 0 && errno != EEXIST) {
            snprintf(why, n, "cannot create the agent directory %s: %s", dir, strerror(errno));
            return -1;
        }
    }
    if (lstat(dir, &st) != 0) {
        snprintf(why, n, "the agent directory %s: %s", dir, strerror(errno));
        return -1;
    }
    char owner[128];
    describe_owner(owner, sizeof owner, st.st_uid);
    if (S_ISLNK(st.st_mode)) {
        snprintf(why, n, "refusing the agent directory %s: it is a symbolic link (owner %s); "
                 "someone may have planted it: remove it", dir, owner);
        errno = EPERM;
        return -1;
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        snprintf(why, n, "refusing the agent directory %s: %s owned by %s with mode %04o; it must be a directory "
                 "of uid %u with mode 0700 (another user may have planted it: remove it%s)",
                 dir, S_ISDIR(st.st_mode) ? "a directory" : "not a directory,", owner,
                 (unsigned)(st.st_mode & 07777), (unsigned)geteuid(),
                 st.st_uid == geteuid() ? ", or chmod 700 it" : "");
        errno = EPERM;
        return -1;
    }
    /* Every ancestor again, now that all of them exist (symlinks resolved). */
    parent_of(dir, parent, sizeof parent);
    if (check_chain(parent, dir, why, n)) { errno = EPERM; return -1; }
    return 0;
}

int ksa_prepare_dir(const char *dir, int create) {
    char why[512];
    return ksa_check_dir(dir, create, why, sizeof why);
}
