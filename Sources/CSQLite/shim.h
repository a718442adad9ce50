#ifndef KEYSHARE_CSQLITE_SHIM_H
#define KEYSHARE_CSQLITE_SHIM_H
#include <sqlite3.h>
// SQLITE_TRANSIENT is a cast macro, which Swift does not import.
static inline sqlite3_destructor_type ks_sqlite_transient(void) { return SQLITE_TRANSIENT; }
#endif
