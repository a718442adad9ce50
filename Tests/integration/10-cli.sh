#!/usr/bin/env bash
# The keyshare CLI run as a user runs it: tokens, import of every fixture kind,
# list/show/delete, export and the shared password, and every error path;
# then issue 14's defects (PEM bundles, encrypted PEM keys, key list --token,
# trust anchors and the SO PIN, show's names and dates, duplicate naming, a
# failed export, PIN lengths, which PIN was wrong) and --json/--label/--id.
set -u
KS=${1:?keyshare binary}
MODULE=${2:-}
source "$(dirname "$0")/lib.sh"
new_home
export PIN=1234-user SOPIN=9876-so P12PASS=keyshare-test WRONG=nope
ID="$FIXTURES/identities"
ks() { "$KS" "$@"; }

check_out "help" "import" ks --help
check_out "token help" "create" ks token --help
check_out "no tokens yet" "no tokens" ks token list
check_fail "import with no token" "token" ks import "$ID/device-ds-ke.modern.p12" --pin-source env:PIN --password-source env:P12PASS
check_fail "bad pin source form" "env:VAR|file:PATH|pin-source" ks token create --label x --pin-source PIN --so-pin-source env:SOPIN
check_fail "pin env var unset" "not set" ks token create --label x --pin-source env:NO_SUCH_VAR --so-pin-source env:SOPIN
check_out "token create" "created token com.keyshare.soft:" ks token create --label alpha --pin-source env:PIN --so-pin-source env:SOPIN
check_out "token list" "alpha" ks token list
check_out "token list json" '"tokenID" : "com.keyshare.soft:' ks token list --json
[ "$(stat -c %a "$KEYSHARE_HOME")" = 700 ] && ok "home is 0700" || bad "home is 0700" "$(stat -c %a "$KEYSHARE_HOME")"
[ "$(stat -c %a "$KEYSHARE_HOME/keychain.db")" = 600 ] && ok "db is 0600" || bad "db is 0600"

# Import: every shape.
check_out "import modern p12" "imported" ks import "$ID/device-ds-ke.modern.p12" --pin-source env:PIN --password-source env:P12PASS
check_out "import duplicate is not an error" "already" ks import "$ID/device-ds-ke.modern.p12" --pin-source env:PIN --password-source env:P12PASS
check_out "import legacy EC p12" "imported" ks import "$ID/signature-ds-email.legacy.p12" --pin-source env:PIN --password-source env:P12PASS
check_out "import empty-password p12 (no prompt)" "imported" ks import "$FIXTURES/variants/empty-password.p12" --pin-source env:PIN </dev/null
ENC=Encrypt-2025; export ENC
check_out "import RC2-40 p12" "imported|already" ks import "$FIXTURES/variants/rc2-40.p12" --pin-source env:PIN --password-source env:ENC
check_out "import several files" "imported" ks import "$ID/encryption-gen2.modern.p12" "$ID/encryption-gen3.modern.p12" --pin-source env:PIN --password-source env:ENC
check_out "import PEM certificate" "imported|already" ks import "$ID/auth-upn-old.cert.pem" --pin-source env:PIN
check_out "import DER certificate" "imported|already" ks import "$ID/auth-upn-new.cert.der" --pin-source env:PIN
check_out "import PKCS#8 key" "imported|already" ks import "$ID/auth-upn-new.key.pem" --pin-source env:PIN

count_items() { ks list --pin-source env:PIN --json | grep -c '"reference"'; }
before=$(count_items)
check_fail "wrong p12 password" "wrong password" ks import "$ID/auth-upn-old.modern.p12" --pin-source env:PIN --password-source env:WRONG
check_fail "not a p12" "not a PKCS #12" ks import "$FIXTURES/broken/random-bytes.p12" --pin-source env:PIN --password-source env:P12PASS
check_fail "truncated p12" "corrupt|truncated" ks import "$FIXTURES/broken/truncated.p12" --pin-source env:PIN --password-source env:P12PASS
check_fail "mac mismatch p12" "wrong password|corrupt" ks import "$FIXTURES/broken/mac-mismatch.p12" --pin-source env:PIN --password-source env:P12PASS
check_fail "cert-only p12" "no private key" ks import "$FIXTURES/variants/cert-only.p12" --pin-source env:PIN --password-source env:P12PASS
check_fail "missing file" "cannot read" ks import /nonexistent.p12 --pin-source env:PIN
after=$(count_items)
[ "$before" = "$after" ] && ok "failed imports left the store unchanged ($after items)" || bad "failed imports left the store unchanged" "$before -> $after"

