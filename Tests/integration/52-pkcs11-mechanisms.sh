#!/usr/bin/env bash
# pkcs11-tool against the module's issue-3 mechanisms: key generation (RSA,
# EC P-256/P-384, Ed25519, AES, generic secret), sign/verify with every
# family, RSA decryption (PKCS #1, OAEP) of data OpenSSL encrypted, AES
# encrypt/decrypt, HMAC, wrap/unwrap, ECDH derive, certificate write and
# object deletion, and pkcs11-tool's --test / --test-ec / --test-fork.
# Usage: 52-pkcs11-mechanisms.sh KEYSHARE MODULE. Ends with "N passed, M failed".
set -euo pipefail
KEYSHARE=${1:?keyshare binary}
MODULE=${2:?module path}
MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")
. "$(dirname "$0")/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-p11m.XXXXXX)
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
# PINs reach pkcs11-tool through the environment (--pin env:VAR), never argv.
export PIN=0000 SOPIN=1234
P=(pkcs11-tool --module "$MODULE")
U=("${P[@]}" --token-label m --login --pin env:PIN)

"${P[@]}" --init-token --label m --so-pin env:SOPIN --slot 1 >/dev/null
"${P[@]}" --init-pin --login --login-type so --so-pin env:SOPIN --new-pin env:PIN --token-label m >/dev/null

# Key generation.
check_out "keypairgen RSA-2048" 'Private Key Object; RSA' "${U[@]}" --keypairgen --key-type rsa:2048 --id 11 --label rsa --usage-sign --usage-decrypt
check_out "keypairgen EC P-256" 'EC_POINT 256 bits' "${U[@]}" --keypairgen --key-type EC:prime256v1 --id 12 --label p256 --usage-sign --usage-derive
check_out "keypairgen EC P-384" 'EC_POINT 384 bits' "${U[@]}" --keypairgen --key-type EC:secp384r1 --id 13 --label p384
check_out "keypairgen Ed25519" 'EC_EDWARDS|EDDSA|Ed25519|EC_POINT 255 bits|EC_POINT 256 bits' "${U[@]}" --keypairgen --key-type EC:edwards25519 --id 14 --label ed
# pkcs11-tool 0.23 asks for CKA_PRIVATE=false on a secret key unless --private is
# given; token secret keys are always private here (session keys may be public, issue 29) (docs/pkcs11-conformance.md, "CKA_PRIVATE").
check_fail_rv() { local name=$1 re=$2; shift 2; local out; if out=$("$@" 2>&1); then bad "$name" "$out"; elif grep -Eq -- "$re" <<<"$out"; then ok "$name"; else bad "$name" "$out"; fi; }
check_fail_rv "keygen of a public secret key: CKR_TEMPLATE_INCONSISTENT" 'CKR_TEMPLATE_INCONSISTENT' \
  "${U[@]}" --keygen --key-type AES:32 --id 20 --label public-aes
check_out "keygen AES-256" 'Secret Key Object; AES' "${U[@]}" --keygen --private --key-type AES:32 --id 21 --label aes --usage-decrypt --extractable
check_out "keygen generic secret" 'Secret Key Object' "${U[@]}" --keygen --private --key-type GENERIC:32 --id 22 --label mac --usage-sign
check_out "generated key is local and never extractable" 'always sensitive, never extractable, local' "${U[@]}" -O --id 11 --type privkey
gen_list=$("$KEYSHARE" list 2>&1 || true)
if grep -q 'rsa' <<<"$gen_list" && grep -q 'p256' <<<"$gen_list"; then ok "keyshare list sees generated token keys"; else bad "keyshare list sees generated token keys" "$gen_list"; fi

# Sign with the module, verify with pkcs11-tool and OpenSSL.
echo "mechanism data" > "$WORK/data"
"${P[@]}" --token-label m --read-object --type pubkey --id 11 -o "$WORK/rsa.pub.der" >/dev/null 2>&1
openssl pkey -pubin -inform DER -in "$WORK/rsa.pub.der" -out "$WORK/rsa.pub" 2>/dev/null
# The EC key through ec_pubkey_der (lib.sh: pkcs11-tool 0.23's --read-object of an EC public key
# reads freed memory and fails now and then).
ec_pubkey_der "$WORK/p256.pub.der" "${P[@]}" --token-label m --id 12
openssl pkey -pubin -inform DER -in "$WORK/p256.pub.der" -out "$WORK/p256.pub" 2>/dev/null
openssl dgst -sha256 -binary "$WORK/data" > "$WORK/data.sha256"
for m in RSA-PKCS SHA256-RSA-PKCS SHA256-RSA-PKCS-PSS SHA384-RSA-PKCS SHA512-RSA-PKCS-PSS SHA1-RSA-PKCS; do
  in=$WORK/data
  check "sign $m" "${U[@]}" --sign --mechanism $m --id 11 -i "$in" -o "$WORK/sig.$m"
  check_out "verify $m" 'Signature is valid' "${U[@]}" --verify --mechanism $m --id 11 -i "$in" --signature-file "$WORK/sig.$m"
