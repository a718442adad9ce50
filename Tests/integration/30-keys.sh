#!/usr/bin/env bash
# keyshare key: generate, encrypt/decrypt and sign/verify round trips for
# RSA (PKCS #1, OAEP, PSS), ECDSA and Ed25519, each cross-checked both ways
# with the openssl CLI; the error messages; and access groups (two groups,
# each consumer sees only its own keys), through the CLI and the module.
set -u
KS=${1:?keyshare binary}
MOD=${2:-}
source "$(dirname "$0")/lib.sh"
new_home
export PIN=1234-user SOPIN=9876-so
W=$(mktemp -d)
ks() { "$KS" "$@"; }
P=(--pin-source env:PIN)

check_out "token create" "created token" ks token create --label keys --pin-source env:PIN --so-pin-source env:SOPIN
check_out "generate RSA 2048" "generated rsa 2048-bit" ks key generate --type rsa --bits 2048 --label rsa-key --tag rsa1 "${P[@]}"
check_out "generate EC P-256" "generated ec 256-bit" ks key generate --type ec --curve P-256 --label ec-key --tag ec1 "${P[@]}"
check_out "generate EC P-384" "generated ec 384-bit" ks key generate --type ec --curve P-384 --label ec384 --tag ec384 "${P[@]}"
check_out "generate Ed25519" "generated ed25519" ks key generate --type ed25519 --label ed-key --tag ed1 "${P[@]}"
check_out "generate sign-only RSA" "generated rsa" ks key generate --type rsa --label signer --tag signonly --usage sign "${P[@]}"
check_fail "duplicate tag" "already exists \(duplicate item\)" ks key generate --type ec --label again --tag ec1 "${P[@]}"
check_fail "curve on RSA" "curve" ks key generate --type rsa --curve P-256 --label x --tag x "${P[@]}"
check_out "both keys are permanent items (private)" "private-key +rsa-key" ks list "${P[@]}"
check_out "both keys are permanent items (public)" "public-key +rsa-key" ks list "${P[@]}"
check_out "key list (public, no PIN)" "public-key +rsa-key +rsa1 +rsa +2048" ks key list
check_out "key list json" '"tag" : "ed1"' ks key list --json --private "${P[@]}"

head -c 100 /dev/urandom >"$W/msg"
head -c 5000 /dev/urandom >"$W/doc"
for t in rsa1 ec1 ec384 ed1; do ks key public --tag "$t" >"$W/$t.pub"; done
check_out "public key PEM is SPKI" "BEGIN PUBLIC KEY" cat "$W/rsa1.pub"
check_out "openssl reads the public key" "Public-Key: \(2048 bit\)" openssl pkey -pubin -in "$W/rsa1.pub" -noout -text

# Encryption: keyshare round trip, openssl -> keyshare, keyshare -> openssl (with the key only keyshare holds: via decrypt).
for pad in pkcs1 oaep-sha256; do
  if [ "$pad" = pkcs1 ]; then OPT=(-pkeyopt rsa_padding_mode:pkcs1); else OPT=(-pkeyopt rsa_padding_mode:oaep -pkeyopt rsa_oaep_md:sha256 -pkeyopt rsa_mgf1_md:sha256); fi
  ks key encrypt --tag rsa1 --padding "$pad" "$W/msg" "$W/ct.$pad" && ks key decrypt --tag rsa1 --padding "$pad" "$W/ct.$pad" "$W/pt.$pad" "${P[@]}" \
    && cmp -s "$W/msg" "$W/pt.$pad" && ok "RSA $pad round trip" || bad "RSA $pad round trip"
  openssl pkeyutl -encrypt -pubin -inkey "$W/rsa1.pub" "${OPT[@]}" -in "$W/msg" -out "$W/oct.$pad" \
    && ks key decrypt --tag rsa1 --padding "$pad" "$W/oct.$pad" "$W/opt.$pad" "${P[@]}" && cmp -s "$W/msg" "$W/opt.$pad" \
    && ok "RSA $pad: openssl encrypts, keyshare decrypts" || bad "RSA $pad: openssl encrypts, keyshare decrypts"
done
head -c 300 /dev/zero >"$W/big"
check_fail "message too long (PKCS #1)" "message too long: 300 bytes.*2048-bit RSA key with PKCS #1 v1.5 padding takes at most 245" \
  ks key encrypt --tag rsa1 --padding pkcs1 "$W/big" "$W/x"
check_fail "message too long (OAEP)" "at most 190" ks key encrypt --tag rsa1 --padding oaep-sha256 "$W/big" "$W/x"
check_fail "wrong padding" "decryption failed: .*OAEP-SHA-256 padding" ks key decrypt --tag rsa1 --padding oaep-sha256 "$W/ct.pkcs1" "$W/x" "${P[@]}"
check_fail "unknown padding" "padding" ks key encrypt --tag rsa1 --padding oaep-md5 "$W/msg" "$W/x"
check_fail "EC key cannot encrypt" "unsupported: ec keys do not encrypt" ks key encrypt --tag ec1 "$W/msg" "$W/x"
check_fail "sign-only key refuses to encrypt" "operation not allowed: .*not allowed to encrypt" ks key encrypt --tag signonly "$W/msg" "$W/x"
check_fail "private key needs the PIN" "user pin.*give a source option" ks key decrypt --tag rsa1 "$W/ct.pkcs1" "$W/x" </dev/null
check_fail "no such tag" "no public key with tag nope" ks key public --tag nope

