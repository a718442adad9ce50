#ifndef KEYSHARE_CSQLITE_SHIM_H
#define KEYSHARE_CSQLITE_SHIM_H
#include <sqlite3.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

// SQLITE_TRANSIENT is a cast macro, which Swift does not import.
static inline sqlite3_destructor_type ks_sqlite_transient(void) { return SQLITE_TRANSIENT; }

/// Closing this connection will neither checkpoint nor delete the WAL
/// (sqlite3_db_config is variadic, which Swift does not import). Used when
/// the store closes its connection for a fork (another process, or this one
/// after the fork, still uses the WAL), and when the connection's WAL was
/// deleted or replaced under it (its checkpoint would overwrite newer commits).
static inline int ks_sqlite_no_checkpoint_on_close(sqlite3 *db) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0);
}

/// The busy handler: another try every millisecond, for at least
/// `timeout_ms`. SQLite's own (sqlite3_busy_timeout) sleeps 1, 2, 5, ... up
/// to 100 ms between tries, so a process waiting for another that commits
/// back to back wakes in long steps, keeps missing the short gaps between
/// its transactions, and waits seconds (docs/reliability.md, "Fork with busy
/// threads": a forked worker's C_Login against a busy parent). A failed try
/// is one fcntl, so polling costs next to nothing.
static inline int ks_sqlite_busy_poll_handler(void *timeout_ms, int tries) {
    if ((long)tries >= (long)(intptr_t)timeout_ms) return 0;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, 0);
    return 1;
}

static inline int ks_sqlite_busy_poll(sqlite3 *db, int timeout_ms) {
    return sqlite3_busy_handler(db, ks_sqlite_busy_poll_handler, (void *)(intptr_t)timeout_ms);
}

/// The connection's own mapping of the WAL-index (the -shm file), or NULL
/// before the connection has opened its WAL. Obtained through the VFS's
/// xShmMap on the main database file, which returns the region the pager
/// already mapped (no new file descriptor: closing one would drop SQLite's
/// POSIX locks). The mapping lives as long as the connection.
static inline const volatile void *ks_sqlite_wal_index(sqlite3 *db) {
    sqlite3_file *file = 0;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK || !file) return 0;
    const sqlite3_io_methods *m = file->pMethods;
    if (!m || m->iVersion < 2 || !m->xShmMap) return 0;
    volatile void *region = 0;
    if (m->xShmMap(file, 0, 32768, 0, &region) != SQLITE_OK) return 0;
    return region;
}

/// The device and inode of the main database file as SQLite holds it open
/// (fstat of its descriptor), not as its path names it now: a same-uid
/// program swapping keychain.db between sqlite3_open_v2 and a stat(path)
/// would otherwise bind the store's identity (agent's store check, PIN
/// ledger) to a file this connection does not use.
/// The descriptor is the unix VFS's file (every "unix*" VFS allocates a
/// unixFile whose first members are pMethod, pVfs, pInode, h; unchanged
/// since SQLite 3.7). The layout is checked: the VFS must be a unix one and
/// the file's pVfs member must be that VFS. Returns 0 and fills dev/ino, or
/// -1 (another VFS, or a layout this code does not know).
struct ks_sqlite_unix_file_prefix {
    const sqlite3_io_methods *pMethod;
    sqlite3_vfs *pVfs;
    void *pInode;
    int h;
};
static inline int ks_sqlite_main_file_identity(sqlite3 *db, uint64_t *dev, uint64_t *ino) {
    sqlite3_file *file = 0;
    sqlite3_vfs *vfs = 0;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK || !file) return -1;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_VFS_POINTER, &vfs) != SQLITE_OK || !vfs || !vfs->zName) return -1;
    if (strncmp(vfs->zName, "unix", 4) != 0 || vfs->szOsFile < (int)sizeof(struct ks_sqlite_unix_file_prefix)) return -1;
    const struct ks_sqlite_unix_file_prefix *u = (const struct ks_sqlite_unix_file_prefix *)(const void *)file;
    if (u->pMethod == 0 || u->pVfs != vfs || u->h < 0) return -1;
    struct stat st;
    if (fstat(u->h, &st) != 0 || !S_ISREG(st.st_mode)) return -1;
    *dev = (uint64_t)st.st_dev;
    *ino = (uint64_t)st.st_ino;
    return 0;
}

/// A digest of the WAL-index header, which every commit of every process
/// rewrites (change counter, last frame, salts, checksums; the format is
/// https://www.sqlite.org/walformat.html). Equal stamps mean nothing was
/// committed in between; 0 means a writer is updating the header right now
/// (the two copies differ) or the index is not initialised: the caller
/// asks SQLite instead. SQLite writes copy 2, a barrier, then copy 1, and
/// reads copy 1, a barrier, then copy 2: the same order here.
static inline uint64_t ks_sqlite_wal_stamp(const volatile void *index) {
    const volatile uint32_t *h = (const volatile uint32_t *)index;
    uint32_t first[12], second[12];
    for (int i = 0; i < 12; i++) first[i] = h[i];
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (int i = 0; i < 12; i++) second[i] = h[12 + i];
    if (memcmp(first, second, sizeof first) != 0) return 0;
    if (((const uint8_t *)first)[12] == 0) return 0; /* isInit */
    uint64_t x = 14695981039346656037ULL; /* FNV-1a over the header words */
    for (int i = 0; i < 12; i++) { x ^= first[i]; x *= 1099511628211ULL; }
    return x | 1;
}

#endif
