#!/usr/bin/env bash
# The CA operator's recipe of docs/tpm.md ("Key attestation: what the CA checks"),
# as a script: tpm2-tools and openssl only, no keyshare code. Run by
# 45-tpm-attest.sh on the bundle `keyshare key attest --csr` writes.
# Usage: attest-recipe.sh DIR NONCE_HEX EK_ROOTS.pem [EK_INTERMEDIATES.pem]
# DIR: the unzipped attestation.zip. Prints one line per step; exit 0 when all pass.
# The credential challenge (step 4) needs the device: it is run by the caller.
set -u
D=${1:?dir} NONCE=${2:?nonce} ROOTS=${3:?roots}
INTER=${4:-}
fail() { echo "REJECT: $*"; exit 1; }
hex() { od -An -tx1 -v | tr -d ' \n'; }
unhex() { printf '%b' "$(sed 's/../\\x&/g')"; }
cd "$D" || fail "no directory $D"

# 1. The EK certificate chains to the TPM manufacturer's CA, and certifies ek.pub.pem.
openssl verify -CAfile "$ROOTS" ${INTER:+-untrusted "$INTER"} ek.crt.pem >/dev/null || fail "ek.crt.pem does not chain"
[ "$(openssl x509 -in ek.crt.pem -pubkey -noout | openssl pkey -pubin -outform DER | hex)" = \
  "$(openssl pkey -pubin -in ek.pub.pem -outform DER | hex)" ] || fail "ek.crt.pem does not certify ek.pub.pem"
echo "1 EK certificate chains and names ek.pub.pem"

# 2. The AK: its Name (nameAlg 000b || SHA-256 of its TPMT_PUBLIC), its attributes, its key.
AKNAME=000b$(tail -c +3 ak.tpm2b_public | openssl dgst -sha256 -binary | hex)
tpm2_print -t TPM2B_PUBLIC ak.tpm2b_public >ak.txt || fail "ak.tpm2b_public does not parse"
grep -A1 '^attributes:' ak.txt | grep -q 'fixedtpm|fixedparent|sensitivedataorigin.*restricted|sign' || fail "the AK is not a restricted signing key born in a TPM"
tpm2_print -t TPM2B_PUBLIC -f pem ak.tpm2b_public >ak.pem || fail "no AK public key"
echo "2 AK Name $AKNAME, restricted signing key"

# 3. The attestation: the AK's signature over certify.attest (TPMT_SIGNATURE: ECDSA 0018, SHA-256 000b, r, s).
S=$(hex <certify.sig)
[ "${S:0:8}" = 0018000b ] || fail "certify.sig is not ECDSA with SHA-256"
RL=$((16#${S:8:4})); R=${S:12:RL*2}; SL=$((16#${S:12+RL*2:4})); SS=${S:16+RL*2:SL*2}
printf 'asn1=SEQUENCE:sig\n[sig]\nr=INTEGER:0x%s\ns=INTEGER:0x%s\n' "$R" "$SS" >sig.cnf
openssl asn1parse -genconf sig.cnf -out sig.der -noout || fail "signature conversion"
openssl dgst -sha256 -verify ak.pem -signature sig.der certify.attest >/dev/null || fail "the AK's signature does not verify"
tpm2_print -t TPMS_ATTEST certify.attest >attest.txt 2>/dev/null  # 5.4 stops (exit 1) at the certify body it cannot print
grep -qx 'magic: ff544347' attest.txt && grep -qx 'type: 8017' attest.txt || fail "not a TPM-generated certify attestation"
grep -qx "extraData: $NONCE" attest.txt || fail "not made for this nonce"
QN=000b$( (printf '\x40\x00\x00\x0b'; printf '%s' "$AKNAME" | unhex) | openssl dgst -sha256 -binary | hex)
grep -qx "qualifiedSigner: $QN" attest.txt || fail "signed by another key than this AK (a primary of the endorsement hierarchy)"
# The certify body ends the structure: TPM2B name, TPM2B qualifiedName (34 bytes each with SHA-256).
KEYNAME=000b$(tail -c +3 key.tpm2b_public | openssl dgst -sha256 -binary | hex)
[ "$(tail -c 72 certify.attest | head -c 36 | hex)" = "0022$KEYNAME" ] || fail "certifies another key"
echo "3 signed by the AK, nonce $NONCE, certifies Name $KEYNAME"

# 4. (with the device) the credential challenge ties the AK to the EK:
#    tpm2_makecredential -T none -u ek.pub.pem -G rsa -s secret -n $AKNAME -o cred
#    device: keyshare tpm activate --token L --credential cred --out answer; cmp answer secret

# 5. The key was born in the TPM and is the request's key.
tpm2_print -t TPM2B_PUBLIC key.tpm2b_public >key.txt || fail "key.tpm2b_public does not parse"
grep -A1 '^attributes:' key.txt | grep -q 'fixedtpm|fixedparent|sensitivedataorigin' || fail "the key was not generated in the TPM"
openssl req -in request.csr.pem -verify -noout 2>/dev/null || fail "the request's signature does not verify"
[ "$(openssl req -in request.csr.pem -pubkey -noout | openssl pkey -pubin -outform DER | hex)" = \
  "$(tpm2_print -t TPM2B_PUBLIC -f pem key.tpm2b_public | openssl pkey -pubin -outform DER | hex)" ] || fail "the request is for another key"
echo "5 key born in the TPM (fixedTPM, fixedParent, sensitiveDataOrigin) = the request's key"
echo ACCEPT