# Signatures: keyshare signs (the private key never leaves it), openssl verifies with the exported public key.
sign_case() {  # NAME TAG ALG OPENSSL-VERIFY-ARGS...
  local name=$1 tag=$2 alg=$3; shift 3
  if ks key sign --tag "$tag" --algorithm "$alg" "$W/doc" "$W/$alg.$tag.sig" "${P[@]}" >/dev/null 2>&1; then ok "$name: keyshare signs"; else bad "$name: keyshare signs"; return; fi
  check_out "$name: keyshare verifies" "signature valid" ks key verify --tag "$tag" --algorithm "$alg" "$W/doc" "$W/$alg.$tag.sig"
  check_out "$name: openssl verifies" "Verified OK|Verified Successfully" "$@" -sigfile "$W/$alg.$tag.sig"
  cp "$W/doc" "$W/doc.t"; printf 'x' >>"$W/doc.t"
  check_fail "$name: altered message fails" "signature invalid" ks key verify --tag "$tag" --algorithm "$alg" "$W/doc.t" "$W/$alg.$tag.sig"
}
sign_case "RSA PKCS#1 SHA-256" rsa1 pkcs1-sha256 openssl pkeyutl -verify -pubin -inkey "$W/rsa1.pub" -rawin -digest sha256 -in "$W/doc"
sign_case "RSA PSS SHA-256" rsa1 pss-sha256 openssl pkeyutl -verify -pubin -inkey "$W/rsa1.pub" -rawin -digest sha256 \
  -pkeyopt rsa_padding_mode:pss -pkeyopt rsa_pss_saltlen:32 -pkeyopt rsa_mgf1_md:sha256 -in "$W/doc"
sign_case "ECDSA P-256 SHA-256" ec1 ecdsa-sha256 openssl pkeyutl -verify -pubin -inkey "$W/ec1.pub" -rawin -digest sha256 -in "$W/doc"
sign_case "ECDSA P-384 SHA-384" ec384 ecdsa-sha384 openssl pkeyutl -verify -pubin -inkey "$W/ec384.pub" -rawin -digest sha384 -in "$W/doc"
sign_case "Ed25519" ed1 ed25519 openssl pkeyutl -verify -pubin -inkey "$W/ed1.pub" -rawin -in "$W/doc"
openssl dgst -sha256 -verify "$W/ec1.pub" -signature "$W/ecdsa-sha256.ec1.sig" "$W/doc" >/dev/null 2>&1 \
  && ok "openssl dgst agrees (ECDSA DER signature)" || bad "openssl dgst agrees (ECDSA DER signature)"
check_fail "algorithm does not fit the key" "unsupported: the signature algorithm does not fit a ed25519 key" \
  ks key sign --tag ed1 --algorithm pkcs1-sha256 "$W/doc" "$W/x" "${P[@]}"
check_fail "encrypt-less key cannot decrypt" "not allowed to decrypt" ks key decrypt --tag signonly --padding pkcs1 "$W/ct.pkcs1" "$W/x" "${P[@]}"

# Access groups: two consumers, each sees only its own group's keys (absent, not denied).
check_out "generate in group A" "generated" ks key generate --type ec --label a-key --tag team-a --access-group com.example.a "${P[@]}"
check_out "generate in group B" "generated" ks key generate --type ec --label b-key --tag team-b --access-group com.example.b "${P[@]}"
check_out "A sees its key" "a-key.*com.example.a" ks key list --access-group com.example.a
out=$(ks key list --access-group com.example.a 2>&1)
grep -q "b-key\|rsa-key" <<<"$out" && bad "A sees nothing else" "$out" || ok "A sees nothing else"
check_out "B sees its key" "b-key.*com.example.b" ks key list --access-group com.example.b
out=$(KEYSHARE_ACCESS_GROUPS=com.example.b ks key list 2>&1)
grep -q "a-key" <<<"$out" && bad "KEYSHARE_ACCESS_GROUPS binds the CLI" "$out" || ok "KEYSHARE_ACCESS_GROUPS binds the CLI"
check_fail "A cannot find B's key (absent)" "no public key with tag team-b" ks key public --tag team-b --access-group com.example.a
check_fail "A cannot sign with B's key" "no private key with tag team-b" ks key sign --tag team-b "$W/doc" "$W/x" --access-group com.example.a "${P[@]}"
check "B signs with its key" ks key sign --tag team-b "$W/doc" "$W/b.sig" --access-group com.example.b "${P[@]}"
check_out "the owner (no group) sees A's key" "a-key" ks key list
check_out "the owner (no group) sees B's key" "b-key" ks key list

# The module: KEYSHARE_ACCESS_GROUPS confines what pkcs11-tool sees.
objs=$(KEYSHARE_ACCESS_GROUPS=com.example.a pkcs11-tool --module "$MOD" -O 2>&1)
if grep -q "a-key" <<<"$objs" && ! grep -q "b-key" <<<"$objs"; then ok "module: group A sees only its objects"; else bad "module: group A sees only its objects" "$objs"; fi
objs=$(KEYSHARE_ACCESS_GROUPS=com.example.b pkcs11-tool --module "$MOD" -O 2>&1)
if grep -q "b-key" <<<"$objs" && ! grep -q "a-key" <<<"$objs"; then ok "module: group B sees only its objects"; else bad "module: group B sees only its objects" "$objs"; fi
objs=$(pkcs11-tool --module "$MOD" -O 2>&1)
if grep -q "b-key" <<<"$objs" && grep -q "a-key" <<<"$objs"; then ok "module: unbound sees both groups"; else bad "module: unbound sees both groups" "$objs"; fi
rm -rf "$W"
finish
