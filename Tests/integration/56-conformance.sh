#!/usr/bin/env bash
# PKCS #11 3.0 conformance (issue 13): what the rest of the PKCS #11 world
# expects of a soft token. A C host (Tests/integration/c/conformance.c)
# checks the version numbers and token flags, RSA generation sizes, the
# argument order of every session entry point, operation termination after
# errors in every operation family, AES-GCM parameters and streaming,
# secret-key usage defaults, and the wrap policy (every known extraction
# attack run to its end; the ordinary templates used as written). Then real
# pkcs11-tool use of an OpenSC-style "--usage-wrap --usage-decrypt" key. (with --private: OpenSC 0.23 asks CKA_PRIVATE=false without it, which a token secret key never is here), and keys born public in a session (issue 29: c/conformance.c public_session_keys, the wrap attacks again on public session keys)
# Usage: 56-conformance.sh KEYSHARE MODULE. Ends with "N passed, M failed".
set -euo pipefail
KEYSHARE=${1:?keyshare path}
MODULE=${2:?module path}
MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")
. "$(dirname "$0")/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-conformance.XXXXXX)
PIN_PID=
trap '[ -n "$PIN_PID" ] && kill "$PIN_PID" 2>/dev/null; rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# Test PINs go through the environment, never argv.
export KS_TEST_PIN=0000 KS_TEST_SO_PIN=1234

# One version everywhere: `keyshare --version`, CHANGELOG.md's newest entry,
# and (checked by the C host) C_GetInfo and the token versions.
# Line 1 is the version, line 2 names the OpenSSL in use (issue 18).
VERSION_OUT=$("$KEYSHARE" --version)
VERSION=$(printf '%s\n' "$VERSION_OUT" | sed -n 1p)
check_out "keyshare --version is major.minor.patch" '^[0-9]+\.[0-9]+\.[0-9]+$' echo "$VERSION"
check_out "keyshare --version names the OpenSSL in use" '^OpenSSL [0-9]+\.[0-9]+\.[0-9]+ \((bundled|system)' \
  sh -c 'printf "%s\n" "$1" | sed -n 2p' _ "$VERSION_OUT"
TOP=$(grep -m1 -oE '^## \[?[0-9]+\.[0-9]+\.[0-9]+' "$ROOT/CHANGELOG.md" | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' || true)
check "CHANGELOG.md's newest entry is $VERSION" test "$TOP" = "$VERSION"
MAJOR=${VERSION%%.*}; REST=${VERSION#*.}; MINOR=${REST%%.*}

c_host conformance "C host" -- "$MAJOR" "$MINOR"

# OpenSC's own tool with the template it writes for "--usage-wrap
# --usage-decrypt" (ENCRYPT, DECRYPT, WRAP and UNWRAP all true): the key
# must encrypt and decrypt (the old wrap/decrypt rule refused C_DecryptInit).
P=(pkcs11-tool --module "$MODULE" --token-label conformance)
# pkcs11-tool reads a PIN only from argv or a terminal: run it on a pty
# (script(1)) and type the PIN from the environment once it asks. Output in
# $WORK/pin.out; the PID is waited for (and killed by the trap on failure).
with_pin() {
  local cmd fifo=$WORK/pin.fifo
  rm -f "$fifo"; mkfifo "$fifo"
  cmd=$(printf '%q ' "$@")
  timeout 60 script -qec "$cmd" /dev/null <"$fifo" >"$WORK/pin.out" 2>&1 &
  PIN_PID=$!
  exec 7>"$fifo"
  for _ in $(seq 200); do grep -q 'enter User PIN' "$WORK/pin.out" 2>/dev/null && break; sleep 0.05; done
  sleep 0.1
  printf '%s\n' "$KS_TEST_PIN" >&7
  exec 7>&-
  local rc=0
  wait "$PIN_PID" || rc=$?
  PIN_PID=
  return $rc
}
if with_pin "${P[@]}" --login --keygen --key-type AES:32 --id 42 --label wrapdec --usage-wrap --usage-decrypt --private \
     ; then ok "pkcs11-tool --keygen AES --usage-wrap --usage-decrypt"
else bad "pkcs11-tool --keygen AES --usage-wrap --usage-decrypt" "$(cat "$WORK/pin.out")"; fi
head -c 64 /dev/urandom > "$WORK/plain"
IV=000102030405060708090a0b0c0d0e0f
if with_pin "${P[@]}" --login --encrypt --id 42 -m AES-CBC-PAD --iv $IV -i "$WORK/plain" -o "$WORK/ct" &&
   with_pin "${P[@]}" --login --decrypt --id 42 -m AES-CBC-PAD --iv $IV -i "$WORK/ct" -o "$WORK/back" &&
   cmp -s "$WORK/plain" "$WORK/back"; then
  ok "pkcs11-tool encrypts and decrypts with that key"
else
  bad "pkcs11-tool encrypts and decrypts with that key" "$(cat "$WORK/pin.out")"
fi

# CKA_ALLOWED_MECHANISMS as OpenSC writes it (--allowed-mechanisms): the key
# is made (it was CKR_ATTRIBUTE_TYPE_INVALID), works with the listed
# mechanism and refuses another with CKR_MECHANISM_INVALID.
if with_pin "${P[@]}" --login --keygen --key-type AES:16 --id 43 --label allowed --usage-decrypt --private \
     --allowed-mechanisms AES-CBC-PAD; then ok "pkcs11-tool --keygen AES --allowed-mechanisms AES-CBC-PAD"
else bad "pkcs11-tool --keygen AES --allowed-mechanisms AES-CBC-PAD" "$(cat "$WORK/pin.out")"; fi
if with_pin "${P[@]}" --login --encrypt --id 43 -m AES-CBC-PAD --iv $IV -i "$WORK/plain" -o "$WORK/ct43"; then
  ok "pkcs11-tool encrypts with the listed mechanism"
else bad "pkcs11-tool encrypts with the listed mechanism" "$(cat "$WORK/pin.out")"; fi
if with_pin "${P[@]}" --login --encrypt --id 43 -m AES-ECB -i "$WORK/plain" -o "$WORK/ecb43"; then
  bad "pkcs11-tool -m AES-ECB with that key is refused" "it encrypted"
elif grep -q CKR_MECHANISM_INVALID "$WORK/pin.out"; then ok "pkcs11-tool -m AES-ECB with that key is refused (CKR_MECHANISM_INVALID)"
else bad "pkcs11-tool -m AES-ECB with that key is refused (CKR_MECHANISM_INVALID)" "$(cat "$WORK/pin.out")"; fi
finish