done
check "openssl verifies SHA256-RSA-PKCS" openssl dgst -sha256 -verify "$WORK/rsa.pub" -signature "$WORK/sig.SHA256-RSA-PKCS" "$WORK/data"
check "openssl verifies SHA256-RSA-PKCS-PSS" openssl dgst -sha256 -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:-1 \
  -verify "$WORK/rsa.pub" -signature "$WORK/sig.SHA256-RSA-PKCS-PSS" "$WORK/data"
for m in ECDSA ECDSA-SHA1 ECDSA-SHA256 ECDSA-SHA384 ECDSA-SHA512; do
  in=$WORK/data; [ $m = ECDSA ] && in=$WORK/data.sha256
  check "sign $m" "${U[@]}" --sign --mechanism $m --id 12 -i "$in" -o "$WORK/sig.$m"
  check_out "verify $m" 'Signature is valid' "${U[@]}" --verify --mechanism $m --id 12 -i "$in" --signature-file "$WORK/sig.$m"
done
check "sign ECDSA-SHA384 with P-384" "${U[@]}" --sign --mechanism ECDSA-SHA384 --id 13 -i "$WORK/data" -o "$WORK/sig.p384"
check_out "verify ECDSA-SHA384 with P-384" 'Signature is valid' "${U[@]}" --verify --mechanism ECDSA-SHA384 --id 13 -i "$WORK/data" --signature-file "$WORK/sig.p384"
check "sign ECDSA-SHA256 (openssl format)" "${U[@]}" --sign --mechanism ECDSA-SHA256 --id 12 -i "$WORK/data" -o "$WORK/sig.ecder" --signature-format openssl
check "openssl verifies ECDSA-SHA256" openssl dgst -sha256 -verify "$WORK/p256.pub" -signature "$WORK/sig.ecder" "$WORK/data"
check "sign EDDSA" "${U[@]}" --sign --mechanism EDDSA --id 14 -i "$WORK/data" -o "$WORK/sig.ed"
check_out "verify EDDSA" 'Signature is valid' "${U[@]}" --verify --mechanism EDDSA --id 14 -i "$WORK/data" --signature-file "$WORK/sig.ed"
echo "tampered" > "$WORK/data2"
out=$("${U[@]}" --verify --mechanism EDDSA --id 14 -i "$WORK/data2" --signature-file "$WORK/sig.ed" 2>&1 || true)
if grep -q 'Invalid signature\|CKR_SIGNATURE_INVALID' <<<"$out"; then ok "a tampered message fails EDDSA verify"; else bad "a tampered message fails EDDSA verify" "$out"; fi
check "sign SHA256-HMAC" "${U[@]}" --sign --mechanism SHA256-HMAC --id 22 -i "$WORK/data" -o "$WORK/sig.hmac"
check_out "HMAC is 32 bytes" '^32$' stat -c %s "$WORK/sig.hmac"

# RSA decryption of what OpenSSL encrypted to the public key.
echo -n "secret message" > "$WORK/plain"
openssl pkeyutl -encrypt -pubin -inkey "$WORK/rsa.pub" -in "$WORK/plain" -out "$WORK/ct.pkcs1"
check "decrypt RSA-PKCS" "${U[@]}" --decrypt --mechanism RSA-PKCS --id 11 -i "$WORK/ct.pkcs1" -o "$WORK/pt.pkcs1"
check "RSA-PKCS plaintext matches" cmp "$WORK/plain" "$WORK/pt.pkcs1"
openssl pkeyutl -encrypt -pubin -inkey "$WORK/rsa.pub" -pkeyopt rsa_padding_mode:oaep -pkeyopt rsa_oaep_md:sha256 \
  -pkeyopt rsa_mgf1_md:sha256 -in "$WORK/plain" -out "$WORK/ct.oaep"
check "decrypt RSA-PKCS-OAEP (SHA-256)" "${U[@]}" --decrypt --mechanism RSA-PKCS-OAEP --hash-algorithm SHA256 --mgf MGF1-SHA256 \
  --id 11 -i "$WORK/ct.oaep" -o "$WORK/pt.oaep"
check "RSA-PKCS-OAEP plaintext matches" cmp "$WORK/plain" "$WORK/pt.oaep"
openssl pkeyutl -encrypt -pubin -inkey "$WORK/rsa.pub" -pkeyopt rsa_padding_mode:oaep -in "$WORK/plain" -out "$WORK/ct.oaep1"
check "decrypt RSA-PKCS-OAEP (SHA-1)" "${U[@]}" --decrypt --mechanism RSA-PKCS-OAEP --hash-algorithm SHA-1 --mgf MGF1-SHA1 \
  --id 11 -i "$WORK/ct.oaep1" -o "$WORK/pt.oaep1"
