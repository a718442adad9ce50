#!/usr/bin/env bash
# run-thirdparty.sh KEYSHARE MODULE: public third-party PKCS #11 test suites
# against keyshare's module and SoftHSM2, side by side, one fresh token per
# suite and module. Not part of `make test`: the suites are not in this
# repository (their code is not ours to ship); point the variables below at
# copies you fetched. docs/pkcs11-conformance.md, "Third-party suites", says
# which versions, how to run this and what the figures were.
#
#   PYKCS11_TESTS        PyKCS11's test/ directory, at the tag of the
#                        installed python3-pykcs11 (Debian 12: 1.5.12; the
#                        PyPI sdist PyKCS11-1.5.12.tar.gz has the same); run
#                        with /usr/bin/python3 (Debian's PyKCS11)
#   PYTHON_PKCS11_TESTS  python-pkcs11's tests/ directory (its PyPI sdist), at the tag of the
#   PYTHON_PKCS11_PYTHON installed wheel (0.9.4), and the python that has
#                        python-pkcs11, cryptography, parameterized and pytest
#   PKCS11TEST           Google's pkcs11test binary (github.com/google/pkcs11test, built with
#                        its makefile; the commit is the caller's to record)
#   P11TEST              OpenSC's src/tests/p11test binary (0.23.0 sources); unset,
#                        the one built in THIRDPARTY_CACHE, built there first when
#                        OPENSC_GIT names a git directory of OpenSC (tag 0.23.0,
#                        Debian 12's opensc; needs libcmocka-dev and autotools)
#   CRYPTO11_TEST        a test binary of crypto11 (ThalesIgnite, Go); unset, built
#                        in THIRDPARTY_CACHE from Debian 12's
#                        golang-github-thalesignite-crypto11-dev 1.2.5 (GOPATH mode,
#                        offline: its dependencies are Debian's packages too)
#   THIRDPARTY_CACHE     where those two are built, never in the repository
#                        (default ${XDG_CACHE_HOME:-~/.cache}/keyshare-thirdparty)
#   P11TEST_VERBOSE      set: p11test -v (its verbose log)
#   SOFTHSM2_MODULE      default /usr/lib/softhsm/libsofthsm2.so
#   SUITES               default: every suite whose inputs are present
#   OUT                  where logs go (default: a new /tmp directory, kept)
#
# A suite whose input is missing is reported as "not run". pkcs11-tool
# (OpenSC, installed by make deps) is always there.
#
# PINs: PyKCS11's suite has its PINs in its source ("1234", SO "123456") and
# p11test and pkcs11test take their PINs only as options on their command line, so the tokens
# here are throwaway fixtures whose PINs are the suites' published values,
# not secrets: each lives in a private directory removed at exit. Every other
# program gets them from the environment (pkcs11-tool env:, keyshare
# --pin-source env:, python-pkcs11's PKCS11_TOKEN_PIN).
set -uo pipefail

KEYSHARE=$(realpath "${1:?usage: run-thirdparty.sh KEYSHARE MODULE}")
MODULE=$(realpath "${2:?usage: run-thirdparty.sh KEYSHARE MODULE}")
SHMOD=${SOFTHSM2_MODULE:-/usr/lib/softhsm/libsofthsm2.so}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../integration/lib.sh
source "$HERE/../integration/lib.sh"   # softhsm_init_token

OUT=${OUT:-$(mktemp -d /tmp/keyshare-thirdparty.XXXXXX)}
mkdir -p "$OUT"
RUN=$(mktemp -d /tmp/keyshare-thirdparty-run.XXXXXX)
chmod 700 "$RUN"
trap 'rm -rf "$RUN"' EXIT
export KEYSHARE_KDF_LOG2N=10
# The suites' own fixture PINs (see above).
export PIN=1234 SOPIN=123456

