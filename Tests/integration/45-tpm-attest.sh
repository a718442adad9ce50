#!/usr/bin/env bash
# Key attestation (issue 31, docs/tpm.md "Key attestation") on a real software
# TPM whose endorsement certificate comes from swtpm_setup's local CA (a
# throwaway swtpm-localca configuration in a temporary directory). Keys made in
# a TPM token are attested with a fresh nonce (keyshare key attest) and checked
# by an INDEPENDENT verifier (support/verify_attest.py: Python's cryptography
# and tpm2_print, no keyshare code): magic and type, nonce, certified Name =
# Name(key.tpm2b_public), signer = the AK's qualified name, the AK's signature,
# the key's attributes, key.pub.pem, the EK certificate's chain to the local CA
# and its key = ek.pub.pem. A credential made offline (tpm2_makecredential -T
# none) opens with keyshare tpm activate on that TPM only. Negative: a wrong
# nonce, a tampered byte, an imported key (sensitiveDataOrigin clear), a soft
# token's key, a credential for another AK or on another TPM. Through PKCS #11:
# the CKO_DATA attestation object made at generation (pkcs11-tool, PyKCS11).
# The CA bundle (key attest --csr, the request made with openssl through the module). Every swtpm is stopped by its PID.
# Usage: 45-tpm-attest.sh KEYSHARE MODULE.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/support/swtpm.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VERIFY=(/usr/bin/python3 "$ROOT/Tests/integration/support/verify_attest.py")
for tool in swtpm swtpm_setup tpm2_makecredential tpm2_print; do
  command -v $tool >/dev/null || { echo "$tool missing (make deps)"; echo "0 passed, 1 failed"; exit 1; }
done
new_home
WORK=$(mktemp -d /tmp/keyshare-attest.XXXXXX)
chmod 0711 "$WORK"
export PIN=1234-user SOPIN=9876-so
cleanup() { stop_agent "${XDG_RUNTIME_DIR:-$KS_IT_RUNTIME_DIR}"; tpm_stop "$WORK/tpmA"; tpm_stop "$WORK/tpmB"; rm -rf "$KEYSHARE_HOME" "$WORK"; }
trap cleanup EXIT

# --- a TPM with an endorsement certificate from a throwaway local CA ---------------------------
mkdir -p "$WORK/ca" "$WORK/tpmA" "$WORK/ekcerts"
cat >"$WORK/localca.conf" <<EOF
statedir = $WORK/ca
signingkey = $WORK/ca/signkey.pem
issuercert = $WORK/ca/issuercert.pem
certserial = $WORK/ca/certserial
EOF
printf -- '--platform-manufacturer keyshare-test\n--platform-version 2.1\n--platform-model swtpm\n' >"$WORK/localca.options"
cat >"$WORK/swtpm_setup.conf" <<EOF
create_certs_tool = /usr/bin/swtpm_localca
create_certs_tool_config = $WORK/localca.conf
create_certs_tool_options = $WORK/localca.options
active_pcr_banks = sha256
EOF
check "swtpm_setup: EK and platform certificates from the local CA" swtpm_setup --tpm2 --tpmstate "$WORK/tpmA" \
  --create-ek-cert --create-platform-cert --config "$WORK/swtpm_setup.conf" --write-ek-cert-files "$WORK/ekcerts" --logfile "$WORK/setup.log"
CAROOT=$WORK/ca/swtpm-localca-rootca-cert.pem CAISSUER=$WORK/ca/issuercert.pem
PA=$(tpm_start_free "$WORK/tpmA") || { bad "swtpm starts"; finish; exit 1; }
export KEYSHARE_TCTI=swtpm:host=127.0.0.1,port=$PA
TPM2TOOLS_TCTI=$KEYSHARE_TCTI tpm2_dictionarylockout --clear-lockout >/dev/null 2>&1

# --- keys made in the TPM, attested with a fresh nonce ------------------------------------------
check "token create --tpm" "$KS" token create --label T --tpm --pin-source env:PIN --so-pin-source env:SOPIN
check "key generate ec in the TPM" "$KS" key generate --type ec --label k1 --tag k1 --token T --pin-source env:PIN
check "key generate rsa in the TPM" "$KS" key generate --type rsa --label k2 --tag k2 --token T --pin-source env:PIN
NONCE=$(openssl rand -hex 32)
check_out "key attest (EC): the TPM says born here, EK certificate read" "generated in this TPM.*" \
  "$KS" key attest --token T --tag k1 --nonce "$NONCE" --out "$WORK/a1" --pin-source env:PIN
