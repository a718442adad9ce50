#ifndef KEYSHARE_CZLIB_SHIM_H
#define KEYSHARE_CZLIB_SHIM_H
// zlib (Debian zlib1g-dev), for the share zips (Sources/KeySharing/ShareZip.swift):
// crc32 for the entries keyshare writes, raw inflate for deflated entries of zips
// made by other tools. inflateInit2 is a macro: the wrapper makes it callable from Swift.
#include <zlib.h>

static inline int keyshare_inflate_init_raw(z_stream *stream) {
    return inflateInit2(stream, -MAX_WBITS);
}
#endif