# The two suites this script can build itself, into the cache (their code is
# never in the repository). Each build's log is kept beside it.
CACHE=${THIRDPARTY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keyshare-thirdparty}
build_p11test() {
  local src=$CACHE/opensc-0.23.0 bin=$CACHE/opensc-0.23.0/src/tests/p11test/p11test
  if [ ! -x "$bin" ] && [ -n "${OPENSC_GIT:-}" ]; then
    rm -rf "$src"; mkdir -p "$src"
    git --git-dir "$OPENSC_GIT" archive 0.23.0 | tar -x -C "$src" &&
      # One reader driver must be chosen; p11test uses none (it loads the module it tests).
      (cd "$src" && ./bootstrap && ./configure --disable-pcsc --enable-ctapi --disable-readline --disable-zlib \
         --disable-doc --disable-man --disable-notify --disable-sm --enable-cmocka --enable-openssl &&
       make -C src/tests/p11test) >"$CACHE/p11test-build.log" 2>&1 ||
      echo "p11test: build failed, see $CACHE/p11test-build.log" >&2
  fi
  [ -x "$bin" ] && P11TEST=$bin
}
build_crypto11() {
  local bin=$CACHE/crypto11.test
  if [ ! -x "$bin" ] && [ -d /usr/share/gocode/src/github.com/ThalesIgnite/crypto11 ] && command -v go >/dev/null; then
    (cd "$CACHE" && GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$CACHE/gocache GOFLAGS= GOPROXY=off \
       go test -c -o "$bin" github.com/ThalesIgnite/crypto11) >"$CACHE/crypto11-build.log" 2>&1 ||
      echo "crypto11: build failed, see $CACHE/crypto11-build.log" >&2
  fi
  [ -x "$bin" ] && CRYPTO11_TEST=$bin
}
mkdir -p "$CACHE"
[ -n "${P11TEST:-}" ] || build_p11test
[ -n "${CRYPTO11_TEST:-}" ] || build_crypto11

# fresh_token WHO SUITE LABEL: a new store (keyshare) or token directory
# (SoftHSM2) holding one initialised token; sets MOD to the module to load.
fresh_token() {
  local who=$1 suite=$2 label=$3 dir="$RUN/$1-$2"
  rm -rf "$dir"; mkdir -p "$dir"
  if [ "$who" = keyshare ]; then
    MOD=$MODULE
    export KEYSHARE_HOME=$dir
    "$KEYSHARE" token create --label "$label" --pin-source env:PIN --so-pin-source env:SOPIN --short-pin >/dev/null 2>&1
  else
    MOD=$SHMOD
    mkdir -p "$dir/tokens"
    printf 'directories.tokendir = %s/tokens\nobjectstore.backend = file\nlog.level = ERROR\n' "$dir" >"$dir/softhsm2.conf"
    export SOFTHSM2_CONF=$dir/softhsm2.conf
    softhsm_init_token "$SHMOD" "$label" SOPIN PIN
  fi
}

# keys LABEL: p11test's runtest.sh set of keys (RSA 1024/2048, EC P-256/P-521
# with self-signed certificates, Ed25519, AES-128/256) on the token.
keys() {
  local label=$1 t
  local p11=(pkcs11-tool --module "$MOD" --token-label "$label" --login --pin env:PIN)
  printf 'organization = "keyshare test"\nexpiration_days = 30\nemail = "none@example.org"\nsigning_key\nencryption_key\n' >"$RUN/cert.cfg"
  for t in "RSA:1024 01 RSA_auth 1" "RSA:2048 02 RSA2048 1" "EC:secp256r1 03 ECC_auth 1" \
           "EC:secp521r1 04 ECC521 1" "EC:edwards25519 05 EDDSA 0"; do
    set -- $t
    "${p11[@]}" --keypairgen --key-type "$1" --id "$2" --label "$3" >/dev/null 2>&1 || echo "key $3 ($1) not generated" >&2
    if [ "$4" = 1 ]; then
      GNUTLS_PIN=$PIN certtool --generate-self-signed --outfile "$RUN/c.pem" --template "$RUN/cert.cfg" \
        --provider "$MOD" --load-privkey "pkcs11:object=$3;type=private" \
        --load-pubkey "pkcs11:object=$3;type=public" >/dev/null 2>&1 &&
        openssl x509 -in "$RUN/c.pem" -outform DER -out "$RUN/c.der" &&
        "${p11[@]}" --write-object "$RUN/c.der" --type cert --id "$2" --label "$3" >/dev/null 2>&1 ||
        echo "certificate $3 not written" >&2
    fi
  done
  # --private: pkcs11-tool sends CKA_PRIVATE=false for secret keys otherwise
  # (keyshare refuses that; docs/pkcs11-conformance.md, CKA_PRIVATE).
  "${p11[@]}" --keygen --key-type aes:16 --id 07 --label "AES128 key" --extractable --private >/dev/null 2>&1 || echo "AES-128 key not generated" >&2
  "${p11[@]}" --keygen --key-type aes:32 --id 08 --label "AES256 key" --extractable --private >/dev/null 2>&1 || echo "AES-256 key not generated" >&2
}

