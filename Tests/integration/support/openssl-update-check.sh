# Sourced by 94-doctor.sh (needs lib.sh's ok/bad, $ROOT and a scratch directory $W):
# `make openssl-update VERSION=...` against a local Debian-style archive made here (file://, signed
# with a throwaway key; no network), never touching the repository's Makefile:
#  - VERSION not x.y.z, or missing: refused, the Makefile unchanged;
#  - OPENSSL_UPDATE_DRY_RUN=1: the new pin printed (the newest Debian revision of x.y.z, the
#    packages' real SHA-256), the Makefile unchanged;
#  - a real run on a copy of the Makefile: the three lines rewritten, nothing else; the files kept
#    in the bundle's debs/ under the names fetch.sh verifies;
#  - an archive signed by another key, an unsigned one, a tampered package, a version not there:
#    refused, the copy unchanged.
U=$W/openssl-update
mkdir -p "$U/gnupg" "$U/pkgs" && chmod 700 "$U/gnupg"
export GNUPGHOME=$U/gnupg
ARCH=$(dpkg --print-architecture)
# fake_deb NAME VERSION: a minimal package (what matters here is its name, version and bytes).
fake_deb() {
  local d=$U/build/$1-$2
  mkdir -p "$d/DEBIAN" "$d/usr/share/doc/$1"
  printf 'Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: test <t@example.org>\nDescription: test %s\n' \
    "$1" "$2" "$ARCH" "$1" >"$d/DEBIAN/control"
  echo "$1 $2" >"$d/usr/share/doc/$1/README"
  dpkg-deb -Zgzip --build "$d" "$U/pkgs/$1_$2_$ARCH.deb" >/dev/null
}
# make_archive DIR KEY-ID|none: a trixie/main archive of $U/pkgs, its Release signed (InRelease) by KEY-ID.
make_archive() {
  local a=$1 key=$2 rel=dists/trixie/main/binary-$ARCH
  rm -rf "$a" && mkdir -p "$a/$rel" "$a/pool"
  cp "$U"/pkgs/*.deb "$a/pool/"
  (cd "$a" && dpkg-scanpackages --arch "$ARCH" pool /dev/null 2>/dev/null >"$rel/Packages" && gzip -k "$rel/Packages")
  {
    printf 'Origin: test\nLabel: test\nSuite: trixie\nCodename: trixie\nArchitectures: %s\nComponents: main\nDate: %s\nSHA256:\n' \
      "$ARCH" "$(LC_ALL=C date -u -R)"
    for f in main/binary-$ARCH/Packages main/binary-$ARCH/Packages.gz; do
      printf ' %s %s %s\n' "$(sha256sum "$a/dists/trixie/$f" | cut -d' ' -f1)" "$(stat -c %s "$a/dists/trixie/$f")" "$f"
    done
  } >"$a/dists/trixie/Release"
  [ "$key" = none ] || gpg --batch -q --local-user "$key" --clearsign -o "$a/dists/trixie/InRelease" "$a/dists/trixie/Release"
}
gpg --batch -q --passphrase '' --quick-gen-key 'keyshare test archive <archive@example.org>' ed25519 sign never 2>/dev/null
gpg --batch -q --passphrase '' --quick-gen-key 'someone else <other@example.org>' ed25519 sign never 2>/dev/null
gpg --batch -q --export archive@example.org >"$U/archive-keyring.gpg"
for v in 3.5.98-1~deb13u1 3.5.99-1~deb13u1 3.5.99-1~deb13u2; do fake_deb libssl-dev "$v"; fake_deb openssl-provider-legacy "$v"; done
fake_deb libssl-dev 3.5.97-1  # only one of the two packages has 3.5.97
make_archive "$U/mirror" archive@example.org
make_archive "$U/other-key" other@example.org
make_archive "$U/unsigned" none
cp -r "$U/mirror" "$U/tampered"
printf 'x' >>"$U/tampered/pool/libssl-dev_3.5.99-1~deb13u2_$ARCH.deb"

MF=$U/Makefile
cp "$ROOT/Makefile" "$MF"
real_before=$(sha256sum "$ROOT/Makefile")
upd() { # MIRROR-DIR VERSION [VAR=VALUE...]: make openssl-update on the copy, output in $UPD_OUT
  local mirror=$1 version=$2; shift 2
  UPD_OUT=$(env OPENSSL_DEB_MIRROR="file://$mirror" OPENSSL_DEB_SECURITY_MIRROR= OPENSSL_DEB_KEYRING="$U/archive-keyring.gpg" "$@" \
    make -s -C "$ROOT" openssl-update VERSION="$version" OPENSSL_UPDATE_FILE="$MF" OPENSSL_BUNDLE="$U/bundle" 2>&1)
}
pin() { grep -E '^OPENSSL_DEB_(VERSION|SHA256_DEV|SHA256_LEGACY) ' "$MF"; }
pin_before=$(pin)
want_dev=$(sha256sum "$U/pkgs/libssl-dev_3.5.99-1~deb13u2_$ARCH.deb" | cut -d' ' -f1)
want_legacy=$(sha256sum "$U/pkgs/openssl-provider-legacy_3.5.99-1~deb13u2_$ARCH.deb" | cut -d' ' -f1)

for v in 3.5 3.5.99.1 "3.5.99;true" x.y.z; do
  if upd "$U/mirror" "$v"; then bad "openssl-update VERSION=$v is refused" "$UPD_OUT"
  elif echo "$UPD_OUT" | grep -q "VERSION=.*give OpenSSL's upstream version as x.y.z" && [ "$(pin)" = "$pin_before" ]; then
    ok "openssl-update VERSION=$v: refused (x.y.z), the Makefile unchanged"
  else bad "openssl-update VERSION=$v: refused with the reason" "$UPD_OUT"; fi
done
if (cd "$ROOT" && make -s openssl-update OPENSSL_UPDATE_FILE="$MF" >/dev/null 2>&1); then bad "openssl-update without VERSION is refused"
else ok "openssl-update without VERSION is refused (the keyshare version is not taken for OpenSSL's)"; fi

if upd "$U/mirror" 3.5.99 OPENSSL_UPDATE_DRY_RUN=1 && echo "$UPD_OUT" | grep -qxF "OPENSSL_DEB_VERSION       := 3.5.99-1~deb13u2" \
   && echo "$UPD_OUT" | grep -qxF "OPENSSL_DEB_SHA256_DEV    := $want_dev" && echo "$UPD_OUT" | grep -qxF "OPENSSL_DEB_SHA256_LEGACY := $want_legacy" \
   && [ "$(pin)" = "$pin_before" ]; then
  ok "dry run: the newest revision of 3.5.99 (3.5.99-1~deb13u2) and its packages' SHA-256 printed; the Makefile unchanged"
else bad "dry run prints the new pin and changes nothing" "$UPD_OUT"; fi

for case in "other-key:an archive signed by another key" "unsigned:an unsigned archive" "tampered:a package that does not match the signed index"; do
  dir=${case%%:*} what=${case#*:}
  if upd "$U/$dir" 3.5.99; then bad "$what is refused" "$UPD_OUT"
  elif echo "$UPD_OUT" | grep -q 'nothing changed' && [ "$(pin)" = "$pin_before" ]; then ok "$what: refused, the Makefile unchanged"
  else bad "$what: refused, the Makefile unchanged" "$UPD_OUT"; fi
done
if ! upd "$U/mirror" 3.5.97 && echo "$UPD_OUT" | grep -q 'has no libssl-dev and openssl-provider-legacy 3.5.97' && [ "$(pin)" = "$pin_before" ]; then
  ok "a version the archive lacks (for one of the two packages): refused, the Makefile unchanged"
else bad "a version the archive lacks is refused" "$UPD_OUT"; fi

if upd "$U/mirror" 3.5.99; then
  diff <(echo "$pin_before") <(pin) >/dev/null && bad "the pin changed" "$UPD_OUT"
  expected="OPENSSL_DEB_VERSION       := 3.5.99-1~deb13u2
OPENSSL_DEB_SHA256_DEV    := $want_dev
OPENSSL_DEB_SHA256_LEGACY := $want_legacy"
  changed=$(diff "$ROOT/Makefile" "$MF" | grep -c '^>')
  if [ "$(pin)" = "$expected" ] && [ "$changed" = 3 ]; then ok "make openssl-update VERSION=3.5.99: the three pin lines rewritten, nothing else"
  else bad "the three pin lines rewritten, nothing else" "$(diff "$ROOT/Makefile" "$MF")"; fi
  if echo "$want_dev  $U/bundle/debs/libssl-dev_3.5.99-1~deb13u2_$ARCH.deb" | sha256sum -c --status - \
     && echo "$want_legacy  $U/bundle/debs/openssl-provider-legacy_3.5.99-1~deb13u2_$ARCH.deb" | sha256sum -c --status -; then
    ok "the downloaded packages kept in the bundle's debs/ under fetch.sh's names"
  else bad "the packages kept in the bundle's debs/" "$(ls -la "$U/bundle/debs" 2>&1)"; fi
else bad "make openssl-update VERSION=3.5.99 on a copy of the Makefile" "$UPD_OUT"; fi
if [ "$(sha256sum "$ROOT/Makefile")" = "$real_before" ]; then ok "the repository's Makefile was never touched"; else bad "the repository's Makefile was never touched"; fi
unset GNUPGHOME
