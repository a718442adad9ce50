#!/usr/bin/env bash
# The asymmetric mechanisms of issue 13, each cross-checked with the OpenSSL
# command line: pkcs11-tool (OpenSC 0.23) for EC key generation on the new
# curves (secp256k1, brainpoolP256r1/384r1/512r1, P-192, P-224), ECDSA and
# ECDH with them, and X25519 generation; a C host
# (Tests/integration/c/asymmetric.c) for what pkcs11-tool cannot do: Ed448
# (openssl verifies), X25519/X448 (openssl derives the same secret), RSA
# sign/verify recover (openssl -verifyrecover, and the token recovers
# OpenSSL's signature), RSA PKCS #1 / OAEP / RSA-AES key wrap (openssl opens
# the blobs: pkeyutl -decrypt, then enc -id-aes256-wrap-pad) and unwrap of
# blobs OpenSSL made, and the recovery functions' argument checks.
# Usage: 70-asymmetric.sh KEYSHARE MODULE. Ends with "N passed, M failed".
set -euo pipefail
KEYSHARE=${1:?keyshare binary}
MODULE=${2:?module path}
MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")
. "$(dirname "$0")/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-asym.XXXXXX)
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
: "$KEYSHARE"
# PINs through the environment only: the C host reads KS_TEST_*, pkcs11-tool env:VAR.
export KS_TEST_PIN=0000 KS_TEST_SO_PIN=1234 PIN=0000
P=(pkcs11-tool --module "$MODULE")
U=("${P[@]}" --token-label asymmetric --login --pin env:PIN)
o() { openssl "$@" 2>/dev/null; }

# Inputs OpenSSL makes for the C host.
o genpkey -algorithm X25519 -out "$WORK/x25519.pem"
o genpkey -algorithm X448 -out "$WORK/x448.pem"
for c in x25519 x448; do
  # The raw public key: the SPKI's last 32 / 56 bytes.
  n=$([ $c = x25519 ] && echo 32 || echo 56)
  o pkey -in "$WORK/$c.pem" -pubout -outform DER | tail -c "$n" > "$WORK/$c.peer"
done
o genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/peer.pem"
o rsa -in "$WORK/peer.pem" -modulus -noout > "$WORK/peer.modulus"
o pkey -in "$WORK/peer.pem" -pubout -out "$WORK/peer.pub"
head -c 32 /dev/urandom > "$WORK/aes.value"
printf 'OpenSSL signs, the token recovers' > "$WORK/ossl.data"
o pkeyutl -sign -inkey "$WORK/peer.pem" -in "$WORK/ossl.data" -out "$WORK/ossl.sig"

# A raw r||s ECDSA signature (P-256: 32 + 32 bytes) to DER, for openssl dgst -verify.
rs_to_der() {
  python3 -c '
import sys
raw = open(sys.argv[1], "rb").read()
def integer(b):
    b = b.lstrip(b"\0") or b"\0"
    if b[0] & 0x80: b = b"\0" + b
    return bytes([2, len(b)]) + b
body = integer(raw[:32]) + integer(raw[32:])
open(sys.argv[2], "wb").write(bytes([0x30, len(body)]) + body)
' "$1" "$2" 2>/dev/null || true
}