check "RSA-PKCS-OAEP SHA-1 plaintext matches" cmp "$WORK/plain" "$WORK/pt.oaep1"
# (pkcs11-tool 0.23's --encrypt takes secret keys only; RSA C_Encrypt is covered by PKCS11Tests.)

# AES.
head -c 64 /dev/zero > "$WORK/blocks"
check "encrypt AES-CBC" "${U[@]}" --encrypt --mechanism AES-CBC --id 21 --iv 000102030405060708090a0b0c0d0e0f -i "$WORK/blocks" -o "$WORK/ct.cbc"
check "decrypt AES-CBC" "${U[@]}" --decrypt --mechanism AES-CBC --id 21 --iv 000102030405060708090a0b0c0d0e0f -i "$WORK/ct.cbc" -o "$WORK/pt.cbc"
check "AES-CBC round trip" cmp "$WORK/blocks" "$WORK/pt.cbc"
check "encrypt AES-CBC-PAD" "${U[@]}" --encrypt --mechanism AES-CBC-PAD --id 21 --iv 000102030405060708090a0b0c0d0e0f -i "$WORK/plain" -o "$WORK/ct.pad"
check "decrypt AES-CBC-PAD" "${U[@]}" --decrypt --mechanism AES-CBC-PAD --id 21 --iv 000102030405060708090a0b0c0d0e0f -i "$WORK/ct.pad" -o "$WORK/pt.pad"
check "AES-CBC-PAD round trip" cmp "$WORK/plain" "$WORK/pt.pad"

# ECDH derivation agrees with OpenSSL; AES key wrap and unwrap.
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/peer.key" 2>/dev/null
openssl pkey -in "$WORK/peer.key" -pubout -outform DER -out "$WORK/peer.der"
check "derive ECDH1-DERIVE" "${U[@]}" --derive --mechanism ECDH1-DERIVE --id 12 -i "$WORK/peer.der" -o "$WORK/z.module"
openssl pkeyutl -derive -inkey "$WORK/peer.key" -peerkey "$WORK/p256.pub" -out "$WORK/z.openssl"
check "ECDH secret matches OpenSSL's" cmp "$WORK/z.module" "$WORK/z.openssl"
check "keygen AES wrapping key" "${U[@]}" --keygen --private --key-type AES:32 --id 23 --label kek --usage-wrap
check "keygen extractable AES-128" "${U[@]}" --keygen --private --key-type AES:16 --id 24 --label inner --extractable
check "wrap AES-KEY-WRAP" "${U[@]}" --wrap --mechanism AES-KEY-WRAP --id 23 --application-id 24 -o "$WORK/wrapped"
check_out "wrapped key is 24 bytes" '^24$' stat -c %s "$WORK/wrapped"
check_out "unwrap AES-KEY-WRAP" 'Secret Key Object; AES' "${U[@]}" --unwrap --mechanism AES-KEY-WRAP --id 23 \
  -i "$WORK/wrapped" --key-type AES: --application-id 25 --application-label unwrapped
out=$("${U[@]}" --wrap --mechanism AES-KEY-WRAP --id 23 --application-id 22 -o "$WORK/nope" 2>&1 || true)
if grep -q 'CKR_KEY_UNEXTRACTABLE\|CKR_KEY_NOT_WRAPPABLE\|CKR_KEY_FUNCTION_NOT_PERMITTED' <<<"$out"; then ok "an unextractable key is not wrapped"; else bad "an unextractable key is not wrapped" "$out"; fi

# Objects.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/c.key" -subj /CN=written -days 2 \
  -outform DER -out "$WORK/c.der" 2>/dev/null
check_out "write-object certificate" 'Certificate Object' "${U[@]}" --write-object "$WORK/c.der" --type cert --id 31 --label written
check_out "certificate listed" 'label: +written' "${U[@]}" -O --type cert
check "delete-object certificate" "${U[@]}" --delete-object --type cert --id 31
out=$("${U[@]}" -O --type cert 2>&1 || true)
if grep -q 'written' <<<"$out"; then bad "deleted certificate gone" "$out"; else ok "deleted certificate gone"; fi

# pkcs11-tool's own test suites.
check_out "--test --login" 'No errors' "${U[@]}" --test
check_out "--test-ec --login" 'No errors|Key pair generated|verify.*OK' "${U[@]}" --session-rw --test-ec --id 41 --key-type EC:prime256v1
check "--test-fork" "${U[@]}" --test-fork

finish
