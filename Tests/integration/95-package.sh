#!/usr/bin/env bash
# 95-package: the Debian package (issue 19), on this machine.
#  - `make deb` builds keyshare_<version>_<arch>.deb, <version> being what `keyshare --version` says;
#    dpkg-deb --info (Depends = the packages of the libraries the binaries link) and the file list
#    (one man page per subcommand, completions, units, docs); lintian reports no error or warning;
#  - `make install DESTDIR PREFIX=/usr` installs the same files as the package, and
#    `make install`/`make uninstall` with the default PREFIX leave nothing behind;
#  - upgrade: a lower-versioned package (VERSION_OVERRIDE) is installed, an unprivileged user makes a
#    store with its CLI, the real package is installed over it and the same store is used: p11-kit,
#    p11tool and pkcs11-tool see the token with no configuration, pkcs11-tool signs with its key;
#    `man -w` finds the pages, bash completes `keyshare tok` to `token`;
#  - `dpkg -r keyshare` removes every file it installed and leaves the user's store as it was.
# The machine is left as it was found, also when a check fails halfway (trap: purge the package and
# whatever `apt-get -f install` pulled in). A keyshare already installed here (the package, or any
# file the package would install) is never touched: the install part refuses to run and fails.
set -u
KS=${1:?keyshare binary}; MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$HERE/../.." && pwd)
KS=$(cd "$(dirname "$KS")" && pwd)/$(basename "$KS")
MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")

WORK=$(mktemp -d /tmp/keyshare-pkg.XXXXXX)
INSTALLED=""            # set once dpkg -i may have changed the system
PULLED=""               # packages apt-get -f install added
cleanup() {
  # The installed CLI and module start the user's agent (the default mode): stop it by its PID
  # before the package and the work directory go.
  [ -z "${UH_RUN:-}" ] || stop_agent "$UH_RUN"
  if [ -n "$INSTALLED" ]; then
    if dpkg-query -W -f='${db:Status-Abbrev}' keyshare 2>/dev/null | grep -q '^.[^n]'; then
      echo "# cleanup: dpkg --purge keyshare"
      dpkg --purge keyshare >/dev/null 2>&1 || echo "# cleanup: dpkg --purge keyshare FAILED" >&2
    fi
    # shellcheck disable=SC2086
    [ -z "$PULLED" ] || { echo "# cleanup: purging what apt-get -f install added:$PULLED"; dpkg --purge $PULLED >/dev/null 2>&1; }
  fi
  # Firefox's policy file as it was found (the package's postinst merges into it).
  if [ -e "$WORK/ffpolicy.saved" ]; then cp -p "$WORK/ffpolicy.saved" "$FFPOLICY"
  elif [ -n "${FFPOLICY:-}" ] && [ -e "$FFPOLICY" ]; then rm -f "$FFPOLICY"; rmdir /etc/firefox/policies /etc/firefox 2>/dev/null; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

VERSION=$("$KS" --version | sed -n 1p)
ARCH=$(dpkg --print-architecture)
DEB=$WORK/keyshare_${VERSION}_${ARCH}.deb
P11DIR=$(pkg-config --variable=p11_module_path p11-kit-1)
P11CONF=$(pkg-config --variable=p11_module_configs p11-kit-1)
SYSMOD=$P11DIR/libkeyshare-pkcs11.so
SYSENG=$(dirname "$P11DIR")/keyshare/libkeyshare-engine.so
ENGINE=$(dirname "$MODULE")/libkeyshare-engine.so
FFPOLICY=/etc/firefox/policies/policies.json
[ ! -e "$FFPOLICY" ] || cp -p "$FFPOLICY" "$WORK/ffpolicy.saved"
# ffpolicy PYTHON-EXPR: the expression over d (Firefox's policies.json) holds.
ffpolicy() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$FFPOLICY" "$1" 2>/dev/null; }

# A keyshare already installed here (the package, or a file the package installs) is never touched.
existing_install() {  # existing_install PATH...: what of it is there already (empty: nothing)
  local state p found=""
  state=$(dpkg-query -W -f='${db:Status-Abbrev}' keyshare 2>/dev/null || true)
  case $state in ""|un*) ;; *) found="dpkg knows keyshare (status '$state')";; esac
  for p in "$@"; do { [ -e "$p" ] || [ -L "$p" ]; } && found="$found $p"; done
  echo "$found"
}
refuse() {
  bad "REFUSED: keyshare is already installed on this machine; the package test changed nothing and stopped" "$1"
  finish; exit 1
}
present=$(existing_install /usr/bin/keyshare "$SYSMOD" "$SYSENG" "$P11CONF/keyshare.module" /usr/share/doc/keyshare \
          /usr/share/man/man1/keyshare.1.gz /usr/lib/systemd/user/keyshare-password.service)