run_host() {
  local out c_pass c_fail
  out=$("$WORK/asymmetric" "$MODULE" "$1" "$WORK" 2>&1) || true
  echo "$out" | grep -E '^(ok|FAIL)' || true
  c_pass=$(echo "$out" | tail -1 | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p')
  c_fail=$(echo "$out" | tail -1 | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p')
  if [ -z "$c_pass" ]; then bad "C host ($1) ran to its end" "$(echo "$out" | tail -5)"; else
    PASS=$((PASS + c_pass)); FAIL=$((FAIL + c_fail)); fi
}

if ! cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$WORK/asymmetric" "$ROOT/Tests/integration/c/asymmetric.c" -ldl; then
  bad "C host compiles"; finish; exit 1
fi
run_host make

# Ed448: openssl verifies the token's signature with the token's public key.
check "openssl verifies the Ed448 signature" openssl pkeyutl -verify -rawin -pubin -inkey "$WORK/ed448.spki" -keyform DER \
  -in "$WORK/ed448.msg" -sigfile "$WORK/ed448.sig"
# X25519 / X448: openssl derives the same secret from the other side.
for c in x25519 x448; do
  o pkeyutl -derive -inkey "$WORK/$c.pem" -peerkey "$WORK/$c.spki" -peerform DER -out "$WORK/$c.ossl" || true
  check "openssl's $c secret equals the token's" cmp -s "$WORK/$c.z" "$WORK/$c.ossl"
done
# Recovery: openssl gets the token's data back; the token got OpenSSL's.
o pkeyutl -verifyrecover -pubin -inkey "$WORK/rec.spki" -keyform DER -in "$WORK/rec.sig" -out "$WORK/rec.out" || true
check "openssl -verifyrecover returns the C_SignRecover data (CKM_RSA_PKCS)" cmp -s "$WORK/rec.data" "$WORK/rec.out"
o pkeyutl -verifyrecover -pubin -inkey "$WORK/rec.spki" -keyform DER -pkeyopt rsa_padding_mode:none -in "$WORK/rec.raw" \
  -out "$WORK/rec.rawout" || true
check_out "openssl -verifyrecover (no padding) returns the zero-padded block (CKM_RSA_X_509)" 'equal' \
  bash -c "[ \"\$(tail -c $(stat -c %s "$WORK/rec.data") '$WORK/rec.rawout' | od -An -tx1)\" = \"\$(od -An -tx1 < '$WORK/rec.data')\" ] && [ \$(stat -c %s '$WORK/rec.rawout') = 256 ] && echo equal"
check "C_VerifyRecover returned OpenSSL's signed data" cmp -s "$WORK/ossl.data" "$WORK/ossl.recovered"
# Wrapping: OpenSSL holds the wrapping key's private half and opens each blob.
o pkeyutl -decrypt -inkey "$WORK/peer.pem" -in "$WORK/wrap.pkcs1" -out "$WORK/wrap.pkcs1.out" || true
check "openssl -decrypt opens the CKM_RSA_PKCS wrap" cmp -s "$WORK/aes.value" "$WORK/wrap.pkcs1.out"
OAEP=(-pkeyopt rsa_padding_mode:oaep -pkeyopt rsa_oaep_md:sha256 -pkeyopt rsa_mgf1_md:sha256)
o pkeyutl -decrypt -inkey "$WORK/peer.pem" "${OAEP[@]}" -in "$WORK/wrap.oaep" -out "$WORK/wrap.oaep.out" || true
check "openssl -decrypt rsa_padding_mode:oaep opens the CKM_RSA_PKCS_OAEP wrap" cmp -s "$WORK/aes.value" "$WORK/wrap.oaep.out"
# RSA-AES: the first 256 bytes are the OAEP-wrapped AES key, the rest RFC 5649 of the PKCS #8.
head -c 256 "$WORK/wrap.rsaaes" > "$WORK/rsaaes.head"
tail -c +257 "$WORK/wrap.rsaaes" > "$WORK/rsaaes.tail"
o pkeyutl -decrypt -inkey "$WORK/peer.pem" "${OAEP[@]}" -in "$WORK/rsaaes.head" -out "$WORK/rsaaes.aes" || true
KEK=$(od -An -tx1 -v "$WORK/rsaaes.aes" | tr -d ' \n')
o enc -d -id-aes256-wrap-pad -K "$KEK" -iv A65959A6 -in "$WORK/rsaaes.tail" -out "$WORK/rsaaes.p8" || true
o pkey -inform DER -in "$WORK/rsaaes.p8" -pubout -outform DER -out "$WORK/rsaaes.pub" || true
check "openssl opens the CKM_RSA_AES_KEY_WRAP blob (OAEP, then -id-aes256-wrap-pad) to the wrapped EC key" \
  cmp -s "$WORK/rsaaes.pub" "$WORK/wrap.ecpub.spki"

# SHA-3 signatures (C_SignUpdate/C_SignFinal), verified by openssl dgst -sha3-*.
for b in 224 256 384 512; do
  check "openssl verifies CKM_SHA3_${b}_RSA_PKCS" openssl dgst -sha3-$b -verify "$WORK/sha3.rsa.spki" -keyform DER \
    -signature "$WORK/sha3.$b.pkcs1" "$WORK/sha3.msg"
  check "openssl verifies CKM_SHA3_${b}_RSA_PKCS_PSS (MGF1-SHA3-$b, salt $((b / 8)))" openssl dgst -sha3-$b \
    -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:$((b / 8)) -sigopt rsa_mgf1_md:sha3-$b \
    -verify "$WORK/sha3.rsa.spki" -keyform DER -signature "$WORK/sha3.$b.pss" "$WORK/sha3.msg"
  rs_to_der "$WORK/sha3.$b.ecdsa" "$WORK/sha3.$b.ecdsa.der"
  check "openssl verifies CKM_ECDSA_SHA3_$b" openssl dgst -sha3-$b -verify "$WORK/sha3.ec.spki" -keyform DER \
    -signature "$WORK/sha3.$b.ecdsa.der" "$WORK/sha3.msg"
done

# Blobs OpenSSL makes for the token's RSA key, opened by the second run.
o pkeyutl -encrypt -pubin -inkey "$WORK/unwrapper.spki" -keyform DER "${OAEP[@]}" -in "$WORK/aes.value" -out "$WORK/in.oaep"
o genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/in.ec.pem"
o pkcs8 -topk8 -nocrypt -in "$WORK/in.ec.pem" -outform DER -out "$WORK/in.ec.p8"
head -c 32 /dev/urandom > "$WORK/in.kek"
IKEK=$(od -An -tx1 -v "$WORK/in.kek" | tr -d ' \n')
o pkeyutl -encrypt -pubin -inkey "$WORK/unwrapper.spki" -keyform DER "${OAEP[@]}" -in "$WORK/in.kek" -out "$WORK/in.head"
o enc -e -id-aes256-wrap-pad -K "$IKEK" -iv A65959A6 -in "$WORK/in.ec.p8" -out "$WORK/in.tail"
cat "$WORK/in.head" "$WORK/in.tail" > "$WORK/in.rsaaes"
run_host unwrap
VAL=$(od -An -tx1 -v "$WORK/aes.value" | tr -d ' \n')
head -c 16 /dev/zero | o enc -aes-256-cbc -K "$VAL" -iv 00000000000000000000000000000000 -nopad -out "$WORK/expected.block" || true
check "the key unwrapped from OpenSSL's OAEP blob is OpenSSL's AES key" cmp -s "$WORK/expected.block" "$WORK/unwrapped.block"
rs_to_der "$WORK/unwrapped.sig" "$WORK/unwrapped.der"
o pkey -in "$WORK/in.ec.pem" -pubout -out "$WORK/in.ec.pub"
check "openssl verifies a signature by the key unwrapped from its RSA-AES blob" \
  openssl dgst -sha256 -verify "$WORK/in.ec.pub" -signature "$WORK/unwrapped.der" "$WORK/unwrapped.msg"

# pkcs11-tool: the new curves generate, sign and derive.
echo "ecdsa data" > "$WORK/data"
openssl dgst -sha256 -binary "$WORK/data" > "$WORK/data.sha256"
id=40
for c in secp256k1 brainpoolP256r1 brainpoolP384r1 brainpoolP512r1 prime192v1 secp224r1; do
  id=$((id + 1))
  check_out "pkcs11-tool --keypairgen EC:$c" 'Public Key Object; EC' \
    "${U[@]}" --keypairgen --key-type "EC:$c" --id $id --label "$c" --usage-sign --usage-derive
  check "pkcs11-tool --sign -m ECDSA with $c" "${U[@]}" --sign -m ECDSA --id $id -i "$WORK/data.sha256" \
    -o "$WORK/sig.$c" --signature-format openssl
  # The public key through OpenSSL's libp11 engine: pkcs11-tool 0.23's
  # --read-object fails on some curves' keys ("cannot create EVP_PKEY", P-384
  # included) whatever token holds them.
  env PKCS11_MODULE_PATH="$MODULE" openssl pkey -engine pkcs11 -inform engine -pubin -pubout -outform DER \
    -in "pkcs11:token=asymmetric;id=%$id;type=public" -out "$WORK/$c.pub.der" >/dev/null 2>&1 || true
  check "openssl verifies the $c signature" openssl dgst -sha256 -verify "$WORK/$c.pub.der" -keyform DER \
    -signature "$WORK/sig.$c" "$WORK/data"
  if [ "$c" = secp256k1 ] || [ "$c" = brainpoolP384r1 ]; then
    o genpkey -algorithm EC -pkeyopt "ec_paramgen_curve:$c" -out "$WORK/peer.$c.pem"
    o pkey -in "$WORK/peer.$c.pem" -pubout -outform DER -out "$WORK/peer.$c.der"
    "${U[@]}" --derive -m ECDH1-DERIVE --id $id --input-file "$WORK/peer.$c.der" --output-file "$WORK/z.$c" >/dev/null 2>&1 || true
    o pkeyutl -derive -inkey "$WORK/peer.$c.pem" -peerkey "$WORK/$c.pub.der" -peerform DER -out "$WORK/z.$c.ossl" || true
    check "pkcs11-tool --derive ECDH1-DERIVE ($c) equals openssl pkeyutl -derive" cmp -s "$WORK/z.$c" "$WORK/z.$c.ossl"
  fi
done
# OpenSSL's libp11 engine signs with a brainpool key (id 42) of this token.
env PKCS11_MODULE_PATH="$MODULE" openssl dgst -sha256 -engine pkcs11 -keyform engine \
  -sign "pkcs11:token=asymmetric;id=%42;type=private;pin-source=file:/dev/fd/3" -out "$WORK/engine.sig" "$WORK/data" \
  3< <(pin_pipe PIN) >/dev/null 2>&1 || true
check "the libp11 engine signs with brainpoolP256r1; openssl verifies" openssl dgst -sha256 -verify \
  "$WORK/brainpoolP256r1.pub.der" -keyform DER -signature "$WORK/engine.sig" "$WORK/data"
check_out "pkcs11-tool --keypairgen EC:curve25519 (X25519)" 'EC_PARAMS: +06032b656e' \
  "${U[@]}" --keypairgen --key-type EC:curve25519 --id 60 --label x25519
mechs=$("${P[@]}" --token-label asymmetric --list-mechanisms 2>&1 || true)
for m in ECDH1-COFACTOR-DERIVE 'mechtype-0x1056|EC-MONTGOMERY' 'mechtype-0x1054|RSA-AES-KEY-WRAP'; do
  if grep -Eq "$m" <<<"$mechs"; then ok "--list-mechanisms shows $m"; else bad "--list-mechanisms shows $m" "$mechs"; fi
done
if grep -E '^ *RSA-PKCS,' <<<"$mechs" | grep -q 'sign_recover' && grep -E '^ *RSA-PKCS,' <<<"$mechs" | grep -q 'wrap'; then
  ok "RSA-PKCS lists sign_recover and wrap"
else bad "RSA-PKCS lists sign_recover and wrap" "$(grep -E '^ *RSA-PKCS,' <<<"$mechs")"; fi
finish
