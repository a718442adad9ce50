/*
 * libkeyshare-pkcs11.so's own internals (nothing here is exported): the engine loader of
 * in-process mode (engine.c), used by the getters (client_tables.c).
 */
#ifndef KEYSHARE_CLIENT_H
#define KEYSHARE_CLIENT_H

struct ks_engine_pkcs11;

/* The engine's getters, loaded on first use; NULL (and a debug line) when it cannot be loaded. */
const struct ks_engine_pkcs11 *ks_engine(void);

#endif
