#!/usr/bin/env bash
# The keyshare CLI run as a user runs it: tokens, import of every fixture kind,
# list/show/delete, export and the shared password, and every error path.
set -u
KS=${1:?keyshare binary}
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
LABEL=$(openssl dgst -sha256 -r "$ID/device-ds-ke.cert.der" | awk '{print toupper($1)}')
check_out "list shows the identity label" "$LABEL" ks list
check_out "list shows category" "device" ks list
check_out "list shows a PKCS#11 URI" "pkcs11:token=alpha;serial=" ks list
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

rm -rf "$KEYSHARE_HOME" "$OUT"
finish