[ -z "$present" ] || refuse "$present"
[ "$(id -u)" -eq 0 ] || { bad "the package test installs packages: it needs root (make test runs as root)"; finish; exit 1; }

# ---- build -----------------------------------------------------------------------------------
mk() { make -C "$ROOT" --no-print-directory -o build -o deps KEYSHARE="$KS" MODULE="$MODULE" "$@"; }
t0=$(date +%s)
if out=$(nice -n 10 make -C "$ROOT" --no-print-directory -o build -o deps KEYSHARE="$KS" MODULE="$MODULE" \
           deb DEB_DIR="$WORK" 2>&1) && [ -f "$DEB" ]; then
  ok "make deb builds $(basename "$DEB") ($(du -h "$DEB" | cut -f1), $(( $(date +%s) - t0 )) s)"
else
  bad "make deb builds keyshare_${VERSION}_${ARCH}.deb (the version keyshare --version reports)" "$out"
  finish; exit 1
fi

# ---- dpkg-deb --info --------------------------------------------------------------------------
field() { dpkg-deb -f "$DEB" "$1"; }
check_out "dpkg-deb --info: package keyshare, version $VERSION, $ARCH" "^keyshare $VERSION $ARCH\$" \
  echo "$(field Package) $(field Version) $(field Architecture)"
check_out "dpkg-deb --info: Installed-Size, Maintainer, Description" '^[0-9]+ .+@.+ key store' \
  echo "$(field Installed-Size) $(field Maintainer) $(field Description | head -1)"
# Size budget (issue 28; docs/packaging.md, "Size"): 84350 KiB installed before, the CLI 69.8 MB with
# Foundation and ICU's data and a second copy of the engine in the module. The issue's goal is 25 MiB:
# one engine (libkeyshare-engine.so) shared by the launcher and the module. Neither image may carry
# Foundation's internationalization layer or ICU (their module names stay in the Swift metadata of
# a stripped binary).
SIZE_BUDGET_KIB=25600
size_kib=$(field Installed-Size)
per_file=$(dpkg-deb -c "$DEB" | awk '$3 > 100000 {n = $6; sub(".*/", "", n); printf "%s %.1f MB, ", n, $3 / 1e6}')
[ -n "$size_kib" ] && [ "$size_kib" -le "$SIZE_BUDGET_KIB" ] \
  && ok "size budget: Installed-Size $size_kib KiB <= $SIZE_BUDGET_KIB KiB (${per_file%, })" \
  || bad "size budget: Installed-Size ${size_kib:-?} KiB <= $SIZE_BUDGET_KIB KiB" "${per_file%, }"
dpkg-deb --fsys-tarfile "$DEB" 2>/dev/null | tar -xO --wildcards ./usr/bin/keyshare './usr/lib/*/pkcs11/libkeyshare-pkcs11.so' \
  './usr/lib/*/keyshare/libkeyshare-engine.so' 2>/dev/null | grep -qa -e FoundationInternationalization -e _FoundationICU \
  && bad "the launcher, the engine and the module link no FoundationInternationalization/ICU" "found in the packaged binaries" \
  || ok "the launcher, the engine and the module link no FoundationInternationalization/ICU"
# Depends must name exactly the packages that own the libraries the binaries link (NEEDED): the
# CLI, the module and, with the bundled OpenSSL (issue 18), its legacy provider (which links libssl3's
# libcrypto.so.3 for its low-level ciphers).
LEGACY=$(dirname "$MODULE")/keyshare-ossl-modules/legacy.so
ELVES=("$KS" "$MODULE" "$ENGINE"); [ -f "$LEGACY" ] && ELVES+=("$LEGACY")
needed_pkgs() {
  local so path c r
  for so in $(readelf -d "${ELVES[@]}" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u); do
    path=$(ldconfig -p | awk -v so="$so" '$1 == so && /x86-64/ {print $NF; exit}')
    r=""
    for c in "$path" "$(readlink -f "$path")" "${path#/usr}" "/usr$path"; do
      [ -n "$c" ] && r=$(dpkg -S "$c" 2>/dev/null | head -1) && [ -n "$r" ] && break
    done
    if [ -n "$r" ]; then echo "${r%%:*}"; else echo "unowned:$so"; fi
  done | sort -u
}
want=$(needed_pkgs | tr '\n' ' ')
have=$(field Depends | tr ',' '\n' | sed 's/^ *//; s/[ (].*//' | sort -u | tr '\n' ' ')
if [ -n "$want" ] && [ "$want" = "$have" ]; then ok "Depends = the packages of the linked libraries ($have)"
else bad "Depends = the packages of the linked libraries" "Depends: $(field Depends)
linked libraries' packages: $want"; fi
# Packed relative relocations (DT_RELR) need glibc 2.36's loader: Depends says so (build-deb.sh).
if objdump -p "${ELVES[@]}" 2>/dev/null | grep GLIBC_ABI_DT_RELR >/dev/null; then
  check_out "Depends: libc6 (>= 2.36) (the binaries use DT_RELR)" 'libc6 \(>= 2\.36\)' field Depends
