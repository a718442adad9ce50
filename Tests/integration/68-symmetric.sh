#!/usr/bin/env bash
# The symmetric mechanisms of issue 13: AES-ECB/CTR/CTS/CMAC, DES and 3DES,
# ChaCha20-Poly1305, CBC_PAD / GCM / alternative-IV key wraps, the AES and
# 3DES block-mode wraps (ECB, CBC, CBC_PAD: pkcs11test's CKM_DES3_ECB), and
# message-based AEAD. A C host (Tests/integration/c/symmetric.c) checks
# published vectors, raw-OpenSSL cross-checks over random inputs, argument
# errors, the message API and the two wrap attacks; this script then checks
# the module's outputs with the openssl CLI (public NIST/FIPS keys only:
# nothing secret on a command line) and drives pkcs11-tool where OpenSC 0.23
# can (AES-ECB, CBC_PAD wrap/unwrap, DES/3DES key generation; it has no
# CTR, CTS, GCM, CMAC or ChaCha20 for symmetric keys).
# Usage: 68-symmetric.sh KEYSHARE MODULE. Ends with "N passed, M failed".
set -euo pipefail
KEYSHARE=${1:?keyshare path}
MODULE=${2:?module path}
MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")
. "$(dirname "$0")/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-symmetric.XXXXXX)
PIN_PID=
trap '[ -n "$PIN_PID" ] && kill "$PIN_PID" 2>/dev/null; rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export KS_TEST_PIN=0000 KS_TEST_SO_PIN=1234
OUT=$WORK/out
mkdir -p "$OUT"

c_host symmetric "C host" -lcrypto -- "$OUT"

# The openssl CLI on what the module produced. Keys: SP 800-38A's AES-128
# and AES-256 keys, SP 800-67's 3DES key, FIPS 81's DES key (all published).
K128=2b7e151628aed2a6abf7158809cf4f3c
K256=603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4
K3=0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123
KD=0123456789abcdef
hx() { cat "$OUT/$1"; }
same() { # same NAME FILE CMD...: CMD's output equals FILE
  local name=$1 file=$2; shift 2
  if [ -f "$file" ] && "$@" 2>"$WORK/err" | cmp -s - "$file"; then ok "$name"; else bad "$name" "$(cat "$WORK/err" 2>/dev/null)"; fi
}
if [ -f "$OUT/data.bin" ]; then
  same "CKM_AES_CTR = openssl enc -aes-128-ctr (257 bytes, random counter block)" "$OUT/ctr128.bin" \
    openssl enc -aes-128-ctr -K $K128 -iv "$(hx cb.hex)" -in "$OUT/data.bin"
  head -c 256 "$OUT/data.bin" > "$WORK/d256"
  same "CKM_AES_ECB, multi-part = openssl enc -aes-256-ecb -nopad" "$OUT/ecb256.bin" \
    openssl enc -aes-256-ecb -K $K256 -nopad -in "$WORK/d256"
  m=$(openssl mac -cipher AES-128-CBC -macopt hexkey:$K128 -in "$OUT/data.bin" CMAC | tr 'A-F' 'a-f')
  check "CKM_AES_CMAC (AES-128, 257 bytes) = openssl mac CMAC" test "$m" = "$(hx cmac128.hex)"
  head -c 100 "$OUT/data.bin" > "$WORK/d100"
  m=$(openssl mac -cipher AES-256-CBC -macopt hexkey:$K256 -in "$WORK/d100" CMAC | tr 'A-F' 'a-f')
  check "CKM_AES_CMAC (AES-256, 100 bytes) = openssl mac CMAC" test "$m" = "$(hx cmac256.hex)"
  same "CKM_DES3_CBC_PAD = openssl enc -des-ede3-cbc" "$OUT/des3.bin" \
    openssl enc -des-ede3-cbc -K $K3 -iv "$(hx iv8.hex)" -in "$OUT/data.bin"
  same "CKM_DES_CBC_PAD, multi-part = openssl enc -des-cbc -provider legacy -provider default" "$OUT/des.bin" \
    openssl enc -des-cbc -provider legacy -provider default -K $KD -iv "$(hx iv8.hex)" -in "$OUT/data.bin"
  same "C_WrapKey CKM_AES_KEY_WRAP with an alternative IV = openssl enc -id-aes128-wrap -iv" "$OUT/kw-alt.bin" \
    openssl enc -id-aes128-wrap -K $K128 -iv "$(hx alt8.hex)" -in "$OUT/target16.bin"
  same "C_WrapKey CKM_AES_KEY_WRAP_PAD with an alternative IV = openssl enc -id-aes128-wrap-pad -iv" "$OUT/kwp-alt.bin" \
    openssl enc -id-aes128-wrap-pad -K $K128 -iv "$(hx alt4.hex)" -in "$OUT/target.bin"
  same "C_WrapKey CKM_AES_CBC_PAD: openssl enc -d -aes-128-cbc gives the key back" "$OUT/target.bin" \
    openssl enc -d -aes-128-cbc -K $K128 -iv "$(hx iv16.hex)" -in "$OUT/cbcpad-wrap.bin"
  same "C_WrapKey CKM_DES3_ECB: openssl enc -d -des-ede3 -nopad gives the key back" "$OUT/block-target16.bin" \
    openssl enc -d -des-ede3 -nopad -K $K3 -in "$OUT/des3-ecb-wrap.bin"
  { cat "$OUT/block-target20.bin"; head -c 4 /dev/zero; } >"$WORK/t24"
  same "C_WrapKey CKM_DES3_CBC: openssl enc -d -des-ede3-cbc -nopad gives the key and its 4 zero bytes of padding" "$WORK/t24" \
    openssl enc -d -des-ede3-cbc -nopad -K $K3 -iv 0123456789ABCDEF -in "$OUT/des3-cbc-wrap.bin"