for f in certify.attest certify.sig key.tpm2b_public ak.tpm2b_public key.pub.pem ak.pub.pem ek.pub.pem ek.crt.pem; do
  [ -s "$WORK/a1/$f" ] || missing="${missing:-} $f"
done
[ -z "${missing:-}" ] && ok "key attest wrote the eight files" || bad "key attest wrote the eight files" "missing:$missing"
# The independent verifier: one check line each.
out=$("${VERIFY[@]}" "$WORK/a1" --nonce "$NONCE" --root "$CAROOT" --issuer "$CAISSUER" 2>&1); rc=$?
for c in parse magic type nonce "certified name" "signer name" "ak attributes" signature "key attributes" "key pem" "ak pem" "ek chain" "ek pem"; do
  grep -qx "ok $c" <<<"$out" && ok "verifier (EC key): $c" || bad "verifier (EC key): $c" "$out"
done
[ "$rc" = 0 ] && ok "verifier (EC key): exit 0" || bad "verifier (EC key): exit 0" "$out"
# --json: the Names it prints are the ones a verifier computes from the files (openssl alone).
name_of() { printf '000b%s' "$(tail -c +3 "$1" | openssl dgst -sha256 -binary | od -An -tx1 -v | tr -d ' \n')"; }
json=$("$KS" key attest --token T --tag k1 --nonce "$NONCE" --out "$WORK/a1" --force --json --pin-source env:PIN 2>&1)
grep -q "\"keyName\" : \"$(name_of "$WORK/a1/key.tpm2b_public")\"" <<<"$json" && grep -q "\"akName\" : \"$(name_of "$WORK/a1/ak.tpm2b_public")\"" <<<"$json" \
  && ok "--json: keyName and akName = Names computed with openssl" || bad "--json Names" "$json"
check_fail "an existing output file is refused without --force" "already exists" \
  "$KS" key attest --token T --tag k1 --nonce "$NONCE" --out "$WORK/a1" --pin-source env:PIN
NONCE2=$(openssl rand -hex 16)
check "key attest (RSA-2048)" "$KS" key attest --token T --tag k2 --nonce "$NONCE2" --out "$WORK/a2" --pin-source env:PIN
out=$("${VERIFY[@]}" "$WORK/a2" --nonce "$NONCE2" --root "$CAROOT" --issuer "$CAISSUER" 2>&1)
[ $? = 0 ] && ok "verifier (RSA key): all $(grep -c '^ok ' <<<"$out") checks" || bad "verifier (RSA key)" "$out"
check "the AK is the token's: the same AK for both keys" cmp "$WORK/a1/ak.tpm2b_public" "$WORK/a2/ak.tpm2b_public"