fi
# libtss2: in Depends exactly when a binary links it (the TPM driver); the check above covers it,
# this line says which case this build is.
if readelf -d "$KS" "$MODULE" "$ENGINE" | grep -q 'NEEDED.*libtss2'; then
  check_out "Depends has libtss2 (a binary links it)" 'libtss2' field Depends
elif field Depends | grep -q libtss2; then bad "no libtss2 in Depends (nothing links it)" "$(field Depends)"
else ok "no libtss2 in Depends (neither binary links it)"; fi

# ---- the file list ----------------------------------------------------------------------------
dpkg-deb -c "$DEB" > "$WORK/contents"
awk '$1 ~ /^-/ {sub(/^\.\//, "/", $6); print $1, $2, $6}' "$WORK/contents" | sort -k3 > "$WORK/files"
awk '{print $3}' "$WORK/files" > "$WORK/paths"
has() { grep -qxF -- "$1" "$WORK/paths"; }
# One man page per command, as the argument parser knows them (every subcommand at every depth;
# not the hidden internal ones, nor the `help` pseudo-command: dist/man/generate.py).
"$KS" --experimental-dump-help | python3 -c '
import json, sys
def walk(c, path):
    yield "-".join(path)
    for s in c.get("subcommands", []) or []:
        if s.get("shouldDisplay", True) and path + [s["commandName"]] != ["keyshare", "help"]:
            yield from walk(s, path + [s["commandName"]])
for name in walk(json.load(sys.stdin)["command"], ["keyshare"]):
    print(f"/usr/share/man/man1/{name}.1.gz")' > "$WORK/want-man"
missing=""
for p in /usr/bin/keyshare "$SYSMOD" "$SYSENG" "$P11CONF/keyshare.module" /usr/share/man/man7/keyshare-pkcs11.7.gz \
         /usr/share/man/man7/keyshare-security.7.gz /usr/share/bash-completion/completions/keyshare /usr/share/zsh/vendor-completions/_keyshare \
         /usr/share/fish/vendor_completions.d/keyshare.fish /usr/share/doc/keyshare/copyright \
         /usr/share/doc/keyshare/changelog.gz /usr/share/doc/keyshare/README.md /usr/share/doc/keyshare/CHANGELOG.md \
         $([ -f "$LEGACY" ] && echo "$(dirname "$SYSENG")/keyshare-ossl-modules/legacy.so") \
         $(cat "$WORK/want-man"); do
  has "$p" || missing="$missing $p"
