#!/usr/bin/env bash
# Concurrency stress (issue 8): NPROC processes x NTHREADS threads of
# Tests/stress/stress.c (sign, verify, create, destroy, find, set-attribute,
# plus one process logging in and out) against one store, while the CLI
# imports and deletes identities in a loop. Pass: no unexpected CK_RV or CLI
# error (no CKR_GENERAL_ERROR, no SQLITE_BUSY), every object created and not
# destroyed exists (with its last value), every destroyed one is gone,
# PRAGMA integrity_check ok, every key still signs and verifies.
# Usage: stress.sh KEYSHARE MODULE [NPROC NTHREADS OPS CLI_ROUNDS]
# (defaults 4 2 200 6; `make stress` runs the long version, 60-stress.sh the short one).
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
NPROC=${3:-4} NTHREADS=${4:-2} OPS=${5:-200} CLI_ROUNDS=${6:-6}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/Tests/integration/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-stress.XXXXXX)
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
export PIN=1234-user SOPIN=9876-so P12PASS=keyshare-test
export KEYSHARE_TEST_PIN=$PIN   # stress.c reads the PIN here, never from argv
ID="$FIXTURES/identities"
CC=${CC:-cc}

check "compile stress host" $CC -O1 -Wall -Werror ${STRESS_CFLAGS:-} -I "$ROOT/pkcs11/types" \
  -o "$WORK/stress" "$ROOT/Tests/stress/stress.c" -ldl -lpthread
check "token create" "$KS" token create --label stress --pin-source env:PIN --so-pin-source env:SOPIN
check "import RSA identity" "$KS" import "$ID/device-ds-ke.modern.p12" --pin-source env:PIN --password-source env:P12PASS
check "import EC identity" "$KS" import "$ID/signature-ds-email.modern.p12" --pin-source env:PIN --password-source env:P12PASS

# The CLI writer: import, list, delete one more identity, CLI_ROUNDS times.
cli_loop() {
  local label fails=0
  label=$(openssl dgst -sha256 -r "$ID/device-old-ec.cert.der" | awk '{print toupper($1)}')
  for ((i = 0; i < CLI_ROUNDS; i++)); do
    "$KS" import "$ID/device-old-ec.modern.p12" --pin-source env:PIN --password-source env:P12PASS >>"$WORK/cli.log" 2>&1 || { fails=$((fails + 1)); echo "import failed" >>"$WORK/cli.log"; }
    "$KS" list >/dev/null 2>>"$WORK/cli.log" || fails=$((fails + 1))
    "$KS" delete "$label" --pin-source env:PIN >>"$WORK/cli.log" 2>&1 || { fails=$((fails + 1)); echo "delete failed" >>"$WORK/cli.log"; }
  done
  echo "$fails" >"$WORK/cli.fails"
}

start=$(date +%s)
cli_loop &
cli=$!
"$WORK/stress" run "$MODULE" stress "$NPROC" "$NTHREADS" "$OPS" "$WORK" 2>"$WORK/stress.err"
rc=$?
wait $cli
secs=$(($(date +%s) - start))
[ "$rc" -eq 0 ] && ok "$NPROC x $NTHREADS threads x $OPS ops + login churn: no unexpected CK_RV (${secs}s)" \
  || bad "no unexpected CK_RV (exit $rc)" "$(sort "$WORK/stress.err" | uniq -c | sort -rn)"
[ "$(cat "$WORK/cli.fails")" = 0 ] && ok "CLI import/list/delete x $CLI_ROUNDS alongside: no error" \
  || bad "CLI alongside: $(cat "$WORK/cli.fails") errors" "$(cat "$WORK/cli.log")"
gone=$(grep -o '[0-9]* keys deleted' "$WORK/stress.err" | awk '{s += $1} END {print s + 0}')
echo "  (signers found $gone keys gone under them: the CLI loop deletes one identity; expected and counted)"
if grep -v "(expected)" "$WORK/stress.err" "$WORK/cli.log" | grep -qiE "busy|database is locked|0x5\$|general"; then
  bad "no SQLITE_BUSY / CKR_GENERAL_ERROR anywhere" "$(grep -v '(expected)' "$WORK/stress.err" "$WORK/cli.log" | grep -iE 'busy|locked|0x5$|general')"
else ok "no SQLITE_BUSY / CKR_GENERAL_ERROR anywhere"; fi
writes=$(cat "$WORK"/ops-*.log | wc -l)
if out=$("$WORK/stress" check "$MODULE" stress "$WORK" 2>&1) && grep -q "^check: " <<<"$out"; then
  ok "after $writes logged writes: $(grep '^check: ' <<<"$out" | cut -c8-)"
else bad "created objects present, destroyed gone, every key signs" "$out"; fi
check_out "PRAGMA integrity_check" "^ok$" python3 -c \
  'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("PRAGMA integrity_check").fetchone()[0])' "$KEYSHARE_HOME/keychain.db"
finish