else
  bad "the C host wrote the outputs for the openssl CLI checks"
fi

# pkcs11-tool (OpenSC 0.23) on a keyshare token. It reads a PIN only from
# argv or a terminal: run it on a pty (script(1)) and type the PIN from the
# environment when it asks. Output in $WORK/pin.out.
"$KEYSHARE" token create --label symmetric-cli --pin-source env:KS_TEST_PIN --so-pin-source env:KS_TEST_SO_PIN --short-pin >/dev/null
P=(pkcs11-tool --module "$MODULE" --token-label symmetric-cli)
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
mech_list=$("${P[@]}" -M 2>&1)
check_out "pkcs11-tool -M lists AES-ECB, AES-CTR, AES-CMAC, DES3-CBC-PAD and the ChaCha20-Poly1305 code 0x4021" \
  'mechtype-0x4021' bash -c 'grep -q "AES-ECB" <<<"$1" && grep -q "AES-CTR" <<<"$1" && grep -q "AES-CMAC" <<<"$1" &&
    grep -q "DES3-CBC-PAD" <<<"$1" && echo "$1"' _ "$mech_list"
# --private: secret keys are always CKA_PRIVATE here (docs/pkcs11-conformance.md,
# "CKA_PRIVATE"), and pkcs11-tool asks for false without it.
echo -n $K128 | xxd -r -p > "$WORK/kek.bin"
head -c 16 /dev/urandom > "$WORK/target.bin"
head -c 48 /dev/urandom > "$WORK/plain"
if with_pin "${P[@]}" --login --write-object "$WORK/kek.bin" --type secrkey --key-type AES:16 --id 41 --label pubkek --usage-wrap --private &&
   with_pin "${P[@]}" --login --write-object "$WORK/target.bin" --type secrkey --key-type AES:16 --id 42 --label target --extractable --private
then ok "pkcs11-tool --write-object: a KEK of a published value and an extractable AES target"
else bad "pkcs11-tool --write-object" "$(cat "$WORK/pin.out")"; fi
IV=000102030405060708090a0b0c0d0e0f
if with_pin "${P[@]}" --login --wrap --id 41 --application-id 42 -m AES-CBC-PAD --iv $IV -o "$WORK/wrapped" &&
   openssl enc -d -aes-128-cbc -K $K128 -iv $IV -in "$WORK/wrapped" | cmp -s - "$WORK/target.bin"; then
  ok "pkcs11-tool --wrap -m AES-CBC-PAD; openssl enc -d opens it"
else bad "pkcs11-tool --wrap -m AES-CBC-PAD" "$(cat "$WORK/pin.out")"; fi
if with_pin "${P[@]}" --login --unwrap --id 41 -m AES-CBC-PAD --iv $IV -i "$WORK/wrapped" --key-type AES: \
     --application-id 43 --application-label unwrapped && grep -q 'Secret Key Object' "$WORK/pin.out"; then
  ok "pkcs11-tool --unwrap -m AES-CBC-PAD"
else bad "pkcs11-tool --unwrap -m AES-CBC-PAD" "$(cat "$WORK/pin.out")"; fi
if with_pin "${P[@]}" --login --encrypt --id 41 -m AES-ECB -i "$WORK/plain" -o "$WORK/ecb" &&
   openssl enc -aes-128-ecb -K $K128 -nopad -in "$WORK/plain" | cmp -s - "$WORK/ecb" &&
   with_pin "${P[@]}" --login --decrypt --id 41 -m AES-ECB -i "$WORK/ecb" -o "$WORK/back" && cmp -s "$WORK/plain" "$WORK/back"; then
  ok "pkcs11-tool --encrypt/--decrypt -m AES-ECB, = openssl enc -aes-128-ecb"
else bad "pkcs11-tool AES-ECB" "$(cat "$WORK/pin.out")"; fi
# pkcs11-tool puts CKA_VALUE_LEN in a DES template (with "DES3:" alone, 0):
# the module accepts the key's own size (SoftHSM2 refuses any CKA_VALUE_LEN there).
if with_pin "${P[@]}" --login --keygen --key-type DES3:24 --id 44 --label des3 --private &&
   grep -q 'DES3 length 24' "$WORK/pin.out" &&
   with_pin "${P[@]}" --login --keygen --key-type DES:8 --id 45 --label des --private && grep -q 'DES length 8' "$WORK/pin.out"; then
  ok "pkcs11-tool --keygen --key-type DES3:24 and DES:8"
else bad "pkcs11-tool --keygen DES3/DES" "$(cat "$WORK/pin.out")"; fi
finish
