#!/usr/bin/env bash
# Issue 13's second round of mechanisms: CKM_DES2_KEY_GEN, CBC-MAC
# (CKM_AES_MAC(_GENERAL), CKM_DES3_MAC(_GENERAL)), CKM_AES_CCM,
# CKM_AES_KEY_WRAP_KWP and the AES/DES3 ENCRYPT_DATA derivations. A C host
# (Tests/integration/c/mechbreadth.c) checks published vectors, AES-CCM
# against raw EVP, the catalog and argument errors; this script then checks
# the module's outputs with the openssl CLI (published keys only: nothing
# secret on a command line). Passes in process and through the agent (the default),
# where the parameters with pointers cross the agent codec.
# Usage: 71-mech-breadth.sh KEYSHARE MODULE. Ends with "N passed, M failed".
set -euo pipefail
KEYSHARE=${1:?keyshare path}
MODULE=${2:?module path}
MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")
. "$(dirname "$0")/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-breadth.XXXXXX)
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export KS_TEST_PIN=0000 KS_TEST_SO_PIN=1234
OUT=$WORK/out
mkdir -p "$OUT"

c_host mechbreadth "C host" -lcrypto -- "$OUT"

# Published keys: SP 800-38A's AES-128 key, SP 800-67's K1 K2, RFC 5649's KEK.
K128=2b7e151628aed2a6abf7158809cf4f3c
K2=0123456789ABCDEF23456789ABCDEF01
KEK=5840df6e29b02af1ab493b705bf16ea1ae8338f4dcc176a8
Z16=00000000000000000000000000000000
same() { # same NAME FILE CMD...: CMD's output equals FILE
  local name=$1 file=$2; shift 2
  if [ -f "$file" ] && "$@" 2>"$WORK/err" | cmp -s - "$file"; then ok "$name"; else bad "$name" "$(cat "$WORK/err" 2>/dev/null)"; fi
}
if [ -f "$OUT/data20.bin" ]; then
  # CBC-MAC = the last block of CBC encryption (zero IV) of the zero-padded data.
  same "CKM_AES_MAC_GENERAL(16) of 20 bytes = the last block of openssl enc -aes-128-cbc -nopad -iv 0 (zero-padded)" \
    "$OUT/aesmac20.bin" bash -c 'zpad() { local n; n=$(stat -c %s "$1"); cat "$1"; head -c $(( ((16 - n % 16) % 16) )) /dev/zero; }
      zpad "$1" | openssl enc -aes-128-cbc -nopad -K "$2" -iv "$3" | tail -c 16' _ "$OUT/data20.bin" $K128 $Z16
  same "CKM_DES3_MAC_GENERAL(8), DES2 key, 21 bytes = the last block of openssl enc -des-ede-cbc -nopad (two-key 3DES)" \
    "$OUT/des2mac21.bin" bash -c 'n=$(stat -c %s "$1"); { cat "$1"; head -c $(( ((8 - n % 8) % 8) )) /dev/zero; } |
      openssl enc -des-ede-cbc -nopad -K "$2" -iv 0000000000000000 | tail -c 8' _ "$OUT/fox21.bin" $K2
  same "CKM_DES3_ECB with a DES2 key = openssl enc -des-ede-ecb -nopad (two-key 3DES)" "$OUT/des2ecb.bin" \
    openssl enc -des-ede-ecb -nopad -K $K2 -in "$OUT/fox24.bin"
  same "C_WrapKey CKM_AES_KEY_WRAP_KWP = openssl enc -id-aes192-wrap-pad" "$OUT/kwp20.bin" \
    openssl enc -id-aes192-wrap-pad -K $KEK -iv A65959A6 -in "$OUT/key20.bin"
  same "C_DeriveKey CKM_AES_CBC_ENCRYPT_DATA (random data and IV) = openssl enc -aes-128-cbc -nopad" "$OUT/ecd-key.bin" \
    openssl enc -aes-128-cbc -nopad -K $K128 -iv "$(xxd -p -c 64 "$OUT/ecd-iv.bin")" -in "$OUT/ecd-data.bin"
  check "CKM_DSA_SHA256 signature of the module (RFC 6979's key) verifies with openssl dgst -sha256 -verify" \
    openssl dgst -sha256 -verify "$OUT/dsa-pub.pem" -signature "$OUT/dsa-sig.der" "$OUT/dsa-data.bin"
  same "CKM_DH_PKCS_DERIVE's Z = openssl pkeyutl -derive (a peer key file the C host made) -pkeyopt dh_pad:1" "$OUT/dh-z.bin" \
    openssl pkeyutl -derive -inkey "$OUT/dh-peer.pem" -peerkey "$OUT/dh-module-pub.pem" -pkeyopt dh_pad:1
else
  bad "the C host wrote the outputs for the openssl CLI checks"
fi

# The CLI names the DES key types: the C host left a CKK_DES2 token key
# (`keyshare list` printed "key type 20" before).
out=$("$KEYSHARE" list --private --pin-source env:KS_TEST_PIN 2>&1) || true
check_out "keyshare list names a DES2 key \"3DES two-key (legacy)\"" '3DES two-key \(legacy\)' echo "$out"
check_out "keyshare list names the DSA keys \"DSA-1024 (legacy)\"" 'DSA-1024 \(legacy\)' echo "$out"
finish