done
for u in "$ROOT"/dist/systemd/*.service "$ROOT"/dist/systemd/*.socket; do
  [ -e "$u" ] && { has "/usr/lib/systemd/user/$(basename "$u")" || missing="$missing (unit) $(basename "$u")"; }
done
mans=$(grep -c '^/usr/share/man/man1/' "$WORK/paths"); units=$(grep -c '^/usr/lib/systemd/user/' "$WORK/paths")
if [ -z "$missing" ]; then
  ok "the package holds the CLI, the engine, the module and its p11-kit file, $mans man(1) pages (one per command) + keyshare-pkcs11(7), 3 completions, $units user unit(s), docs ($(wc -l < "$WORK/paths") files)"
else bad "the package holds every file it must" "missing:$missing"; fi
extra=$(grep -vxF -f "$WORK/want-man" "$WORK/paths" | grep '^/usr/share/man/man1/' || true)
[ -z "$extra" ] && ok "no man(1) page for a command that does not exist" || bad "no man(1) page for a command that does not exist" "$extra"
outside=$(grep -v '^/usr/' "$WORK/paths" || true)
[ -z "$outside" ] && ok "every file is under /usr (no /etc conffile)" || bad "every file is under /usr" "$outside"
owners=$(awk '$2 != "root/root"' "$WORK/files")
[ -z "$owners" ] && ok "every file is root:root" || bad "every file is root:root" "$owners"
check_out "modes: the CLI 0755, the module and the engine 0644" '^-rwxr-xr-x -rw-r--r-- -rw-r--r--$' \
  echo "$(awk '$3 == "/usr/bin/keyshare" {print $1}' "$WORK/files") $(awk -v m="$SYSMOD" '$3 == m {print $1}' "$WORK/files") $(awk -v m="$SYSENG" '$3 == m {print $1}' "$WORK/files")"
mkdir -p "$WORK/x"; dpkg-deb -x "$DEB" "$WORK/x"
if ! readelf -S "$WORK/x/usr/bin/keyshare" "$WORK/x$SYSMOD" "$WORK/x$SYSENG" | grep -q '\.symtab'; then ok "the binaries are stripped (no .symtab)"
else bad "the binaries are stripped" "$(readelf -S "$WORK/x/usr/bin/keyshare" "$WORK/x$SYSMOD" "$WORK/x$SYSENG" | grep symtab)"; fi
# Full RELRO: BIND_NOW in all three (a GNU_RELRO segment alone leaves the GOT writable).
for b in "$WORK/x/usr/bin/keyshare" "$WORK/x$SYSMOD" "$WORK/x$SYSENG"; do
  check_out "$(basename "$b") is full RELRO (GNU_RELRO and BIND_NOW)" 'NOW' \
    bash -c 'readelf -l "$1" | grep -q GNU_RELRO && readelf -d "$1" | grep -E "\((BIND_NOW|FLAGS(_1)?)\)"' _ "$b"
done
left=$(grep -l '@bindir@\|@docdir@' "$WORK"/x/usr/lib/systemd/user/* 2>/dev/null || true)
check_out "user units: ExecStart=/usr/bin/keyshare, no placeholder left" '^/usr/bin/keyshare serve' bash -c \
  "[ -z '$left' ] && sed -n 's/^ExecStart=//p' '$WORK/x/usr/lib/systemd/user/keyshare-password.service'"
check_out "the module file names the module" '^module: libkeyshare-pkcs11.so$' cat "$WORK/x$P11CONF/keyshare.module"
check_out "changelog.gz: the $VERSION entry, from CHANGELOG.md" "^keyshare \\($VERSION\\) " zcat "$WORK/x/usr/share/doc/keyshare/changelog.gz"
# The copyright file (issue 28): DEP-5, keyshare under Apache-2.0, one paragraph per component
# linked in statically, each with its license; OpenSSL named with the bundled Debian version and
# said to be linked statically when this build is (the CLI needs no libcrypto).
copyright_checks "$WORK/x/usr/share/doc/keyshare/copyright" "$KS"

# ---- lintian ----------------------------------------------------------------------------------
UID_USER=$(getent passwd nobody | cut -d: -f3); GID_USER=$(getent passwd nobody | cut -d: -f4)
[ -n "$UID_USER" ] || { UID_USER=1000; GID_USER=1000; }
chmod 711 "$WORK"; chmod 644 "$DEB"
if command -v lintian >/dev/null; then
  mkdir -p "$WORK/lintian"; chown "$UID_USER:$GID_USER" "$WORK/lintian"
  # From a directory that user may enter: a checkout private to root (mktemp -d) is not one.
  lout=$(cd "$WORK/lintian" && HOME=$WORK/lintian TMPDIR=$WORK/lintian setpriv --reuid="$UID_USER" --regid="$GID_USER" --clear-groups \
         lintian --fail-on error,warning "$DEB" 2>&1); lrc=$?
  if [ "$lrc" -eq 0 ] && ! grep -q '^[EW]: ' <<<"$lout"; then ok "lintian: no error, no warning (info tags: docs/packaging.md)"
  else bad "lintian: no error, no warning" "$lout"; fi
else
  bad "lintian is installed (make deps)"
fi

# ---- make install / make uninstall ------------------------------------------------------------
if mk -s install DESTDIR="$WORK/destdir" PREFIX=/usr >"$WORK/install.log" 2>&1; then
  (cd "$WORK/destdir" && find . -type f -printf '%M root/root /%P\n' | sort -k3) > "$WORK/installed"
  diffs=$(diff <(awk '{print $1, $3}' "$WORK/installed") \
               <(awk '{print $1, $3}' "$WORK/files" | grep -v ' /usr/share/doc/keyshare/changelog.gz$\| /usr/share/lintian/overrides/keyshare$') || true)
  [ -z "$diffs" ] && ok "make install DESTDIR PREFIX=/usr: the package's $(wc -l < "$WORK/installed") files and modes (the package adds only changelog.gz)" \
                  || bad "make install DESTDIR PREFIX=/usr installs the package's files" "$diffs"
else
  bad "make install DESTDIR PREFIX=/usr runs" "$(tail -5 "$WORK/install.log")"
fi
L=$WORK/local
if mk -s install DESTDIR="$L" >"$WORK/install-local.log" 2>&1; then
  n=$(find "$L" -type f | wc -l)
  lmiss=""
  for p in /usr/local/bin/keyshare /usr/local/share/man/man1/keyshare.1.gz /usr/local/share/man/man7/keyshare-pkcs11.7.gz \
           /usr/local/share/bash-completion/completions/keyshare /usr/local/share/zsh/site-functions/_keyshare \
           /usr/local/share/fish/vendor_completions.d/keyshare.fish /usr/local/lib/systemd/user/keyshare-password.service \
           "$SYSMOD" "$SYSENG" "$P11CONF/keyshare.module"; do
    [ -f "$L$p" ] || lmiss="$lmiss $p"
  done
  if [ -z "$lmiss" ] && [ "$n" -eq "$(wc -l < "$WORK/installed")" ] && grep -q '^ExecStart=/usr/local/bin/keyshare ' "$L/usr/local/lib/systemd/user/keyshare-password.service"; then
    ok "make install DESTDIR (PREFIX=/usr/local): the same $n files, under /usr/local (zsh: site-functions)"
  else bad "make install DESTDIR (PREFIX=/usr/local)" "missing:$lmiss; $n files"; fi
  mk -s uninstall DESTDIR="$L" >/dev/null 2>&1
  rest=$(find "$L" -type f)
  [ -z "$rest" ] && ok "make uninstall DESTDIR removes all $n files" || bad "make uninstall DESTDIR removes every file" "$rest"
else
  bad "make install DESTDIR runs" "$(tail -5 "$WORK/install-local.log")"
fi

# ---- the lower version, for the upgrade --------------------------------------------------------
OLD_VERSION="${VERSION}~pkgtest1"
OLD_DEB=$WORK/keyshare_${OLD_VERSION}_${ARCH}.deb
if out=$(nice -n 10 make -C "$ROOT" --no-print-directory -o build -o deps -o man -o completions KEYSHARE="$KS" MODULE="$MODULE" \
           deb DEB_DIR="$WORK" VERSION_OVERRIDE="$OLD_VERSION" DEB_COMPRESS=gzip 2>&1) && [ -f "$OLD_DEB" ] &&
   dpkg --compare-versions "$OLD_VERSION" lt "$VERSION"; then
  ok "make deb VERSION_OVERRIDE=$OLD_VERSION builds a package older than $VERSION"
else
  bad "make deb VERSION_OVERRIDE builds an older package" "$out"; finish; exit 1
fi

# ---- refuse to touch an existing install (again, now with every path of the package) ------------
# Only one package test at a time on this machine (the lead's make test and a helper's may overlap).
exec 9>/run/lock/keyshare-95-package.lock
flock -w 900 9 || { bad "the package test lock (/run/lock/keyshare-95-package.lock)"; finish; exit 1; }

mapfile -t all_paths < "$WORK/paths"
present=$(existing_install "${all_paths[@]}")
[ -z "$present" ] || refuse "$present"
ok "no keyshare installed before the test (dpkg and every path of the package)"

# Directories the package would create: they must be gone again after dpkg -r.
awk '$1 ~ /^d/ {sub(/^\.\//, "/", $6); sub(/\/$/, "", $6); print $6}' "$WORK/contents" | grep -v '^$' |
  while read -r d; do [ -d "$d" ] || echo "$d"; done > "$WORK/newdirs"

dpkg_install() {  # dpkg_install DEB: dpkg -i, then apt-get -f install only if dependencies were missing
  local before
  before=$(dpkg-query -W -f='${Package}\n' | sort)
  INSTALLED=1
  if ! dpkg -i "$1" >"$WORK/dpkg.log" 2>&1; then
    grep -q 'dependency problems' "$WORK/dpkg.log" || { cat "$WORK/dpkg.log"; return 1; }
    DEBIAN_FRONTEND=noninteractive apt-get -f install -y -qq >>"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log"; return 1; }
    PULLED="$PULLED $(comm -13 <(echo "$before") <(dpkg-query -W -f='${Package}\n' | sort) | grep -vx keyshare | tr '\n' ' ')"
  fi
}
status() { dpkg-query -W -f='${db:Status-Abbrev} ${Version}' keyshare 2>/dev/null || true; }

# The unprivileged user: a fresh home, a clean environment, no keyshare or p11-kit configuration.
UH=$WORK/home; mkdir -p "$UH"; chown "$UID_USER:$GID_USER" "$UH"
# Its runtime directory (as pam_systemd would give it): the agent the installed binaries start
# listens there, and cleanup stops it by the PID file there (before this, it outlived the test).
UH_RUN=$WORK/run-user; mkdir -p "$UH_RUN"; chmod 0700 "$UH_RUN"; chown "$UID_USER:$GID_USER" "$UH_RUN"
export PIN="pkg-$RANDOM$RANDOM" SOPIN="so-$RANDOM$RANDOM"
asuser() (
  path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin pin=$PIN sopin=$SOPIN
  for v in $(compgen -e); do unset "$v" 2>/dev/null; done
  export PATH=$path HOME=$UH PIN=$pin SOPIN=$sopin GNUTLS_PIN=$pin LANG=C.UTF-8 XDG_RUNTIME_DIR=$UH_RUN
  cd "$UH" && exec setpriv --reuid="$UID_USER" --regid="$GID_USER" --clear-groups "$@"
)

if dpkg_install "$OLD_DEB"; then ok "dpkg -i the $OLD_VERSION package${PULLED:+ (apt-get -f install added:$PULLED)}"
else bad "dpkg -i the $OLD_VERSION package"; finish; exit 1; fi
check_out "dpkg: keyshare $OLD_VERSION installed" "^ii +$OLD_VERSION\$" status
check "the installed CLI (as the user) makes a token in the default store" \
  asuser /usr/bin/keyshare token create --label pkgtest --pin-source env:PIN --so-pin-source env:SOPIN
check "... and an EC key pair in it" \
  asuser /usr/bin/keyshare key generate --type ec --curve P-256 --label pkgkey --tag pkgkey --pin-source env:PIN
STORE=$UH/.local/share/keyshare
check "the store is where the user's default says (~/.local/share/keyshare/keychain.db)" test -s "$STORE/keychain.db"

# ---- the upgrade ------------------------------------------------------------------------------
if dpkg_install "$DEB"; then ok "dpkg -i the $VERSION package over $OLD_VERSION"
else bad "dpkg -i the $VERSION package over $OLD_VERSION"; finish; exit 1; fi
check_out "dpkg: keyshare $VERSION installed" "^ii +$VERSION\$" status
check_out "keyshare --version: $VERSION" "^$VERSION\$" asuser /usr/bin/keyshare --version
ffpolicy "d['policies']['SecurityDevices']['Add']['keyshare'] == '$SYSMOD'" \
  && ok "postinst: Firefox's policy registers the module (SecurityDevices.Add.keyshare = $SYSMOD)" \
  || bad "postinst registers the module in Firefox's policy" "$(cat "$FFPOLICY" 2>&1)"
check_out "the upgraded CLI uses the store made before the upgrade" 'pkgtest' asuser /usr/bin/keyshare token list
# Schema: the old store, opened by the new version, is at the version a store made now has.
# Read as the user: a root connection could leave root-owned -wal/-shm files in the user's store.
schema() { asuser python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("PRAGMA user_version").fetchone()[0])' "$1"; }
mkdir -p "$WORK/fresh"; chown "$UID_USER:$GID_USER" "$WORK/fresh"
asuser env KEYSHARE_HOME="$WORK/fresh" /usr/bin/keyshare token list >/dev/null 2>&1
check_out "the store's schema is the new version's (user_version $(schema "$WORK/fresh/keychain.db" 2>/dev/null))" \
  "^$(schema "$WORK/fresh/keychain.db" 2>/dev/null)\$" schema "$STORE/keychain.db"

# ---- keyshare doctor on a fresh home (issue 28) -------------------------------------------------
# The user, a store not made yet: the installed module registered with p11-kit by the package, no
# problem (exit 0), nothing created. What it prints is shown (the closing note quotes it).
mkdir -p "$WORK/doctor"; chown "$UID_USER:$GID_USER" "$WORK/doctor"
dout=$(asuser env KEYSHARE_HOME="$WORK/doctor/ks" /usr/bin/keyshare doctor 2>&1); drc=$?
printf '%s\n' "$dout" | sed 's/^/       | /'
if [ "$drc" = 0 ] && grep -q '^no problems found$' <<<"$dout" && [ ! -e "$WORK/doctor/ks" ] \
   && grep -qE "^  store +ok +$WORK/doctor/ks: not created yet" <<<"$dout" \
   && grep -qE '^  p11-kit +ok +registered: /usr/share/p11-kit/modules/keyshare\.module loads /usr/lib/[^ ]*/pkcs11/libkeyshare-pkcs11\.so$' <<<"$dout"; then
  ok "keyshare doctor (installed, fresh home): no problem, exit 0, p11-kit registration by the package, nothing created"