# Each run_* prints "PASSED FAILED SKIPPED" for one module, logs in $OUT.
run_pkcs11_tool() {
  local who=$1 log="$OUT/pkcs11-tool-$1.log" p=0 f=0 c errs
  fresh_token "$who" pkcs11-tool "p11tool test"
  keys "p11tool test" 2>>"$log"
  local p11=(pkcs11-tool --module "$MOD" --token-label "p11tool test" --login --pin env:PIN)
  # --allow-sw: without it pkcs11-tool skips mechanisms without CKF_HW, i.e. every one of a soft token.
  "${p11[@]}" --test --allow-sw >"$log.test" 2>&1
  c=$(grep -cE ': OK$|seems? to (be OK|work)|^OK$' "$log.test"); p=$((p + c))
  errs=$(sed -nE 's/^([0-9]+) errors$/\1/p' "$log.test" | tail -1)
  if [ -n "$errs" ]; then f=$((f + errs)); elif ! grep -q '^No errors$' "$log.test"; then f=$((f + 1)); fi
  for curve in secp256r1 secp384r1 secp521r1; do
    if "${p11[@]}" --session-rw --test-ec --key-type "EC:$curve" --id 0a >"$log.ec-$curve" 2>&1 &&
       grep -q '==> OK' "$log.ec-$curve"; then p=$((p + 1)); else f=$((f + 1)); fi
  done
  if pkcs11-tool --module "$MOD" --test-fork >"$log.fork" 2>&1; then p=$((p + 1)); else f=$((f + 1)); fi
  cat "$log.test" "$log".ec-* "$log.fork" >>"$log"; rm -f "$log.test" "$log".ec-* "$log.fork"
  echo "$p $f 0"
}

# unittest_counts LOG: "PASSED FAILED SKIPPED" from a unittest -v log.
unittest_counts() {
  local ran fl er sk
  ran=$(sed -nE 's/^Ran ([0-9]+) tests?.*/\1/p' "$1" | tail -1)
  fl=$(grep -oE 'failures=[0-9]+' "$1" | tail -1 | cut -d= -f2)
  er=$(grep -oE 'errors=[0-9]+' "$1" | tail -1 | cut -d= -f2)
  sk=$(grep -oE 'skipped=[0-9]+' "$1" | tail -1 | cut -d= -f2)
  ran=${ran:-0} fl=${fl:-0} er=${er:-0} sk=${sk:-0}
  [ "$ran" -gt 0 ] || { echo "0 1 0"; return; }
  echo "$((ran - fl - er - sk)) $((fl + er)) $sk"
}

