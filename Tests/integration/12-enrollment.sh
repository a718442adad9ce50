#!/usr/bin/env bash
# Derived-credential enrolment end to end, the way PKI people do it (issue 14):
# a key pair made in the token (`keyshare key generate`, and `pkcs11-tool
# --keypairgen --id 01`), a PKCS #10 request made by `keyshare csr`, by
# `openssl req` through the libp11 engine and by `certtool --generate-request`
# with a pkcs11: URI, each checked by `openssl req -verify` and issued by an
# openssl CA made here; the certificate comes back through `keyshare import`
# or `pkcs11-tool --write-object` (C_CreateObject without CKA_ID), and the
# result is one identity for keyshare export, the share tree, NSS (certutil
# -K/-L through modutil) and pkcs11-tool -O (certificate and key share CKA_ID).
# No PIN on any command line: pkcs11-tool --pin env:PIN, libp11 pin-source on
# fd 3, GnuTLS's GNUTLS_PIN, NSS's -f file, keyshare's --pin-source env:.
# Usage: 12-enrollment.sh KEYSHARE MODULE. Ends with "N passed, M failed".
set -u
KS=$(cd "$(dirname "${1:?keyshare binary}")" && pwd)/$(basename "$1")
MODULE=$(realpath "${2:?module path}")
. "$(dirname "$0")/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-enrol.XXXXXX)
cleanup() { rm -rf "$WORK" "$KEYSHARE_HOME"; }
trap cleanup EXIT
export PIN=2468-user SOPIN=1357-so
ks() { "$KS" "$@"; }
P=(pkcs11-tool --module "$MODULE" --token-label enrol --login --pin env:PIN)
ENGINE=/usr/lib/x86_64-linux-gnu/engines-3/pkcs11.so

check_out "token for enrolment" "created" ks token create --label enrol --pin-source env:PIN --so-pin-source env:SOPIN
TOKEN_URI=$(ks token list --json | python3 -c 'import json,sys; print(next(t["uri"] for t in json.load(sys.stdin) if t["label"]=="enrol"))')

# The issuing CA (what the enrolment service runs), and how it issues.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/ca.key" -subj "/CN=Enrolment Test CA" \
  -days 2 -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign -out "$WORK/ca.pem" 2>/dev/null
printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth,emailProtection\n' > "$WORK/ext.cnf"
serial=100
issue() {  # issue CSR CERT: the CA signs, keeping the request's subjectAltName
  serial=$((serial + 1))
  openssl x509 -req -in "$1" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -set_serial "$serial" -days 2 \
    -extfile "$WORK/ext.cnf" -copy_extensions copy -out "$2" 2>/dev/null
}
verify_req() { openssl req -in "$1" -verify -noout 2>&1 | grep -q "verify OK"; }
# ids_of LABEL: the CKA_IDs pkcs11-tool -O shows for the certificate and the private key labelled LABEL.
ids_of() {
  "${P[@]}" -O 2>/dev/null | awk -v want="$1" '
    /^[A-Za-z ]+Object/ { kind = ($0 ~ /^Certificate/) ? "cert" : ($0 ~ /^Private/) ? "priv" : "pub"; label = "" }
    /^  label:/ { sub(/^  label: +/, ""); label = $0 }
    /^  ID:/ { if (label == want) { sub(/^  ID: +/, ""); print kind "=" $0 } }' | sort | tr '\n' ' '
}
sha256_label() { openssl x509 -in "$1" -outform DER | openssl dgst -sha256 -r | awk '{print toupper($1)}'; }

# --- 1. keyshare all the way: key generate -> csr -> CA -> import ----------
check_out "keyshare key generate (extractable, for sharing)" "generated" \
  ks key generate --type ec --curve P-256 --label alice --tag alice --extractable --pin-source env:PIN
check "keyshare csr with email and UPN subjectAltNames" ks csr --tag alice --subject "/CN=Alice Derived/O=Example" \
  --san email:alice@example.com --san upn:alice@EXAMPLE.MIL --out "$WORK/alice.csr" --pin-source env:PIN