# Wrong PIN: one clear line, counted.
check_fail "wrong user PIN" "PIN" ks list --pin-source env:WRONG
check_out "failure is counted" "1 failed" ks token list

# list / show
LABEL=$(p12_label "$ID/device-ds-ke.modern.p12")  # its friendlyName: "Test Device 1234567890 (device 048F)"
check_out "list --wide shows the identity label in full (the PKCS #12 friendlyName)" "^certificate +$(sed 's/[][\.*^$()+?{}|]/\\&/g' <<<"$LABEL") " ks list --wide
check_out "list shows category" "device" ks list
check_out "list --wide shows a PKCS#11 URI" "pkcs11:token=alpha;serial=" ks list --wide
check_out "list --private shows keys" "private-key" ks list --pin-source env:PIN
check_out "list json" '"certificateType" : "device"' ks list --json
REF=$(ks list --json | python3 -c 'import json,sys; print([r["reference"] for r in json.load(sys.stdin) if r["itemClass"]=="certificate"][0])')
check_out "show by reference" "CKA_SUBJECT" ks show "$REF"
check_out "show by label" "x509.serial: 048F" ks show "$LABEL"
out=$(ks show "$LABEL" --pin-source env:PIN 2>&1)
if grep -q "CKA_PRIVATE_EXPONENT\|0x80004B53" <<<"$out"; then bad "show never prints secrets"; else ok "show never prints secrets"; fi
check_fail "show unknown" "no item" ks show NO-SUCH-LABEL