# PyKCS11's suite as shipped, or ($2 = ungated) with its SoftHSM version
# gate lifted: it skips most key tests unless C_GetInfo's libraryVersion
# major is 2 or more (SoftHSM2's), which says nothing of what a module does.
run_pykcs11() {
  local who=$1 mode=${2:-} dir="$RUN/pykcs11-$1" log="$OUT/pykcs11${2:+-$2}-$1.log"
  fresh_token "$who" "pykcs11$mode" "A token"
  rm -rf "$dir"; mkdir -p "$dir"; cp -r "$PYKCS11_TESTS" "$dir/test"
  # The PyPI sdist's test/ has no __init__.py (the git tag's has): unittest discovery needs one.
  [ -f "$dir/test/__init__.py" ] || : >"$dir/test/__init__.py"
  if [ "$mode" = ungated ]; then
    sed -i -E 's/self\.SoftHSMversion < (2|\(2, ?0\))/False/' "$dir"/test/*.py
  fi
  # From a directory without PyKCS11's sources, so Debian's package is the one imported.
  (cd "$dir" && PYKCS11LIB=$MOD timeout 900 /usr/bin/python3 -m unittest discover -s test -t . -v) >"$log" 2>&1
  unittest_counts "$log"
}

# python-pkcs11's suite as shipped, or ($2 = ungated) with its SoftHSM gate
# lifted: it runs nine tests (@Only.softhsm2) only when the module's file is
# named libsofthsm2.so, so the module is loaded through a link of that name.
run_python_pkcs11() {
  local who=$1 mode=${2:-} log="$OUT/python-pkcs11${2:+-$2}-$1.log" dir="$RUN/python-pkcs11-$1" line pa fa er sk
  fresh_token "$who" "python-pkcs11$mode" "python-pkcs11"
  rm -rf "$dir"; mkdir -p "$dir"; cp -r "$PYTHON_PKCS11_TESTS" "$dir/tests"
  if [ "$mode" = ungated ]; then ln -s "$MOD" "$dir/libsofthsm2.so"; MOD=$dir/libsofthsm2.so; fi
  (cd "$dir" && PKCS11_MODULE=$MOD PKCS11_TOKEN_LABEL=python-pkcs11 PKCS11_TOKEN_PIN=$PIN PKCS11_TOKEN_SO_PIN=$SOPIN \
     timeout 900 "$PYTHON_PKCS11_PYTHON" -m pytest -p no:cacheprovider -rfEs -q tests) >"$log" 2>&1
  line=$(tail -1 "$log")
  pa=$(grep -oE '[0-9]+ passed' <<<"$line" | cut -d' ' -f1)
  fa=$(grep -oE '[0-9]+ failed' <<<"$line" | cut -d' ' -f1)
  er=$(grep -oE '[0-9]+ errors?' <<<"$line" | cut -d' ' -f1)
  sk=$(grep -oE '[0-9]+ skipped' <<<"$line" | cut -d' ' -f1)
  echo "${pa:-0} $(( ${fa:-0} + ${er:-0} )) ${sk:-0}"
}

# Google's pkcs11test (gtest), as its README runs it: -m library, -l its directory, -s the slot,
# -u / -o the PINs (its command line is the only way it takes them). Counts from gtest's summary.
run_pkcs11test() {
  local who=$1 log="$OUT/pkcs11test-$1.log" slot pa fa sk
  fresh_token "$who" pkcs11test "pkcs11test"
  slot=$(pkcs11-tool --module "$MOD" -L 2>/dev/null |
    sed -nE '/^Slot [0-9]+ \((0x[0-9a-f]+)\).*/{s//\1/;h}; /token label *: pkcs11test$/{g;p;q}')
  (cd "$RUN" && timeout 1200 "$PKCS11TEST" -m "$(basename "$MOD")" -l "$(dirname "$MOD")" -s "$((slot))" \
     -u "$PIN" -o "$SOPIN" --gtest_color=no) >"$log" 2>&1
  pa=$(sed -nE 's/^\[  PASSED  \] ([0-9]+) test.*/\1/p' "$log" | tail -1)
  fa=$(sed -nE 's/^\[  FAILED  \] ([0-9]+) test.*/\1/p' "$log" | tail -1)
  sk=$(sed -nE 's/^\[  SKIPPED \] ([0-9]+) test.*/\1/p' "$log" | tail -1)
  echo "${pa:-0} ${fa:-0} ${sk:-0}"
}

run_p11test() {
  local who=$1 log="$OUT/p11test-$1.log" slot pa fa sk
  fresh_token "$who" p11test "p11test"
  keys "p11test" 2>>"$log"
  slot=$(pkcs11-tool --module "$MOD" -L 2>/dev/null |
    sed -nE '/^Slot [0-9]+ \((0x[0-9a-f]+)\).*/{s//\1/;h}; /token label *: p11test$/{g;p;q}')
  (cd "$RUN" && timeout 900 "$P11TEST" ${P11TEST_VERBOSE:+-v} -m "$MOD" -s "$((slot))" -o "$OUT/p11test-$who.json" -p "$PIN") >>"$log" 2>&1
  pa=$(sed -nE 's/^\[  PASSED  \] ([0-9]+) test.*/\1/p' "$log" | tail -1)
  fa=$(sed -nE 's/^\[  FAILED  \] ([0-9]+) test.*/\1/p' "$log" | tail -1)
  sk=$(sed -nE 's/^\[  SKIPPED \] ([0-9]+) test.*/\1/p' "$log" | tail -1)
  echo "${pa:-0} ${fa:-0} ${sk:-0}"
}

# crypto11's Go tests, one top-level test a process: a test that panics (its
# block cipher panics when the module lacks a mechanism) fails alone instead
# of ending the run. It reads the module, token label and PIN from ./config.
run_crypto11() {
  local who=$1 log="$OUT/crypto11-$1.log" dir="$RUN/crypto11-$1" t out p=0 f=0 sk=0
  fresh_token "$who" crypto11 "crypto11"
  mkdir -p "$dir/work"
  /usr/bin/python3 -c 'import json, os, sys; json.dump({"Path": sys.argv[1], "TokenLabel": "crypto11", "Pin": os.environ["PIN"]}, open(sys.argv[2], "w"))' \
    "$MOD" "$dir/work/config"
  : >"$log"
  for t in $("$CRYPTO11_TEST" -test.list '.*' | grep '^Test'); do
    out=$(cd "$dir/work" && timeout 300 "$CRYPTO11_TEST" -test.v -test.run "^$t\$" 2>&1); echo "$out" >>"$log"
    if grep -q -- "^--- SKIP: $t " <<<"$out"; then sk=$((sk + 1))
    elif grep -q -- "^--- PASS: $t " <<<"$out" && ! grep -q -- "--- FAIL" <<<"$out"; then p=$((p + 1))
    else f=$((f + 1)); fi
  done
  echo "$p $f $sk"
}

available() {
  case $1 in
    pkcs11-tool) command -v pkcs11-tool >/dev/null ;;
    pykcs11|pykcs11-ungated) [ -d "${PYKCS11_TESTS:-/nonexistent}" ] && /usr/bin/python3 -c 'import PyKCS11' 2>/dev/null ;;
    python-pkcs11|python-pkcs11-ungated) [ -d "${PYTHON_PKCS11_TESTS:-/nonexistent}" ] && [ -x "${PYTHON_PKCS11_PYTHON:-/nonexistent}" ] ;;
    p11test) [ -x "${P11TEST:-/nonexistent}" ] ;;
    pkcs11test) [ -x "${PKCS11TEST:-/nonexistent}" ] ;;
    crypto11) [ -x "${CRYPTO11_TEST:-/nonexistent}" ] ;;
    *) return 1 ;;
  esac
}