else bad "keyshare doctor (installed, fresh home): no problem, exit 0" "rc=$drc"; fi
if asuser env KEYSHARE_HOME="$WORK/doctor/ks" /usr/bin/keyshare doctor --json | python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["problems"] == [] and len(r["checks"]) == 7'; then
  ok "keyshare doctor --json (installed): 7 checks, no problem"
else bad "keyshare doctor --json (installed)"; fi

# ---- no configuration: p11-kit, GnuTLS, OpenSC -------------------------------------------------
# p11-kit 0.24 prints "keyshare: libkeyshare-pkcs11.so" (the module file's name), then the module's
# C_GetInfo (library-version: major.minor) and its tokens, indented, until the next module.
asuser p11-kit list-modules 2>/dev/null | awk '/^[^ ]/ {on = /^keyshare: /} on' > "$WORK/p11kit"
check_out "p11-kit list-modules (the user, no configuration) shows the keyshare module and its token" \
  '^ +token: pkgtest$' cat "$WORK/p11kit"
check_out "p11-kit: the module's library-version is $VERSION's major.minor (C_GetInfo)" \
  "^ +library-version: ${VERSION%.*}\$" cat "$WORK/p11kit"
check_out "p11tool --list-tokens sees the token" 'Label: pkgtest' asuser p11tool --list-tokens
check_out "pkcs11-tool --module $SYSMOD -L sees the token" 'token label +: pkgtest' \
  asuser pkcs11-tool --module "$SYSMOD" -L
