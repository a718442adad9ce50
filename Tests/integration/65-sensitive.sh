#!/usr/bin/env bash
# Sensitive keys stay in (issue 8): Tests/stress/sensitive.c tries every
# PKCS #11 path that could reveal a sensitive or non-extractable key
# (GetAttributeValue, SetAttributeValue back to non-sensitive, CopyObject to
# an extractable object, WrapKey, wrap-then-decrypt); then `keyshare export`
# must refuse a key marked CKA_EXTRACTABLE false. Usage: 65-sensitive.sh KEYSHARE MODULE.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-sens.XXXXXX)
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# The PIN reaches sensitive.c through the environment, never argv.
export PIN=1234-user SOPIN=9876-so P12PASS=keyshare-test
export KEYSHARE_TEST_PIN=$PIN
ID="$FIXTURES/identities"
check "token create" "$KS" token create --label sens --pin-source env:PIN --so-pin-source env:SOPIN
check "import RSA identity" "$KS" import "$ID/device-ds-ke.modern.p12" --pin-source env:PIN --password-source env:P12PASS
check "import EC identity" "$KS" import "$ID/signature-ds-email.modern.p12" --pin-source env:PIN --password-source env:P12PASS
check "generate a key pair with the CLI" "$KS" key generate --type ec --curve P-256 --label gen-cli --tag gen-cli --pin-source env:PIN
check "compile" cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -Wno-deprecated-declarations \
  -o "$WORK/sensitive" "$ROOT/Tests/stress/sensitive.c" -ldl -lcrypto
out=$("$WORK/sensitive" "$MODULE" 2>&1)
echo "$out" | grep -v '^[0-9]* passed'
PASS=$((PASS + $(grep -c '^ok ' <<<"$out"))); FAIL=$((FAIL + $(grep -c '^FAIL' <<<"$out")))
LABEL=$(openssl dgst -sha256 -r "$ID/device-ds-ke.cert.der" | awk '{print toupper($1)}')
check "export of an extractable key works (control)" "$KS" export "$LABEL" --out "$WORK/a.p12" --pin-source env:PIN
check_out "mark every key non-extractable through the module" " 0 failed" "$WORK/sensitive" "$MODULE" lock
check_fail "export refuses a non-extractable key" "extract|export" "$KS" export "$LABEL" --out "$WORK/b.p12" --pin-source env:PIN
[ ! -e "$WORK/b.p12" ] && ok "no file written on refusal" || bad "no file written on refusal"
finish
