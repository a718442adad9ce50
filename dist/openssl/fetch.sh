#!/bin/bash
# Fetches Debian 13's OpenSSL (libssl-dev and openssl-provider-legacy, one pinned version) and
# lays out the bundle keyshare links against where the system OpenSSL is older than 3.5
# (docs/architecture.md, "The crypto engine"). Nothing is installed system-wide: apt runs with a
# private configuration under the bundle directory and the packages are unpacked with dpkg -x.
#
#   fetch.sh OUT VERSION SHA256_LIBSSL_DEV SHA256_PROVIDER_LEGACY
#
# OUT gets include/ (the 3.5 headers), lib/libkeyshare-crypto35.a (the static archive, renamed: see the .pc below; -l then
# cannot pick a shared 3.5), lib/pkgconfig/libcrypto.pc (what SwiftPM's COpenSSL target reads),
# include/keyshare_openssl_bundle.h (the bundle's paths, for the legacy provider) and
# ossl-modules/legacy.so (the 3.5 legacy provider, loaded by path, never Debian 12's 3.0 one).
# OPENSSL_DEB_DIR=dir: take the two .deb files from there instead of the network (offline builds).
set -euo pipefail
OUT=$1 VERSION=$2 SHA_DEV=$3 SHA_LEGACY=$4
ARCH=$(dpkg --print-architecture)
MULTIARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
SUITE=${OPENSSL_DEB_SUITE:-trixie}
MIRROR=${OPENSSL_DEB_MIRROR:-http://deb.debian.org/debian}
# Security releases reach SUITE-security first (where `make openssl-update` may have found the pin).
SEC_MIRROR=${OPENSSL_DEB_SECURITY_MIRROR-http://security.debian.org/debian-security}
SEC_SUITE=${OPENSSL_DEB_SECURITY_SUITE:-$SUITE-security}

die() { echo "openssl bundle: $*" >&2; exit 1; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
DEBS=$OUT/debs
APT=$OUT/apt
mkdir -p "$DEBS"

DEV_DEB=$DEBS/libssl-dev_${VERSION}_${ARCH}.deb
LEGACY_DEB=$DEBS/openssl-provider-legacy_${VERSION}_${ARCH}.deb

verify() { # file sha256
  [ -f "$1" ] && echo "$2  $1" | sha256sum -c --status -
}

if ! verify "$DEV_DEB" "$SHA_DEV" || ! verify "$LEGACY_DEB" "$SHA_LEGACY"; then
  if [ -n "${OPENSSL_DEB_DIR:-}" ]; then
    cp "$OPENSSL_DEB_DIR"/libssl-dev_"${VERSION}"_"$ARCH".deb "$OPENSSL_DEB_DIR"/openssl-provider-legacy_"${VERSION}"_"$ARCH".deb "$DEBS"/ \
      || die "OPENSSL_DEB_DIR=$OPENSSL_DEB_DIR lacks libssl-dev/openssl-provider-legacy $VERSION"
  else
    # A private apt: its own sources list, lists and cache; the system's are not read or written.
    mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial"
    { echo "deb $MIRROR $SUITE main"; [ -z "$SEC_MIRROR" ] || echo "deb $SEC_MIRROR $SEC_SUITE main"; } > "$APT/sources.list"
    A=(-o Dir::Etc::sourcelist="$APT/sources.list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$APT/lists"
       -o Dir::Cache="$APT/cache" -o Dir::State::status=/dev/null -o Debug::NoLocking=1 -o APT::Sandbox::User=root
       -o Acquire::Languages=none -o Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled=false)
    [ "$(id -u)" = 0 ] || A+=(-o APT::Sandbox::User="$(id -un)")
    echo "openssl bundle: fetching libssl-dev and openssl-provider-legacy $VERSION from $MIRROR $SUITE"
    apt-get "${A[@]}" -qq update >/dev/null || die "apt-get update of $MIRROR $SUITE failed (network?)"
    (cd "$DEBS" && apt-get "${A[@]}" -qq download "libssl-dev=$VERSION" "openssl-provider-legacy=$VERSION" >/dev/null 2>&1) \
      || die "$SUITE no longer has OpenSSL $VERSION: pin the current one with make openssl-update VERSION=x.y.z (docs/packaging.md, \"The bundled OpenSSL\")"
    # apt percent-encodes the epoch colon and '~' is kept: normalise to the names above.
    for f in "$DEBS"/*.deb; do n=$(printf '%b' "${f//%/\\x}"); [ "$f" = "$n" ] || mv "$f" "$n"; done
  fi
  verify "$DEV_DEB" "$SHA_DEV" || die "sha256 of $(basename "$DEV_DEB") is not the pinned $SHA_DEV"
  verify "$LEGACY_DEB" "$SHA_LEGACY" || die "sha256 of $(basename "$LEGACY_DEB") is not the pinned $SHA_LEGACY"
fi

X=$OUT/x
rm -rf "$X" "$OUT/include" "$OUT/lib" "$OUT/ossl-modules"
mkdir -p "$X" "$OUT/include" "$OUT/lib/pkgconfig" "$OUT/ossl-modules"
dpkg -x "$DEV_DEB" "$X"
dpkg -x "$LEGACY_DEB" "$X"
cp -a "$X/usr/include/openssl" "$OUT/include/"
cp -a "$X/usr/include/$MULTIARCH/openssl/." "$OUT/include/openssl/"
cp "$X/usr/lib/$MULTIARCH/libcrypto.a" "$OUT/lib/libkeyshare-crypto35.a"
cp "$X/usr/lib/$MULTIARCH/ossl-modules/legacy.so" "$OUT/ossl-modules/"
mkdir -p "$OUT/doc" && cp "$X/usr/share/doc/libssl-dev/copyright" "$OUT/doc/copyright"
rm -rf "$X"

# The archive under a name of its own, not -lcrypto: SwiftPM passes other .pc files'
# -L/usr/lib/<multiarch> (tss2-esys.pc) unfiltered and ahead of this one, and -lcrypto then found
# Debian 12's libcrypto.so.3 first: a module built on the 3.5 headers linked against the 3.0
# library (SwiftPM refuses a path in Libs, and -l:libcrypto.a would find Debian's own static
# 3.0 archive). COpenSSL's module map links nothing itself; the .pc in use names the library.
# The archive was built on glibc 2.41 and libzstd/brotli/zlib support: those come from the
# system (dynamic), the one glibc 2.38+ symbol from the COpenSSLSupport target's shim.
cat > "$OUT/lib/pkgconfig/libcrypto.pc" <<PC
prefix=$OUT
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: OpenSSL-libcrypto
Description: OpenSSL $VERSION libcrypto (Debian 13), linked statically by keyshare
Version: ${VERSION%%-*}
Libs: -L\${libdir} -lkeyshare-crypto35 -lzstd -lz -lbrotlienc -lbrotlidec -ldl -lpthread
Cflags: -I\${includedir}
PC

cat > "$OUT/include/keyshare_openssl_bundle.h" <<H
// Generated by dist/openssl/fetch.sh: keyshare links OpenSSL $VERSION statically.
#ifndef KEYSHARE_OPENSSL_BUNDLE_H
#define KEYSHARE_OPENSSL_BUNDLE_H
#define KS_OPENSSL_BUNDLED 1
/// The bundle's own legacy provider (a development tree's fallback; installs look next to the binary first).
#define KS_OPENSSL_BUNDLE_LEGACY "$OUT/ossl-modules/legacy.so"
#endif
H
echo "$VERSION" > "$OUT/VERSION"
echo "openssl bundle: OpenSSL $VERSION in $OUT"