run() {
  case $1 in
    pkcs11-tool) run_pkcs11_tool "$2" ;;
    pykcs11) run_pykcs11 "$2" ;;
    pykcs11-ungated) run_pykcs11 "$2" ungated ;;
    python-pkcs11) run_python_pkcs11 "$2" ;;
    python-pkcs11-ungated) run_python_pkcs11 "$2" ungated ;;
    p11test) run_p11test "$2" ;;
    pkcs11test) run_pkcs11test "$2" ;;
    crypto11) run_crypto11 "$2" ;;
  esac
}

SUITES=${SUITES:-pkcs11-tool pkcs11test pykcs11 pykcs11-ungated python-pkcs11 python-pkcs11-ungated p11test crypto11}
echo "| suite | keyshare passed | keyshare failed | keyshare skipped | SoftHSM2 passed | SoftHSM2 failed | SoftHSM2 skipped |"
echo "|---|---|---|---|---|---|---|"
for s in $SUITES; do
  if ! available "$s"; then echo "| $s | not run (input missing) | | | | | |"; continue; fi
  read -r kp kf ks < <(run "$s" keyshare)
  read -r sp sf ss < <(run "$s" softhsm)
  echo "| $s | $kp | $kf | $ks | $sp | $sf | $ss |"
done
echo "logs: $OUT"
