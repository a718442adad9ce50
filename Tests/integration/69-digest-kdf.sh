#!/usr/bin/env bash
# Digests, MACs and key derivation (issue 13), C_SessionCancel and saved
# operation state, through the C ABI: a C host
# (Tests/integration/c/digestkdf.c) runs published vectors (FIPS 202 /
# FIPS 180-4 examples, NIST HMAC-SHA3 samples, RFC 4231, RFC 5869, RFC 6070
# in both CK_PKCS5_PBKD2 layouts), every argument check, SP 800-108's extra
# key handles, and C_Get/SetOperationState with forged, altered and
# misplaced blobs; then the values it derives from fixed public inputs are
# compared with the openssl CLI's (dgst, mac, kdf HKDF/KBKDF/PBKDF2); then
# pkcs11-tool hashes with SHA3-256. The full CAVP runs are the Swift tests
# (Tests/PKCS11Tests/DigestKDFVectorTests.swift).
# Usage: 69-digest-kdf.sh KEYSHARE MODULE. Ends with "N passed, M failed".
set -euo pipefail
KEYSHARE=${1:?keyshare path}
MODULE=${2:?module path}
MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")
. "$(dirname "$0")/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-digestkdf.XXXXXX)
PIN_PID=
trap '[ -n "$PIN_PID" ] && kill "$PIN_PID" 2>/dev/null; rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# Test PINs through the environment, never argv.
export KS_TEST_PIN=0000 KS_TEST_SO_PIN=1234
: "$KEYSHARE"

OUT=$WORK/host.out
if cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$WORK/digestkdf" "$ROOT/Tests/integration/c/digestkdf.c" -ldl; then
  "$WORK/digestkdf" "$MODULE" >"$OUT" 2>&1 || true
  grep -E '^(ok|FAIL|  )' "$OUT" || true
  c_pass=$(tail -1 "$OUT" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p')
  c_fail=$(tail -1 "$OUT" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p')
  if [ -z "$c_pass" ]; then bad "C host ran to its end" "$(tail -5 "$OUT")"; else
    PASS=$((PASS + c_pass)); FAIL=$((FAIL + c_fail)); fi
else
  bad "C host compiles"
fi

# --- openssl cross-checks. The inputs are the host's fixed public values
# (no secret is involved): the message is the bytes 00..c7, the keys,
# salts and passwords below are published constants of this test.
val() { sed -nE "s/^value $1 ([0-9a-f]*)$/\1/p" "$OUT"; }
lower() { tr -d ':\n ' | tr 'A-F' 'a-f'; }
seq_hex() { local from=$1 n=$2 i; for ((i = 0; i < n; i++)); do printf '%02x' $((from + i)); done; }
MSG=$WORK/msg
python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(200)))' >"$MSG"
cross() {  # NAME EXPECTED-FROM-OPENSSL
  local got; got=$(val "$1")
  if [ -n "$got" ] && [ "$got" = "$2" ]; then ok "openssl agrees: $1"; else bad "openssl agrees: $1" "module:  $got
openssl: $2"; fi
}
for d in sha3-224 sha3-256 sha3-384 sha3-512 sha512-224 sha512-256; do
  cross "digest-$d" "$(openssl dgst -"$d" -r "$MSG" | cut -d' ' -f1)"
done
K0B=$(printf '0b%.0s' $(seq 20))
for d in SHA3-224 SHA3-256 SHA3-384 SHA3-512 SHA512-224 SHA512-256; do
  name=hmac-$(echo "$d" | tr 'A-Z' 'a-z')
  cross "$name" "$(openssl mac -digest "$d" -macopt hexkey:"$K0B" -in "$MSG" HMAC | lower)"
done
full=$(openssl mac -digest SHA3-384 -macopt hexkey:"$K0B" -in "$MSG" HMAC | lower)
cross hmac-sha3-384-first20 "${full:0:40}"
KEY=$(seq_hex 32 32); SALT=$(seq_hex 64 16); INFO=$(seq_hex 96 8)
cross hkdf-sha256 "$(openssl kdf -keylen 42 -kdfopt digest:SHA256 -kdfopt hexkey:"$KEY" -kdfopt hexsalt:"$SALT" \
  -kdfopt hexinfo:"$INFO" HKDF | lower)"
cross hkdf-sha3-256-extract "$(openssl kdf -keylen 32 -kdfopt digest:SHA3-256 -kdfopt mode:EXTRACT_ONLY \
  -kdfopt hexkey:"$KEY" -kdfopt hexsalt:"$SALT" HKDF | lower)"
# OpenSSL's KBKDF input: [i]32 || label || 00 || context || [L]32 (feedback:
# K(i-1) first), L in bits: the data params the host gives.
KB=$(seq_hex 128 32); LABEL=6c6162656c; CONTEXT=636f6e74657874
cross kbkdf-counter-hmac-sha256 "$(openssl kdf -keylen 42 -kdfopt mac:HMAC -kdfopt digest:SHA256 -kdfopt hexkey:"$KB" \
  -kdfopt hexsalt:$LABEL -kdfopt hexinfo:$CONTEXT KBKDF | lower)"
cross kbkdf-counter-cmac-aes128 "$(openssl kdf -keylen 40 -kdfopt mac:CMAC -kdfopt cipher:AES-128-CBC \
  -kdfopt hexkey:"${KB:0:32}" -kdfopt hexsalt:$LABEL -kdfopt hexinfo:$CONTEXT KBKDF | lower)"
cross kbkdf-feedback-hmac-sha512 "$(openssl kdf -keylen 100 -kdfopt mode:FEEDBACK -kdfopt mac:HMAC -kdfopt digest:SHA512 \
  -kdfopt hexkey:"$KB" -kdfopt hexseed:"$(seq_hex 0 64)" -kdfopt hexsalt:$LABEL -kdfopt hexinfo:$CONTEXT KBKDF | lower)"
cross pbkdf2-sha512 "$(openssl kdf -keylen 64 -kdfopt digest:SHA512 -kdfopt pass:'public test passphrase' \
  -kdfopt salt:NaCl-and-more -kdfopt iter:1000 PBKDF2 | lower)"

# --- pkcs11-tool (OpenSC 0.23) knows SHA3-256 by name.
head -c 1000 /dev/urandom >"$WORK/data"
if out=$(pkcs11-tool --module "$MODULE" --token-label digest-kdf --hash -m SHA3-256 -i "$WORK/data" -o "$WORK/h" 2>&1) &&
   [ "$(od -An -tx1 "$WORK/h" | tr -d ' \n')" = "$(openssl dgst -sha3-256 -r "$WORK/data" | cut -d' ' -f1)" ]; then
  ok "pkcs11-tool --hash -m SHA3-256 matches openssl dgst -sha3-256"
else
  bad "pkcs11-tool --hash -m SHA3-256 matches openssl dgst -sha3-256" "$out"
fi
check_out "pkcs11-tool -M lists SHA3-256-HMAC and HKDF" 'SHA3-256-HMAC' \
  pkcs11-tool --module "$MODULE" --token-label digest-kdf -M
finish