printf 'signed after the upgrade\n' > "$WORK/data"; chmod 644 "$WORK/data"
check_out "pkcs11-tool signs with the key made before the upgrade (ECDSA P-256)" '^64$' asuser bash -c \
  "pkcs11-tool --module '$SYSMOD' --token-label pkgtest --login --pin env:PIN --sign --mechanism ECDSA \
     --label pkgkey -i '$WORK/data' -o '$UH/sig' >/dev/null 2>&1 && stat -c %s '$UH/sig'"

# ---- backup and restore with the installed CLI (issue 28) ----------------------------------------
# The upgraded store backed up, restored into a fresh home (a second store: its own agent), and the
# key made before the upgrade signs there.
export BACKUP_PASS="bk-$RANDOM$RANDOM-pass"
bk_as() { asuser env BACKUP_PASS="$BACKUP_PASS" "$@"; }
check_out "keyshare backup (installed) of the upgraded store" "backed up 1 token" \
  bk_as /usr/bin/keyshare backup --out "$UH/store.ksb" --passphrase-source env:BACKUP_PASS
check_out "... the archive is the user's, mode 0600" "^600 $UID_USER\$" stat -c '%a %u' "$UH/store.ksb"
mkdir -p "$WORK/restored"; chown "$UID_USER:$GID_USER" "$WORK/restored"
check_out "keyshare restore (installed) into a fresh home" "restored" \
  bk_as env KEYSHARE_HOME="$WORK/restored/ks" /usr/bin/keyshare restore "$UH/store.ksb" --passphrase-source env:BACKUP_PASS