verify_req "$WORK/alice.csr" && ok "openssl req -verify: keyshare csr" || bad "openssl req -verify: keyshare csr" "$(openssl req -in "$WORK/alice.csr" -verify -noout 2>&1)"
check_out "the request carries the UPN otherName" 'UPN::?alice@EXAMPLE.MIL' openssl req -in "$WORK/alice.csr" -noout -text
ALICE_ID=$(ks key list --private --token enrol --pin-source env:PIN --json | python3 -c 'import json,sys; print(next(k["id"] for k in json.load(sys.stdin) if k["tag"]=="alice"))')
issue "$WORK/alice.csr" "$WORK/alice.pem" && ok "CA issues alice" || bad "CA issues alice"
check_out "keyshare import joins the certificate to the generated key" "imported certificate \"alice\" \\(CKA_ID $ALICE_ID\\)" \
  ks import "$WORK/alice.pem" --pin-source env:PIN
[ "$(ids_of alice)" = "cert=${ALICE_ID,,} priv=${ALICE_ID,,} pub=${ALICE_ID,,} " ] && ok "pkcs11-tool -O: alice's certificate and key share CKA_ID" \
  || bad "pkcs11-tool -O: alice's certificate and key share CKA_ID" "$(ids_of alice)"
check_out "keyshare export sees the identity" "exported alice" ks export alice --out "$WORK/alice.p12" --pin-source env:PIN
SHARED_PW=$(ks password --stdout --pin-source env:PIN); export SHARED_PW
check_out "the export holds key and certificate" "CN ?= ?Alice Derived" openssl pkcs12 -in "$WORK/alice.p12" -passin env:SHARED_PW -nokeys -clcerts
check_out "the share tree lists the identity (by its key-sharing label, the SHA-256)" "$(sha256_label "$WORK/alice.pem")" ks share list --pin-source env:PIN

# --- 2. pkcs11-tool --keypairgen --id 01, openssl req through the engine ---
check "pkcs11-tool --keypairgen --id 01 (RSA)" "${P[@]}" --keypairgen --key-type rsa:2048 --id 01 --label bob --extractable
if [ -e "$ENGINE" ]; then
  env PKCS11_MODULE_PATH="$MODULE" openssl req -new -engine pkcs11 -keyform engine \
    -key "$TOKEN_URI;id=%01;type=private;pin-source=file:/dev/fd/3" -subj "/CN=Bob Derived/O=Example" \
    -addext "subjectAltName=email:bob@example.com" -out "$WORK/bob.csr" 3< <(printf '%s' "$PIN") >/dev/null 2>&1
  verify_req "$WORK/bob.csr" && ok "openssl req -verify: libp11 engine request" || bad "openssl req -verify: libp11 engine request" "$(ls -l "$WORK")"
else
  bad "libp11 engine installed ($ENGINE)"
fi
issue "$WORK/bob.csr" "$WORK/bob.pem" && ok "CA issues bob" || bad "CA issues bob"
check_out "keyshare import: CKA_ID 01 and the key's label" 'imported certificate "bob" \(CKA_ID 01\)' ks import "$WORK/bob.pem" --pin-source env:PIN
[ "$(ids_of bob)" = "cert=01 priv=01 pub=01 " ] && ok "pkcs11-tool -O: bob's certificate and key share CKA_ID 01" || bad "pkcs11-tool -O: bob's certificate and key share CKA_ID 01" "$(ids_of bob)"
check_out "keyshare export sees bob" "exported bob" ks export bob --out "$WORK/bob.p12" --pin-source env:PIN

# --- 3. certtool --generate-request with a pkcs11: URI; the certificate written by C_CreateObject without CKA_ID
check "pkcs11-tool --keypairgen --id 02 (EC, no label)" "${P[@]}" --keypairgen --key-type EC:prime256v1 --id 02 --extractable
printf 'cn = "Carol Derived"\norganization = "Example"\nemail = "carol@example.com"\nsigning_key\n' > "$WORK/carol.tmpl"
GNUTLS_PIN=$PIN certtool --provider "$MODULE" --generate-request --load-privkey "$TOKEN_URI;id=%02;type=private" \
  --template "$WORK/carol.tmpl" --outfile "$WORK/carol.csr" >/dev/null 2>&1