# export + password
OUT=$(mktemp -d)
check_out "export modern" "exported" ks export "$LABEL" --out "$OUT/id.p12" --pin-source env:PIN
[ "$(stat -c %a "$OUT/id.p12")" = 600 ] && ok "export is 0600" || bad "export is 0600"
check_fail "password refuses a pipe" "refusing" ks password --pin-source env:PIN
PW=$(ks password --stdout --pin-source env:PIN)
[ ${#PW} -eq 32 ] && ok "password is 32 characters" || bad "password is 32 characters" "${#PW}"
export PW
check_out "openssl opens the export" "MAC: sha256" openssl pkcs12 -info -noout -in "$OUT/id.p12" -passin env:PW
check_out "export legacy" "exported" ks export "$LABEL" --out "$OUT/legacy.p12" --profile legacy --pin-source env:PIN
check_out "legacy is 3DES + SHA-1 MAC" "MAC: sha1, Iteration 2048" openssl pkcs12 -info -noout -in "$OUT/legacy.p12" -passin env:PW -legacy
PW2=$(ks password --stdout --pin-source env:PIN)
[ "$PW" = "$PW2" ] && ok "password is reused" || bad "password is reused"
ECLABEL=$(openssl dgst -sha256 -r "$ID/signature-ds-email.cert.der" | awk '{print toupper($1)}')
check_out "export EC identity" "exported" ks export "$ECLABEL" --out "$OUT/ec.p12" --pin-source env:PIN
check_out "openssl opens the EC export" "MAC: sha256" openssl pkcs12 -info -noout -in "$OUT/ec.p12" -passin env:PW
check_fail "export unknown identity" "no identity" ks export NOPE --out "$OUT/x.p12" --pin-source env:PIN
[ ! -e "$OUT/x.p12" ] && ok "failed export wrote no file" || bad "failed export wrote no file"
check_fail "export with wrong PIN" "PIN" ks export "$LABEL" --out "$OUT/y.p12" --pin-source env:WRONG
[ ! -e "$OUT/y.p12" ] && ok "wrong-PIN export wrote no file" || bad "wrong-PIN export wrote no file"
# The secrets go to grep as a pattern file on a pipe: an argument would show them in `ps`.
grep -rqaF -f <(printf '%s\n' "$PW") "$KEYSHARE_HOME" && bad "shared password not in the clear on disk" || ok "shared password not in the clear on disk"
grep -rqaF -f <(printf '%s\n' "$PIN") "$KEYSHARE_HOME" && bad "PIN not on disk" || ok "PIN not on disk"

# PINs
export NEWPIN=5555-new
check_out "set-pin" "changed" ks token set-pin --pin-source env:PIN --new-pin-source env:NEWPIN
check_fail "old PIN no longer works" "PIN" ks list --pin-source env:PIN
check_out "init-pin by SO" "set" ks token init-pin --so-pin-source env:SOPIN --new-pin-source env:PIN
check_out "keys survive init-pin" "exported" ks export "$LABEL" --out "$OUT/again.p12" --pin-source env:PIN

# delete
check_out "delete by label" "deleted 3 items" ks delete "$LABEL" --pin-source env:PIN
check_fail "deleted item is gone" "no item" ks show "$LABEL"

# several tokens need --token
check_out "second token" "created" ks token create --label beta --pin-source env:PIN --so-pin-source env:SOPIN
check_fail "ambiguous token" "several tokens" ks import "$ID/device-ds-only.modern.p12" --pin-source env:PIN --password-source env:P12PASS
check_out "import with --token" "imported" ks import "$ID/device-ds-only.modern.p12" --token beta --pin-source env:PIN --password-source env:P12PASS
check_fail "delete token with wrong SO PIN" "PIN" ks token delete beta --so-pin-source env:WRONG
check_out "delete token" "deleted token" ks token delete beta --so-pin-source env:SOPIN
check_fail "unknown subcommand" "." ks frobnicate

# --- issue 14: the CLI as people use it -------------------------------------
export KPW=key-pass-14
check_out "token gamma" "created" ks token create --label gamma --pin-source env:PIN --so-pin-source env:SOPIN
G=(--token gamma --pin-source env:PIN)
certs_in_gamma() { ks list --token gamma --json | python3 -c 'import json,sys; print(sum(1 for i in json.load(sys.stdin) if i["itemClass"]=="certificate"))'; }

# Item 2: a PEM with a key and its certificate (either order) is an identity; a chain file imports and reports every certificate.
cat "$ID/device-ds-ke.cert.pem" "$ID/device-ds-ke.key.pem" > "$OUT/cert-then-key.pem"
check_out "PEM cert+key imports the identity" 'imported identity .*certificate .*private key .*public key' ks import "$OUT/cert-then-key.pem" "${G[@]}"
[ "$(certs_in_gamma)" = 1 ] && ok "PEM cert+key kept the certificate" || bad "PEM cert+key kept the certificate" "$(ks list --token gamma)"
cat "$ID/signature-ds-nr.key.pem" "$ID/signature-ds-nr.cert.pem" > "$OUT/key-then-cert.pem"
check_out "PEM key+cert imports the identity" 'imported identity' ks import "$OUT/key-then-cert.pem" "${G[@]}"
openssl pkcs12 -in "$ID/encryption-gen1.modern.p12" -nodes -passin env:ENC -out "$OUT/nodes.pem" 2>/dev/null \
  || openssl pkcs12 -in "$ID/encryption-gen1.modern.p12" -nodes -passin env:P12PASS -out "$OUT/nodes.pem"
check_out "openssl pkcs12 -nodes output imports key and certificates" 'imported identity' ks import "$OUT/nodes.pem" "${G[@]}"
cat "$ID/auth-upn-old.cert.pem" "$FIXTURES/ca/root-ca.pem" "$FIXTURES/ca/unrelated-root-ca.pem" > "$OUT/three.pem"
out=$(ks import "$OUT/three.pem" "${G[@]}" 2>&1)
n=$(grep -cE 'imported certificate|already in the keychain: certificate' <<<"$out")
[ "$n" = 3 ] && ok "a three-certificate PEM reports all three" || bad "a three-certificate PEM reports all three" "$out"
printf -- '-----BEGIN CERTIFICATE REQUEST-----\nMIIBAA==\n-----END CERTIFICATE REQUEST-----\n' | cat "$ID/device-old-ec.cert.pem" - > "$OUT/with-csr.pem"
before=$(certs_in_gamma)
check_fail "a PEM block that cannot be imported is refused by name" 'PEM block 2 \(CERTIFICATE REQUEST\): .*nothing was imported' ks import "$OUT/with-csr.pem" "${G[@]}"
[ "$(certs_in_gamma)" = "$before" ] && ok "the refused PEM wrote nothing" || bad "the refused PEM wrote nothing"

# Item 3: encrypted PEM keys, PKCS #8 and traditional, with --password-source.
openssl pkcs8 -topk8 -in "$ID/device-ds-only.key.pem" -v2 aes-256-cbc -passout env:KPW -out "$OUT/enc8.pem"
openssl ec -in "$ID/device-old-ec.key.pem" -aes256 -passout env:KPW -out "$OUT/trad.pem" 2>/dev/null
check_fail "encrypted key, wrong password: one clear line" '^keyshare: .*PEM block 1 \(ENCRYPTED PRIVATE KEY\): wrong password for the encrypted private key' \
  ks import "$OUT/enc8.pem" "${G[@]}" --password-source env:WRONG
check_out "encrypted PKCS#8 key imports with --password-source" 'imported key pair' ks import "$OUT/enc8.pem" "${G[@]}" --password-source env:KPW
check_out "traditional Proc-Type: 4,ENCRYPTED key imports" 'imported identity|imported key pair' ks import "$OUT/trad.pem" "${G[@]}" --password-source env:KPW

# Item 7: a duplicate is named by its stored label and reference, as `list` shows them
# (a PEM identity's label: its certificate's commonName).
GLABEL="Test Device 1234567890"
out=$(ks import "$ID/device-ds-ke.key.pem" "${G[@]}" 2>&1)
ref=$(grep -oE 'private key "[^"]*" \([A-Za-z0-9_-]+\)' <<<"$out" | grep -oE '\([A-Za-z0-9_-]+\)' | tr -d '()')
if grep -q "already in the keychain: private key \"$GLABEL\"" <<<"$out" && [ -n "$ref" ] && ks list --token gamma --pin-source env:PIN | grep -q "$ref"; then
  ok "duplicate key names the stored label and a reference list shows"; else bad "duplicate key names the stored label and a reference list shows" "$out"; fi

# Items 6 and 8 on their own token, filled by a PKCS #12 import.
check_out "token delta" "created" ks token create --label delta --pin-source env:PIN --so-pin-source env:SOPIN
D=(--token delta --pin-source env:PIN)
check_out "import into delta" "imported" ks import "$ID/device-ds-ke.modern.p12" "${D[@]}" --password-source env:P12PASS

# Item 6: show prints names, ISO dates and "unavailable".
out=$(ks show "$LABEL" --token delta --pin-source env:PIN 2>&1)
grep -q '^CKA_KEY_GEN_MECHANISM: unavailable$' <<<"$out" && ok "show: CK_UNAVAILABLE_INFORMATION is 'unavailable'" || bad "show: CK_UNAVAILABLE_INFORMATION is 'unavailable'" "$(grep KEY_GEN <<<"$out")"
grep -q '^CKA_START_DATE: 2025-01-10$' <<<"$out" && ok "show: CK_DATE as an ISO date" || bad "show: CK_DATE as an ISO date" "$(grep DATE <<<"$out")"
grep -q '^CKA_CLASS: CKO_CERTIFICATE$' <<<"$out" && grep -q '^CKA_KEY_TYPE: CKK_RSA$' <<<"$out" && ok "show: class and key type by name" || bad "show: class and key type by name" "$(grep -E 'CLASS|KEY_TYPE' <<<"$out")"
if grep -q 18446744073709551615 <<<"$out"; then bad "show never prints CK_UNAVAILABLE_INFORMATION as a number"; else ok "show never prints CK_UNAVAILABLE_INFORMATION as a number"; fi

# Item 4: key list --token lists that token's keys only, with a TOKEN column.
check_out "key generate in alpha" "generated" ks key generate --type ec --label in-alpha --tag in-alpha --token alpha --pin-source env:PIN
check_out "key generate in gamma" "generated" ks key generate --type ec --label in-gamma --tag in-gamma --token gamma --pin-source env:PIN
out=$(ks key list --token gamma 2>&1)
if grep -q in-gamma <<<"$out" && ! grep -q in-alpha <<<"$out" && head -1 <<<"$out" | grep -q TOKEN; then ok "key list --token shows only that token, with a TOKEN column"
else bad "key list --token shows only that token, with a TOKEN column" "$out"; fi

# Item 5: changing trust takes the SO PIN (PKCS #11 lets only the SO set CKA_TRUSTED).
check_fail "trust anchor add without the SO PIN is refused" '[Ss][Oo] [Pp][Ii][Nn]' ks trust anchor add "$FIXTURES/ca/root-ca.pem" --token gamma </dev/null
check_fail "trust anchor add with a wrong SO PIN is refused" 'incorrect SO PIN' ks trust anchor add "$FIXTURES/ca/root-ca.pem" --token gamma --so-pin-source env:WRONG
check_out "no anchor was added" "no trusted certificates" ks trust anchor list
check_out "trust anchor add with the SO PIN" "trusted" ks trust anchor add "$FIXTURES/ca/root-ca.pem" --token gamma --so-pin-source env:SOPIN
check_fail "trust anchor remove needs the SO PIN too" 'SO PIN' ks trust anchor remove "$FIXTURES/ca/root-ca.pem" --so-pin-source env:WRONG
check_out "trust anchor remove with the SO PIN" "no longer trusted" ks trust anchor remove "$FIXTURES/ca/root-ca.pem" --so-pin-source env:SOPIN

# Item 10: a wrong SO PIN says which PIN and the attempts left.
check_fail "wrong SO PIN is named, with attempts left" 'incorrect SO PIN for token gamma \([0-9]+ attempts? left' ks token init-pin --token gamma --so-pin-source env:WRONG --new-pin-source env:PIN
check_fail "wrong user PIN is named too" 'incorrect user PIN for token gamma' ks list --token gamma --pin-source env:WRONG

# Item 8: a failed export writes nothing, not even the shared password it would have made.
pw_items() { ks list --token delta --pin-source env:PIN --json | grep -c '"itemClass" : "password"'; }
check_fail "export to an unwritable place fails" 'cannot write' ks export "$LABEL" --out /nonexistent-dir/x.p12 "${D[@]}"
[ "$(pw_items)" = 0 ] && ok "a failed export created no shared password" || bad "a failed export created no shared password" "$(pw_items) password items"

# Item 9: one PIN length limit everywhere (the module's 4..255), stated in --help.
export LONGPIN=$(head -c 255 /dev/zero | tr '\0' 'p') TOOLONG=$(head -c 256 /dev/zero | tr '\0' 'p') SHORTPIN=abc
check_out "token create --help states the PIN lengths" '4 to 255' ks token create --help
check_out "a 255-byte PIN is accepted" "created" ks token create --label longpin --pin-source env:LONGPIN --so-pin-source env:SOPIN
check_out "the 255-byte PIN unlocks" "longpin|no items" ks list --token longpin --pin-source env:LONGPIN
check_fail "a 256-byte PIN is refused" '4 to 255 bytes' ks token set-pin --token longpin --pin-source env:LONGPIN --new-pin-source env:TOOLONG
check_fail "a 3-byte PIN is refused" '4 to 255 bytes' ks token set-pin --token longpin --pin-source env:LONGPIN --new-pin-source env:SHORTPIN
if [ -n "$MODULE" ] && command -v pkcs11-tool >/dev/null; then
  mod=$(pkcs11-tool --module "$MODULE" -L 2>/dev/null | grep -m1 -E 'pin min/max' | grep -oE '[0-9]+/[0-9]+')
  [ "$mod" = 4/255 ] && ok "the module reports the same PIN lengths (pin min/max $mod)" || bad "the module reports the same PIN lengths" "pkcs11-tool says: $mod"
fi

# --label / --id on import, and --json with references and URIs.
check_out "import --label --id" 'imported identity "work-id" \(CKA_ID 0A0B\)' ks import "$ID/signature-ds-email.modern.p12" --label work-id --id 0a0b "${G[@]}" --password-source env:P12PASS
check_out "list shows the chosen ID in the URI" 'id=%0A%0B;object=work-id;type=private' ks list --wide --token gamma --pin-source env:PIN
check_fail "--id that another key uses is refused" 'already used by' ks import "$ID/encryption-gen2.modern.p12" --id 0A0B "${G[@]}" --password-source env:ENC
json=$(ks import "$ID/encryption-gen3.modern.p12" "${G[@]}" --password-source env:ENC --json)
if python3 -c 'import json,sys; r=json.loads(sys.argv[1]); it=r[0]["items"]; assert len(it)>=3 and all(i["reference"] and (i["uri"].startswith("pkcs11:") or i["keptApart"] and i["uri"] == "-") for i in it)' "$json"; then
  ok "import --json gives every item with reference and URI (\"-\" for a chain certificate kept out of the token)"; else bad "import --json gives every item with reference and URI" "$json"; fi
json=$(ks delete work-id "${G[@]}" --json)
if python3 -c 'import json,sys; r=json.loads(sys.argv[1])["removed"]; assert len(r)==3 and all(i["uri"].startswith("pkcs11:") for i in r)' "$json"; then
  ok "delete --json names what was removed"; else bad "delete --json names what was removed" "$json"; fi
json=$(ks key generate --type rsa --label j --tag j --token gamma --pin-source env:PIN --json)
if python3 -c 'import json,sys; r=json.loads(sys.argv[1])["created"]; assert [i["itemClass"] for i in r]==["private-key","public-key"] and all(i["reference"] and i["uri"] for i in r)' "$json"; then
  ok "key generate --json names both keys"; else bad "key generate --json names both keys" "$json"; fi

# driver add --json: the driver, its tokens and their items, with references and URIs.
SOFTHSM=/usr/lib/softhsm/libsofthsm2.so
if [ -e "$SOFTHSM" ] && command -v pkcs11-tool >/dev/null; then
  export SOFTHSM2_CONF=$OUT/softhsm2.conf; mkdir -p "$OUT/hsm"
  printf 'directories.tokendir = %s/hsm\nobjectstore.backend = file\nlog.level = ERROR\n' "$OUT" > "$SOFTHSM2_CONF"
  S=(pkcs11-tool --module "$SOFTHSM")
  "${S[@]}" --init-token --slot-index 0 --label card --so-pin env:SOPIN >/dev/null 2>&1
  "${S[@]}" --token-label card --init-pin --login --login-type so --so-pin env:SOPIN --new-pin env:PIN >/dev/null 2>&1
  "${S[@]}" --token-label card --login --pin env:PIN --write-object "$ID/device-ds-ke.cert.der" --type cert --id 01 --label card-cert >/dev/null 2>&1
  json=$(ks driver add --module "$SOFTHSM" --env "SOFTHSM2_CONF=$SOFTHSM2_CONF" --json 2>&1)
  if python3 -c 'import json,sys; a=json.loads(sys.argv[1])["added"]; t=a["tokens"][0]; assert a["driverClass"]=="pkcs11.softhsm2" and t["kind"]=="external" and t["label"]=="card" and any(i["label"]=="card-cert" and i["uri"].startswith("pkcs11:token=card") and i["reference"] for i in t["items"])' "$json"; then
    ok "driver add --json names the card and its items"; else bad "driver add --json names the card and its items" "$json"; fi
  ks driver remove softhsm2 >/dev/null 2>&1
  unset SOFTHSM2_CONF
fi

# token watch --json: token ID, label, slot ID, kind and the items that came and went.
WATCH_PID=
trap '[ -n "$WATCH_PID" ] && kill "$WATCH_PID" 2>/dev/null' EXIT
"$KS" token watch --json --interval 0.1 > "$OUT/watch.json" 2>"$OUT/watch.err" &
WATCH_PID=$!
wait_for() { for _ in $(seq 50); do grep -q "$1" "$OUT/watch.json" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
wait_for '"label":"delta"' && ks token remove delta >/dev/null && wait_for '"event":"removed"'
kill "$WATCH_PID" 2>/dev/null; wait "$WATCH_PID" 2>/dev/null; WATCH_PID=
if python3 - "$OUT/watch.json" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ins = next(e for e in ev if e["event"] == "inserted" and e["label"] == "delta")
rem = next(e for e in ev if e["event"] == "removed")
assert rem["tokenID"] == ins["tokenID"] and rem["label"] == "delta" and rem["kind"] == "soft" and isinstance(ins["slotID"], int)
assert any(i["itemClass"] == "certificate" and i["uri"].startswith("pkcs11:") and i["reference"] for i in ins["items"])
assert rem["items"] == ins["items"]
PY
then ok "token watch --json: inserted/removed with label, slot, kind and items"; else bad "token watch --json: inserted/removed with label, slot, kind and items" "$(cat "$OUT/watch.json" "$OUT/watch.err")"; fi

rm -rf "$KEYSHARE_HOME" "$OUT"
finish