check_out "the restored key signs through the installed module" '^64$' asuser env KEYSHARE_HOME="$WORK/restored/ks" bash -c \
  "pkcs11-tool --module '$SYSMOD' --token-label pkgtest --login --pin env:PIN --sign --mechanism ECDSA \
     --label pkgkey -i '$WORK/data' -o '$UH/sig2' >/dev/null 2>&1 && stat -c %s '$UH/sig2'"
asuser env KEYSHARE_HOME="$WORK/restored/ks" /usr/bin/keyshare agent stop >/dev/null 2>&1

# The agent of the user's store (one per store: `keyshare agent socket --dir` says where).
UH_AGENT=$(cat "$(asuser keyshare agent socket --dir)/agent.pid" 2>/dev/null)
check "the user's agent (started by the installed module) runs from its runtime directory" \
  bash -c '[ -n "$1" ] && grep -q "keyshare" "/proc/$1/cmdline"' _ "$UH_AGENT"

# ---- man pages, completion, units --------------------------------------------------------------
excl=$(grep -hs '^path-exclude.*/usr/share/man' /etc/dpkg/dpkg.cfg.d/* || true)
if [ -z "$excl" ]; then
  check_out "man -w keyshare" '^/usr/share/man/man1/keyshare\.1\.gz$' asuser man -w keyshare
  check_out "man -w keyshare-token-create" 'man1/keyshare-token-create\.1\.gz$' asuser man -w keyshare-token-create
  check_out "man -w 7 keyshare-pkcs11" 'man7/keyshare-pkcs11\.7\.gz$' asuser man -w 7 keyshare-pkcs11
  check_out "man -w 7 keyshare-security" 'man7/keyshare-security\.7\.gz$' asuser man -w 7 keyshare-security
else
  # This system does not install /usr/share/man (dpkg path-exclude): look in the package itself.
  check_out "man -w keyshare (dpkg excludes /usr/share/man here: MANPATH = the extracted package)" \
    'man1/keyshare\.1\.gz$' env MANPATH="$WORK/x/usr/share/man" man -w keyshare
  check_out "man -w 7 keyshare-pkcs11 (MANPATH = the extracted package)" 'keyshare-pkcs11\.7\.gz$' \
    env MANPATH="$WORK/x/usr/share/man" man -w 7 keyshare-pkcs11
fi
check_out "bash completion (bash-completion loads it on demand) completes 'keyshare tok' to 'token'" '^\[token\]$' \
  asuser bash -c 'source /usr/share/bash-completion/bash_completion
    _completion_loader keyshare; complete -p keyshare | grep -q -- "-F _keyshare " || exit 1
    COMP_WORDS=(keyshare tok); COMP_CWORD=1; COMP_LINE="keyshare tok"; COMP_POINT=${#COMP_LINE}
    _keyshare keyshare tok keyshare; printf "[%s]\n" "${COMPREPLY[@]}"'
if command -v zsh >/dev/null; then check "zsh parses _keyshare" zsh -n /usr/share/zsh/vendor-completions/_keyshare; fi
if command -v fish >/dev/null; then check "fish parses keyshare.fish" fish -n /usr/share/fish/vendor_completions.d/keyshare.fish; fi
if command -v systemd-analyze >/dev/null; then
  mkdir -p "$WORK/run"; chmod 700 "$WORK/run"
  for u in "$WORK"/x/usr/lib/systemd/user/*; do
    check "systemd-analyze --user verify $(basename "$u")" \
      env XDG_RUNTIME_DIR="$WORK/run" systemd-analyze --user verify "/usr/lib/systemd/user/$(basename "$u")"
  done
fi

# ---- dpkg -r ----------------------------------------------------------------------------------
snapshot() { (cd "$STORE" && find . -printf '%P %M %s\n' | sort && find . -type f -exec sha256sum {} + | sort); }
snapshot > "$WORK/store.before"
if dpkg -r keyshare >"$WORK/dpkg-r.log" 2>&1; then ok "dpkg -r keyshare"; else bad "dpkg -r keyshare" "$(cat "$WORK/dpkg-r.log")"; fi
check_out "dpkg: keyshare no longer installed" '^$|^[ru][nc]' status
# The prerm retires running agents: the user's (no client left) exits instead of running on a deleted binary.
for _ in $(seq 50); do kill -0 "$UH_AGENT" 2>/dev/null || break; sleep 0.1; done
[ -n "$UH_AGENT" ] && ! kill -0 "$UH_AGENT" 2>/dev/null && ok "dpkg -r: the user's running agent (pid $UH_AGENT) retired and exited" \
  || bad "dpkg -r stops the user's running agent" "pid $UH_AGENT: $(tr '\0' ' ' <"/proc/$UH_AGENT/cmdline" 2>/dev/null)"
left=""
while read -r p; do { [ -e "$p" ] || [ -L "$p" ]; } && left="$left $p"; done < "$WORK/paths"
[ -z "$left" ] && ok "every file the package installed is gone ($(wc -l < "$WORK/paths"))" || bad "every file the package installed is gone" "$left"
dirs=""
while read -r d; do [ -d "$d" ] && dirs="$dirs $d"; done < "$WORK/newdirs"
[ -z "$dirs" ] && ok "every directory the package created is gone ($(wc -l < "$WORK/newdirs"))" || bad "every directory the package created is gone" "$dirs"
snapshot > "$WORK/store.after"
if [ -s "$WORK/store.before" ] && cmp -s "$WORK/store.before" "$WORK/store.after"; then
  ok "the user's store is untouched by dpkg -r ($(grep -c ' ' "$WORK/store.before") entries: names, modes, sizes, SHA-256)"
else bad "the user's store is untouched by dpkg -r" "$(diff "$WORK/store.before" "$WORK/store.after")"; fi
out=$(asuser p11-kit list-modules 2>/dev/null)
if [ -n "$out" ] && ! grep -q '^keyshare: ' <<<"$out"; then ok "p11-kit list-modules no longer shows keyshare"
else bad "p11-kit list-modules no longer shows keyshare" "$out"; fi
ffpolicy "'keyshare' not in d['policies']['SecurityDevices'].get('Add', {}) and 'keyshare' in d['policies']['SecurityDevices']['Delete']" \
  && ok "dpkg -r: Firefox's policy now deletes the module from profiles (SecurityDevices.Delete)" \
  || bad "prerm moves keyshare to SecurityDevices.Delete" "$(cat "$FFPOLICY" 2>&1)"
dpkg --purge keyshare >/dev/null 2>&1
if [ -e "$WORK/ffpolicy.saved" ]; then ok "dpkg --purge: the policy file that was there before stays"
elif [ ! -e "$FFPOLICY" ]; then ok "dpkg --purge: the policy file postinst made is gone"
else bad "dpkg --purge removes the policy file postinst made" "$(cat "$FFPOLICY")"; fi
check_out "dpkg --purge leaves no record of keyshare" '^$|^un' status
INSTALLED=""
[ -z "$PULLED" ] || { dpkg --purge $PULLED >/dev/null 2>&1; PULLED=""; }
finish