verify_req "$WORK/carol.csr" && ok "openssl req -verify: certtool request" || bad "openssl req -verify: certtool request" "$(cat "$WORK/carol.csr" 2>&1 | head -3)"
issue "$WORK/carol.csr" "$WORK/carol.pem" && ok "CA issues carol" || bad "CA issues carol"
openssl x509 -in "$WORK/carol.pem" -outform DER -out "$WORK/carol.der"
check "pkcs11-tool --write-object without --id (C_CreateObject)" "${P[@]}" --write-object "$WORK/carol.der" --type cert --label carol
[ "$(ids_of carol)" = "cert=02 " ] && ok "the certificate written by C_CreateObject took the key's CKA_ID 02" || bad "the certificate written by C_CreateObject took the key's CKA_ID 02" "$(ids_of carol); $("${P[@]}" -O 2>&1 | grep -E 'Object|ID:|label')"
check_out "keyshare export sees carol" "exported carol" ks export carol --out "$WORK/carol.p12" --pin-source env:PIN

# --- 4. a key that may not leave: export says so, not "certificate only" ----
check_out "key generate (not extractable)" "generated" ks key generate --type ec --label dave --tag dave --pin-source env:PIN
check "keyshare csr for dave (JSON)" bash -c "'$KS' csr --tag dave --subject /CN=Dave --out '$WORK/dave.csr' --pin-source env:PIN --json > '$WORK/dave.json'"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["request"]; assert r["key"]["reference"] and r["uri"].startswith("pkcs11:")' "$WORK/dave.json" \
  && ok "csr --json names the signing key's reference and URI" || bad "csr --json names the signing key's reference and URI" "$(cat "$WORK/dave.json")"
issue "$WORK/dave.csr" "$WORK/dave.pem"
check_out "import dave" 'imported certificate "dave"' ks import "$WORK/dave.pem" --pin-source env:PIN
check_fail "export of a non-extractable identity says why" "dave is marked non-exportable" ks export dave --out "$WORK/dave.p12" --pin-source env:PIN

# --- 5. NSS sees every identity: the key has its certificate, the certificate its key
if command -v modutil >/dev/null; then
  NSSDB=sql:$WORK/nss; mkdir -p "$WORK/nss"; printf '%s' "$PIN" > "$WORK/pinfile"; chmod 600 "$WORK/pinfile"
  certutil -N -d "$NSSDB" --empty-password
  check "modutil -add keyshare" bash -c "echo | modutil -force -dbdir '$NSSDB' -add keyshare -libfile '$MODULE'"
  # -K names a key by its own label, else by its certificate's nickname, else "(orphan)".
  keys=$(certutil -K -d "$NSSDB" -h enrol -f "$WORK/pinfile" 2>&1)
  DAVE_ID=$(ks key list --private --token enrol --pin-source env:PIN --json | python3 -c 'import json,sys; print(next(k["id"] for k in json.load(sys.stdin) if k["tag"]=="dave"))')
  for pair in "alice:$ALICE_ID" bob:01 carol:02 "dave:$DAVE_ID"; do
    who=${pair%%:*}; id=${pair#*:}
    grep -qE "> (ec|rsa) +${id,,} +(enrol:)?$who\$" <<<"$keys" && ok "certutil -K: $who's key (CKA_ID $id)" || bad "certutil -K: $who's key (CKA_ID $id)" "$keys"
  done
  grep -q orphan <<<"$keys" && bad "certutil -K: no orphan key" "$keys" || ok "certutil -K: no orphan key"
  certs=$(certutil -L -d "$NSSDB" -h enrol -f "$WORK/pinfile" 2>&1)
  for who in alice bob carol dave; do
    grep -qE "enrol:$who +u,u,u" <<<"$certs" && ok "certutil -L: $who is a user certificate (u,u,u)" || bad "certutil -L: $who is a user certificate (u,u,u)" "$certs"
  done
fi

finish
