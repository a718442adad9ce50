#!/bin/bash
# `make openssl-update VERSION=x.y.z` (docs/packaging.md, "The bundled OpenSSL"): moves the pinned
# Debian 13 OpenSSL (OPENSSL_DEB_VERSION and the two OPENSSL_DEB_SHA256_* lines of the Makefile)
# to the newest Debian revision of upstream x.y.z in one step. The two packages fetch.sh uses
# (libssl-dev, openssl-provider-legacy) are looked up and downloaded by a private apt (as fetch.sh
# does: nothing of the system's apt is read or written), which checks the archive's signature
# against Debian's keyring and each file against the signed index; their SHA-256 are then written
# into the Makefile, and the files kept in the bundle's debs/ so the next `make build` uses them.
#
#   update.sh MAKEFILE VERSION BUNDLE_DIR
#
# Refused, with the Makefile untouched: a VERSION that is not x.y.z, an archive whose signature
# does not verify, a version the archive does not have, a download that does not match its index.
# OPENSSL_UPDATE_DRY_RUN=1: everything but the rewrite (the new lines are printed).
# OPENSSL_DEB_MIRROR / OPENSSL_DEB_SUITE (as fetch.sh), OPENSSL_DEB_SECURITY_MIRROR /
# OPENSSL_DEB_SECURITY_SUITE (Debian's security archive, where security releases appear first;
# empty mirror: not used), OPENSSL_DEB_KEYRING (default Debian's archive keyring): for a local
# mirror, as Tests/integration/94-doctor.sh uses.
set -euo pipefail
MAKEFILE=${1:?makefile} VERSION=${2:-} BUNDLE=${3:?bundle dir}
die() { echo "openssl-update: $*" >&2; exit 1; }
[[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "VERSION=$VERSION: give OpenSSL's upstream version as x.y.z (e.g. VERSION=3.5.10)"
[ -f "$MAKEFILE" ] && [ -w "$MAKEFILE" ] || die "$MAKEFILE: not a writable file"
for v in OPENSSL_DEB_VERSION OPENSSL_DEB_SHA256_DEV OPENSSL_DEB_SHA256_LEGACY; do
  [ "$(grep -c "^$v[[:space:]]*:=" "$MAKEFILE")" = 1 ] || die "$MAKEFILE: no single '$v :=' line to rewrite"
done
MIRROR=${OPENSSL_DEB_MIRROR:-http://deb.debian.org/debian}
SUITE=${OPENSSL_DEB_SUITE:-trixie}
SEC_MIRROR=${OPENSSL_DEB_SECURITY_MIRROR-http://security.debian.org/debian-security}
SEC_SUITE=${OPENSSL_DEB_SECURITY_SUITE:-$SUITE-security}
KEYRING=${OPENSSL_DEB_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
[ -r "$KEYRING" ] || die "$KEYRING: no keyring to check the archive's signature with (apt-get install debian-archive-keyring)"
ARCH=$(dpkg --print-architecture)

T=$(mktemp -d /tmp/keyshare-openssl-update.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/lists/partial" "$T/cache/archives/partial" "$T/debs"
{
  echo "deb [signed-by=$KEYRING] $MIRROR $SUITE main"
  [ -z "$SEC_MIRROR" ] || echo "deb [signed-by=$KEYRING] $SEC_MIRROR $SEC_SUITE main"
} >"$T/sources.list"
A=(-o Dir::Etc::sourcelist="$T/sources.list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$T/lists"
   -o Dir::Cache="$T/cache" -o Dir::State::status=/dev/null -o Debug::NoLocking=1 -o APT::Sandbox::User=root
   -o Acquire::Languages=none -o Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled=false
   -o APT::Architecture="$ARCH" -o APT::Architectures::="$ARCH")
[ "$(id -u)" = 0 ] || A+=(-o APT::Sandbox::User="$(id -un)")

echo "openssl-update: looking for OpenSSL $VERSION in $MIRROR $SUITE${SEC_MIRROR:+ and $SEC_MIRROR $SEC_SUITE}"
# apt-get update fails (exit 100) when a Release file is unsigned or its signature does not verify.
if ! apt-get "${A[@]}" -q update >"$T/update.log" 2>&1 || grep -qE '^(E|W): (GPG error|The repository .* is not signed|Failed to fetch)' "$T/update.log"; then
  sed 's/^/  /' "$T/update.log" | grep -E '^  (E|W):' >&2 || true
  die "the archive's index could not be fetched or its signature did not verify against $KEYRING: nothing changed"
fi

# The newest Debian revision of upstream $VERSION that both packages have (same version for both).
versions() { apt-cache "${A[@]}" madison "$1" 2>/dev/null | awk -F'|' '{gsub(/ /, "", $2); print $2}' | sort -u; }
pick=""
for v in $(versions libssl-dev); do
  [ "${v%%-*}" = "$VERSION" ] || continue
  versions openssl-provider-legacy | grep -qxF "$v" || continue
  if [ -z "$pick" ] || dpkg --compare-versions "$v" gt "$pick"; then pick=$v; fi
done
[ -n "$pick" ] || die "$SUITE has no libssl-dev and openssl-provider-legacy $VERSION (it has: $(versions libssl-dev | tr '\n' ' ')): nothing changed"

# apt checks each file against the SHA-256 in the signed index: a tampered file fails here.
(cd "$T/debs" && apt-get "${A[@]}" -q download "libssl-dev=$pick" "openssl-provider-legacy=$pick") >"$T/download.log" 2>&1 \
  || { sed 's/^/  /' "$T/download.log" >&2; die "downloading libssl-dev and openssl-provider-legacy $pick failed: nothing changed"; }
for f in "$T/debs"/*.deb; do n=$(printf '%b' "${f//%/\\x}"); [ "$f" = "$n" ] || mv "$f" "$n"; done
DEV=$T/debs/libssl-dev_${pick}_$ARCH.deb
LEGACY=$T/debs/openssl-provider-legacy_${pick}_$ARCH.deb
for f in "$DEV" "$LEGACY"; do
  [ -f "$f" ] || die "$(basename "$f") was not downloaded: nothing changed"
  [ "$(dpkg-deb -f "$f" Version)" = "$pick" ] || die "$(basename "$f") is not version $pick: nothing changed"
done
SHA_DEV=$(sha256sum "$DEV" | cut -d' ' -f1)
SHA_LEGACY=$(sha256sum "$LEGACY" | cut -d' ' -f1)

OLD=$(sed -n 's/^OPENSSL_DEB_VERSION[[:space:]]*:=[[:space:]]*//p' "$MAKEFILE")
NEW_LINES="OPENSSL_DEB_VERSION       := $pick
OPENSSL_DEB_SHA256_DEV    := $SHA_DEV
OPENSSL_DEB_SHA256_LEGACY := $SHA_LEGACY"
if [ "${OPENSSL_UPDATE_DRY_RUN:-0}" = 1 ]; then
  echo "openssl-update: dry run: $MAKEFILE would pin OpenSSL $pick (now $OLD):"
  echo "$NEW_LINES"
  exit 0
fi
sed -e "s|^OPENSSL_DEB_VERSION[[:space:]]*:=.*|OPENSSL_DEB_VERSION       := $pick|" \
    -e "s|^OPENSSL_DEB_SHA256_DEV[[:space:]]*:=.*|OPENSSL_DEB_SHA256_DEV    := $SHA_DEV|" \
    -e "s|^OPENSSL_DEB_SHA256_LEGACY[[:space:]]*:=.*|OPENSSL_DEB_SHA256_LEGACY := $SHA_LEGACY|" "$MAKEFILE" >"$T/Makefile.new"
[ "$(grep -c -xF -e "OPENSSL_DEB_VERSION       := $pick" -e "OPENSSL_DEB_SHA256_DEV    := $SHA_DEV" \
      -e "OPENSSL_DEB_SHA256_LEGACY := $SHA_LEGACY" "$T/Makefile.new")" = 3 ] || die "rewriting $MAKEFILE failed: nothing changed"
cat "$T/Makefile.new" >"$MAKEFILE"
# The next `make build` finds the files by their pinned checksum (fetch.sh) instead of fetching them again.
mkdir -p "$BUNDLE/debs" && cp "$DEV" "$LEGACY" "$BUNDLE/debs/"
echo "openssl-update: $MAKEFILE pins OpenSSL $pick (was $OLD):"
echo "$NEW_LINES"
echo "openssl-update: next: make build (rebuilds the bundle), the tests, then make deb; say it in CHANGELOG.md"
