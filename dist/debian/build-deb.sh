#!/usr/bin/env bash
# dist/debian/build-deb.sh SRCDIR VERSION DEB_VERSION COMPRESS OUT
#
# Run by `make deb` in .build/deb, after `make install-files` filled
# debian/keyshare with PREFIX=/usr: the same files `make install` installs.
# With dpkg-dev's own tools and no network: strip the ELF files (as dh_strip
# does), add the Debian changelog and the lintian overrides, let
# dpkg-shlibdeps find Depends from the libraries the binaries really link,
# let dpkg-gencontrol write DEBIAN/control (version, Installed-Size), write
# md5sums and build the .deb with root-owned files (no fakeroot needed).
set -euo pipefail
SRC=${1:?source directory}
VERSION=${2:?version}
DEB_VERSION=${3:?package version}
COMPRESS=${4:?compression}
OUT=${5:?output .deb}
ROOT=debian/keyshare
umask 022
[ -d "$ROOT/usr/bin" ] || { echo "build-deb.sh: run from the build directory after install-files" >&2; exit 1; }

mkdir -p debian
cp "$SRC/dist/debian/control" debian/control
maintainer=$(sed -n 's/^Maintainer: //p' debian/control)
date=$(date -u -R -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}")
python3 "$SRC/dist/debian/changelog.py" "$SRC/CHANGELOG.md" "$VERSION" "$DEB_VERSION" "$maintainer" "$date" \
  > debian/changelog
gzip -9n -c debian/changelog > "$ROOT/usr/share/doc/keyshare/changelog.gz"

if [ -s "$SRC/dist/debian/lintian-overrides" ]; then
  install -d "$ROOT/usr/share/lintian/overrides"
  install -m 0644 "$SRC/dist/debian/lintian-overrides" "$ROOT/usr/share/lintian/overrides/keyshare"
fi

# Strip what dh_strip would: symbols, .comment and .note (the build ID note stays).
elves=()
while IFS= read -r -d '' f; do
  [ "$(head -c 4 "$f" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] || continue
  case $f in
    *.so|*.so.*) strip --strip-unneeded --remove-section=.comment --remove-section=.note "$f" ;;
    *)           strip --remove-section=.comment --remove-section=.note "$f" ;;
  esac
  elves+=("$f")
done < <(find "$ROOT" -type f -print0 | sort -z)
[ "${#elves[@]}" -ge 2 ] || { echo "build-deb.sh: expected the command and the module, found: ${elves[*]}" >&2; exit 1; }

# Depends: what the binaries link, as dpkg-shlibdeps maps it to packages (it finds the
# package's root by its DEBIAN directory).
mkdir -p "$ROOT/DEBIAN"
# prerm: running agents retire at removal and upgrade (docs/agent.md, "Managing it"): SIGTERM makes
# an agent stop listening at once and exit when its last client goes, so none keeps running on a
# deleted binary and the next client starts the new one. Stores are never touched.
cat > "$ROOT/DEBIAN/prerm" <<'PRERM'
#!/bin/sh
set -e
case "$1" in
  remove|upgrade|deconfigure|failed-upgrade)
    for pid in $(pgrep -f '^/usr/bin/keyshare agent' 2>/dev/null || true); do
      kill -TERM "$pid" 2>/dev/null || true
    done
    ;;
esac
# At removal Firefox's policy names keyshare under SecurityDevices.Delete instead of Add, so
# profiles drop the module whose library is going (docs/browsers.md); an upgrade keeps it.
if [ "$1" = remove ]; then
  keyshare browser policy --remove >/dev/null 2>&1 || true
fi
exit 0
PRERM
chmod 0755 "$ROOT/DEBIAN/prerm"

# postinst: Firefox's enterprise policy registers the module for every user and profile
# (SecurityDevices, merged into /etc/firefox/policies/policies.json: every other policy stays;
# a file that is not JSON is left alone and reported). Chromium has no such policy on Linux:
# each user runs `keyshare browser setup` once (docs/browsers.md).
module=$(cd "$ROOT" && find usr -name libkeyshare-pkcs11.so -path '*/pkcs11/*' | head -1)
[ -n "$module" ] || { echo "build-deb.sh: no libkeyshare-pkcs11.so under a pkcs11 directory" >&2; exit 1; }
cat > "$ROOT/DEBIAN/postinst" <<POSTINST
#!/bin/sh
set -e
if [ "\$1" = configure ]; then
  keyshare browser policy --module /$module >/dev/null 2>&1 ||
    echo "keyshare: Firefox's policy was not changed (run: keyshare browser policy --module /$module)" >&2
fi
exit 0
POSTINST
chmod 0755 "$ROOT/DEBIAN/postinst"

# postrm purge: the policy file goes when it holds nothing but what prerm left (the file
# keyshare browser policy --remove writes when keyshare was its only entry: sorted keys, two spaces).
cat > "$ROOT/DEBIAN/postrm" <<'POSTRM'
#!/bin/sh
set -e
if [ "$1" = purge ]; then
  f=/etc/firefox/policies/policies.json
  left='{
  "policies" : {
    "SecurityDevices" : {
      "Delete" : [
        "keyshare"
      ]
    }
  }
}'
  if [ -f "$f" ] && [ "$(cat "$f")" = "$left" ]; then
    rm -f "$f"
    rmdir /etc/firefox/policies /etc/firefox 2>/dev/null || true
  fi
fi
exit 0
POSTRM
chmod 0755 "$ROOT/DEBIAN/postrm"
rm -f debian/keyshare.substvars
dpkg-shlibdeps -Tdebian/keyshare.substvars "${elves[@]}"
# Binaries linked with packed relative relocations (lld's DT_RELR, Package.swift) need glibc 2.36's
# loader (their GLIBC_ABI_DT_RELR version); libc6's symbols file names no symbol for it, so say it.
# (grep reads all of objdump's output: with pipefail, grep -q's early exit failed the pipeline.)
if objdump -p "${elves[@]}" 2>/dev/null | grep 'GLIBC_ABI_DT_RELR' >/dev/null; then
  sed -i -E 's/libc6 \(>= 2\.(2[0-9]|3[0-5])(\.[0-9]+)?\)/libc6 (>= 2.36)/' debian/keyshare.substvars
fi
grep -q '^shlibs:Depends=.*libssl3' debian/keyshare.substvars ||
  { echo "build-deb.sh: dpkg-shlibdeps gave no libssl3: $(cat debian/keyshare.substvars)" >&2; exit 1; }

dpkg-gencontrol -pkeyshare -P"$ROOT" -v"$DEB_VERSION" -Tdebian/keyshare.substvars -fdebian/files
(cd "$ROOT" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) \
  > "$ROOT/DEBIAN/md5sums"
chmod 0644 "$ROOT/DEBIAN/control" "$ROOT/DEBIAN/md5sums"

mkdir -p "$(dirname "$OUT")"
dpkg-deb --root-owner-group -Z"$COMPRESS" --build "$ROOT" "$OUT" >/dev/null
echo "built $OUT ($(du -h "$OUT" | cut -f1); $(grep -c . "$ROOT/DEBIAN/md5sums") files)"
echo "Depends: $(sed -n 's/^Depends: //p' "$ROOT/DEBIAN/control")"