# --- negative: wrong nonce, tampered byte ------------------------------------------------------
out=$("${VERIFY[@]}" "$WORK/a1" --nonce "$(openssl rand -hex 32)" 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q "^FAIL nonce" <<<"$out" && ok "a wrong nonce: the verifier refuses (FAIL nonce)" || bad "wrong nonce" "$out"
cp -r "$WORK/a1" "$WORK/tampered"
# Byte 80: inside clockInfo (after magic, type, qualifiedSigner and a 32-byte extraData), so the parse still succeeds.
b=$(od -An -tu1 -j80 -N1 "$WORK/tampered/certify.attest" | tr -d ' ')
printf "$(printf '\\%03o' $(((b ^ 1) & 255)))" | dd of="$WORK/tampered/certify.attest" bs=1 seek=80 conv=notrunc 2>/dev/null
out=$("${VERIFY[@]}" "$WORK/tampered" --nonce "$NONCE" 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q "^FAIL signature" <<<"$out" && grep -qx "ok nonce" <<<"$out" \
  && ok "one tampered byte of certify.attest: the AK's signature fails" || bad "tampered byte" "$out"

# --- the credential challenge: only this TPM opens it -------------------------------------------
head -c 32 /dev/urandom >"$WORK/secret"
AKNAME=$(name_of "$WORK/a1/ak.tpm2b_public")
TPM2TOOLS_TCTI= tpm2_makecredential -T none -u "$WORK/a1/ek.pub.pem" -G rsa -s "$WORK/secret" -n "$AKNAME" -o "$WORK/cred" >/dev/null 2>&1
[ -s "$WORK/cred" ] && ok "tpm2_makecredential -T none (offline) made a challenge" || bad "tpm2_makecredential"
check_out "tpm activate opens it" "credential opened" "$KS" tpm activate --token T --credential "$WORK/cred" --out "$WORK/got"
check "the secret is the verifier's" cmp "$WORK/secret" "$WORK/got"
check_out "the secret's file is mode 0600" "^600$" stat -c %a "$WORK/got"
"$KS" tpm activate --token T --credential "$WORK/cred" --stdout >"$WORK/got2" 2>/dev/null
check "--stdout gives the same secret" cmp "$WORK/secret" "$WORK/got2"
check_fail "tpm activate needs --out or --stdout" "--out FILE or --stdout" "$KS" tpm activate --token T --credential "$WORK/cred"
check_fail "tpm activate refuses an existing --out" "already exists" "$KS" tpm activate --token T --credential "$WORK/cred" --out "$WORK/got"
TPM2TOOLS_TCTI= tpm2_makecredential -T none -u "$WORK/a1/ek.pub.pem" -G rsa -s "$WORK/secret" -n "$(name_of "$WORK/a1/key.tpm2b_public")" -o "$WORK/cred-other" >/dev/null 2>&1
check_fail "a credential for another object's Name does not open" "cannot open the credential" \
  "$KS" tpm activate --token T --credential "$WORK/cred-other" --out "$WORK/got-other"
[ ! -e "$WORK/got-other" ] && ok "... and writes no file" || bad "a failed activation wrote a file"
head -c 40 /dev/urandom >"$WORK/junk"
check_fail "a file that is no credential: one line" "not a tpm2_makecredential file" "$KS" tpm activate --token T --credential "$WORK/junk" --stdout

# --- imported key: the TPM does not claim it was born there --------------------------------------
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/imp.key" 2>/dev/null
check "key import --tpm (P-256)" "$KS" key import --tpm --token T --label ie "$WORK/imp.key" --pin-source env:PIN
check_out "key attest of the imported key says NOT generated here" "NOT generated in this TPM" \
  "$KS" key attest --token T --key ie --nonce "$NONCE" --out "$WORK/ai" --pin-source env:PIN
out=$("${VERIFY[@]}" "$WORK/ai" --nonce "$NONCE" --imported 2>&1)
[ $? = 0 ] && grep -qx "ok key attributes" <<<"$out" && ok "verifier: the imported key's attestation is genuine, sensitiveDataOrigin clear" || bad "imported key verifies" "$out"
out=$("${VERIFY[@]}" "$WORK/ai" --nonce "$NONCE" 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q "^FAIL key attributes" <<<"$out" && ok "verifier: the imported key is refused as born-in-TPM" || bad "imported key refused" "$out"
openssl pkey -in "$WORK/imp.key" -pubout -out "$WORK/imp.pub" 2>/dev/null
check "key.pub.pem of the imported key is the file's public key" cmp "$WORK/imp.pub" "$WORK/ai/key.pub.pem"

# --- a soft token's key: nothing to attest; bad input ----------------------------------------------
check "soft token" "$KS" token create --label S --pin-source env:PIN --so-pin-source env:SOPIN
check "soft key" "$KS" key generate --type ec --label s1 --tag s1 --token S --pin-source env:PIN
check_fail "key attest on a soft token: refused, one clear line" "not a TPM token.*nothing a TPM can attest" \
  "$KS" key attest --token S --tag s1 --nonce "$NONCE" --out "$WORK/as" --pin-source env:PIN
[ ! -e "$WORK/as" ] && ok "... and leaves no output directory" || bad "a refused attest left $WORK/as"
check_fail "a nonce that is not hex" "--nonce must be 8 to 64 bytes" "$KS" key attest --token T --tag k1 --nonce xyz --out "$WORK/ax" --pin-source env:PIN
check_fail "a nonce too short" "--nonce must be 8 to 64 bytes" "$KS" key attest --token T --tag k1 --nonce 0011 --out "$WORK/ax" --pin-source env:PIN
check_fail "no such key" "no private key with tag nope" "$KS" key attest --token T --tag nope --nonce "$NONCE" --out "$WORK/ax" --pin-source env:PIN

# --- through PKCS #11: the attestation made at generation (CKO_DATA) ------------------------------
P=(pkcs11-tool --module "$MODULE")
check "C_GenerateKeyPair on the TPM token (pkcs11-tool)" "${P[@]}" --token-label T --login --pin env:PIN --keypairgen --key-type EC:prime256v1 --label p1 --id 5031
objs=$("${P[@]}" --token-label T -O --type data 2>&1)
n=$(grep -c "application: *'keyshare attestation'" <<<"$objs")
[ "$n" = 3 ] && ok "three CKO_DATA attestation objects: k1, k2, p1 (none for the imported key)" || bad "attestation objects" "$objs"
# CKA_ID of each = its key's, the value verifies (PyKCS11, a second PKCS #11 consumer).
cat >"$WORK/dataobj.py" <<'EOF'
import sys, PyKCS11
lib = PyKCS11.PyKCS11Lib(); lib.load(sys.argv[1])
slot = [s for s in lib.getSlotList(tokenPresent=True) if lib.getTokenInfo(s).label.strip() == "T"][0]
s = lib.openSession(slot)
for label, out in zip(sys.argv[2::2], sys.argv[3::2]):
    d = s.findObjects([(PyKCS11.CKA_CLASS, PyKCS11.CKO_DATA), (PyKCS11.CKA_LABEL, label)])
    k = s.findObjects([(PyKCS11.CKA_CLASS, PyKCS11.CKO_PUBLIC_KEY), (PyKCS11.CKA_LABEL, label)])
    app, cid, value = s.getAttributeValue(d[0], [PyKCS11.CKA_APPLICATION, PyKCS11.CKA_ID, PyKCS11.CKA_VALUE])
    kid = s.getAttributeValue(k[0], [PyKCS11.CKA_ID])[0]
    app = app if isinstance(app, str) else bytes(app).decode()
    print(label, app, "id-match" if bytes(cid) == bytes(kid) and cid else "id-mismatch")
    open(out, "wb").write(bytes(value))
EOF
out=$(/usr/bin/python3 "$WORK/dataobj.py" "$MODULE" k1 "$WORK/d1" p1 "$WORK/dp1" 2>&1)
grep -qx "k1 keyshare attestation id-match" <<<"$out" && grep -qx "p1 keyshare attestation id-match" <<<"$out" \
  && ok "CKO_DATA: CKA_APPLICATION 'keyshare attestation', CKA_ID = the key's (key generate and C_GenerateKeyPair)" || bad "CKO_DATA attributes" "$out"
out=$("${VERIFY[@]}" --container "$WORK/d1" --key-pem "$WORK/a1/key.pub.pem" 2>&1)
[ $? = 0 ] && grep -qx "ok signature" <<<"$out" && grep -qx "ok certified name" <<<"$out" \
  && ok "verifier: the generation-time attestation of k1 ($(grep -c '^ok ' <<<"$out") checks)" || bad "generation-time attestation" "$out"
"${P[@]}" --token-label T --read-object --type data --application-label "keyshare attestation" --label k1 -o "$WORK/d1-tool" >/dev/null 2>&1
check "pkcs11-tool --read-object reads the same value" cmp "$WORK/d1" "$WORK/d1-tool"
"${P[@]}" --token-label T --read-object --type pubkey --id 5031 -o "$WORK/p1.der" >/dev/null 2>&1 || ec_pubkey_der "$WORK/p1.der" "${P[@]}" --token-label T --id 5031
openssl pkey -pubin -inform DER -in "$WORK/p1.der" -out "$WORK/p1.pem" 2>/dev/null
out=$("${VERIFY[@]}" --container "$WORK/dp1" --key-pem "$WORK/p1.pem" 2>&1)
[ $? = 0 ] && ok "verifier: the attestation of the C_GenerateKeyPair key" || bad "C_GenerateKeyPair attestation" "$out"

# --- the CA bundle: a request made through the module (OpenSSL + libp11) and the attestation ---------
URI=$("$KS" list --token T --private --pin-source env:PIN --json 2>/dev/null | /usr/bin/python3 -c 'import json,sys
print(next(i["uri"] for i in json.load(sys.stdin) if i.get("label") == "k1" and i.get("itemClass") == "private-key"))')
env PKCS11_MODULE_PATH="$MODULE" openssl req -new -engine pkcs11 -keyform engine -key "$URI;pin-source=file:/dev/fd/3" \
  -subj /CN=attested -out "$WORK/req.pem" 3< <(printf '%s' "$PIN") >/dev/null 2>&1
check "openssl req through the module: a request signed by the TPM key" openssl req -in "$WORK/req.pem" -verify -noout
check_out "key attest --csr: the request joins the attestation" "attested key k1" \
  "$KS" key attest --token T --tag k1 --nonce "$NONCE" --out "$WORK/ca-bundle" --csr "$WORK/req.pem" --pin-source env:PIN
mkdir "$WORK/bundle" && (cd "$WORK/bundle" && unzip -q "$WORK/ca-bundle/attestation.zip")
cmp -s "$WORK/bundle/request.csr.pem" "$WORK/req.pem" && cmp -s "$WORK/bundle/certify.attest" "$WORK/ca-bundle/certify.attest" \
  && [ -s "$WORK/bundle/ek.crt.pem" ] && ok "attestation.zip holds the request and the attestation files" || bad "bundle contents" "$(ls "$WORK/bundle")"
[ "$(openssl req -in "$WORK/bundle/request.csr.pem" -pubkey -noout | openssl pkey -pubin -outform DER 2>/dev/null | od -An -tx1 | tr -d ' \n')" \
  = "$(openssl pkey -pubin -in "$WORK/bundle/key.pub.pem" -outform DER | od -An -tx1 | tr -d ' \n')" ] \
  && ok "the CA's check: the request's key is the attested key" || bad "request key = attested key"
out=$("${VERIFY[@]}" "$WORK/bundle" --nonce "$NONCE" --root "$CAROOT" --issuer "$CAISSUER" 2>&1)
[ $? = 0 ] && ok "verifier: the unzipped bundle ($(grep -c '^ok ' <<<"$out") checks)" || bad "bundle verifies" "$out"
RECIPE=(bash "$ROOT/Tests/integration/support/attest-recipe.sh")
# rejects NAME REGEX CMD...: CMD exits non-zero and its output matches REGEX.
rejects() { local name=$1 re=$2 out rc; shift 2; out=$("$@" 2>&1) && rc=0 || rc=$?; [ "$rc" != 0 ] && grep -Eq -- "$re" <<<"$out" && ok "$name" || bad "$name" "exit $rc: $out"; }
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/other-ca.key" -subj /CN=other-ca -days 2 -out "$WORK/other-ca.pem" 2>/dev/null
check_out "docs/tpm.md's CA recipe (tpm2-tools + openssl only) accepts the bundle" "^ACCEPT$" "${RECIPE[@]}" "$WORK/bundle" "$NONCE" "$CAROOT" "$CAISSUER"
cp -r "$WORK/bundle" "$WORK/bundle-t"
b=$(od -An -tu1 -j80 -N1 "$WORK/bundle-t/certify.attest" | tr -d ' ')
printf "$(printf '\\%03o' $(((b ^ 1) & 255)))" | dd of="$WORK/bundle-t/certify.attest" bs=1 seek=80 conv=notrunc 2>/dev/null
rejects "... and rejects it with one byte of certify.attest changed" "REJECT: the AK's signature" "${RECIPE[@]}" "$WORK/bundle-t" "$NONCE" "$CAROOT" "$CAISSUER"
rejects "... and for another nonce" "REJECT: not made for this nonce" "${RECIPE[@]}" "$WORK/bundle" "$(openssl rand -hex 32)" "$CAROOT" "$CAISSUER"
rejects "... and an EK certificate from another CA" "REJECT: ek.crt.pem does not chain" "${RECIPE[@]}" "$WORK/bundle" "$NONCE" "$WORK/other-ca.pem"
check_fail "key attest --csr with another key's request is refused" "not the key being attested" \
  "$KS" key attest --token T --tag k2 --nonce "$NONCE" --out "$WORK/ca-bundle2" --csr "$WORK/req.pem" --pin-source env:PIN

# --- another TPM: the credential does not open; a TPM without an EK certificate ------------------
PB=$(tpm_start_free "$WORK/tpmB") || bad "second swtpm starts"
KEYSHARE_TCTI=swtpm:host=127.0.0.1,port=$PB check_fail "another TPM cannot open the credential" "cannot open the credential" \
  "$KS" tpm activate --token T --credential "$WORK/cred" --out "$WORK/got-b"
HOMEA=$KEYSHARE_HOME
export KEYSHARE_HOME=$WORK/homeB KEYSHARE_TCTI=swtpm:host=127.0.0.1,port=$PB
mkdir -m 0700 "$KEYSHARE_HOME"
"$KS" token create --label TB --tpm --pin-source env:PIN --so-pin-source env:SOPIN >/dev/null 2>&1
"$KS" key generate --type ec --label b1 --tag b1 --token TB --pin-source env:PIN >/dev/null 2>&1
check_out "a TPM without an endorsement certificate: said plainly" "holds no endorsement certificate" \
  "$KS" key attest --token TB --tag b1 --nonce "$NONCE" --out "$WORK/ab" --pin-source env:PIN
[ ! -e "$WORK/ab/ek.crt.pem" ] && [ -s "$WORK/ab/ek.pub.pem" ] && ok "... no ek.crt.pem, ek.pub.pem written" || bad "no EK certificate files"
out=$("${VERIFY[@]}" "$WORK/ab" --nonce "$NONCE" 2>&1)
[ $? = 0 ] && ok "verifier: TPM B's attestation is genuine (without an EK chain)" || bad "TPM B attestation" "$out"
export KEYSHARE_HOME=$HOMEA
finish
