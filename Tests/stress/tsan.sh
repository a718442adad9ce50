#!/usr/bin/env bash
# The in-process part of the stress run under ThreadSanitizer (issue 8, make stress):
# one process, NTHREADS workers (sign, verify, create, destroy, find, set) plus a
# thread logging the process out and in, against a module built with
# KEYSHARE_SANITIZE=1 -sanitize=thread (.build-tsan). Host: the Swift toolchain's
# clang -fsanitize=thread (its TSan runtime needs libdispatch/BlocksRuntime, and
# -rdynamic so the module finds __tsan_* symbols). Pass: zero TSan reports
# (tsan.supp holds the one false-positive pattern, Swift's lazy-global once).
# Usage: tsan.sh KEYSHARE TSAN_MODULE [NTHREADS OPS].
set -u
KS=${1:?keyshare binary}
MODULE=${2:?tsan module}
NTHREADS=${3:-4} OPS=${4:-200}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/Tests/integration/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-tsan.XXXXXX)
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
export PIN=1234-user SOPIN=9876-so P12PASS=keyshare-test
export KEYSHARE_TEST_PIN=$PIN   # stress.c reads the PIN here, never from argv
SWIFTLIB=/opt/swift/usr/lib/swift/linux
check "compile TSan host" /opt/swift/usr/bin/clang -g -O1 -fsanitize=thread -rdynamic -I "$ROOT/pkcs11/types" \
  -o "$WORK/stress" "$ROOT/Tests/stress/stress.c" -ldl -lpthread -L$SWIFTLIB -ldispatch -lBlocksRuntime -Wl,-rpath,$SWIFTLIB
"$KS" token create --label stress --pin-source env:PIN --so-pin-source env:SOPIN >/dev/null
"$KS" import "$FIXTURES/identities/device-ds-ke.modern.p12" "$FIXTURES/identities/signature-ds-email.modern.p12" \
  --pin-source env:PIN --password-source env:P12PASS >/dev/null
start=$(date +%s)
KEYSHARE_IN_PROCESS=1 STRESS_IN_PROCESS=1 TSAN_OPTIONS="halt_on_error=0 suppressions=$ROOT/Tests/stress/tsan.supp" \
  nice -n 19 "$WORK/stress" run "$MODULE" stress 1 "$NTHREADS" "$OPS" "$WORK" >"$WORK/tsan.log" 2>&1
reports=$(grep -c "WARNING: ThreadSanitizer" "$WORK/tsan.log")
calls=$(grep -c . "$WORK"/ops-*.log | awk -F: '{s += $2} END {print s}')
[ "$reports" -eq 0 ] && ok "TSan: $NTHREADS threads x $OPS ops + login/logout thread, $(($(date +%s) - start))s: 0 reports" \
  || bad "TSan: $reports reports" "$(grep -A14 'WARNING: ThreadSanitizer' "$WORK/tsan.log" | head -60)"
echo "  ($calls logged writes; CK_RV errors from the logout thread's effect are expected here: $(grep -c ' -> 0x' "$WORK/tsan.log"))"
finish
