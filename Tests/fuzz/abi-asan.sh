#!/usr/bin/env bash
# C ABI robustness under AddressSanitizer + LeakSanitizer (issue 8, make fuzz):
# Tests/fuzz/abi_sweep.c (every function, every state, NULL / invalid handle /
# zero and huge length variants) and the existing sweep of
# Tests/integration/51-pkcs11-abi.sh, both compiled with -fsanitize=address and
# run against the sanitized module. Pass: their own checks pass and ASan/LSan
# report nothing. Usage: abi-asan.sh KEYSHARE SANITIZED_MODULE.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?sanitized module}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/Tests/integration/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-abi-asan.XXXXXX)
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
CLANG=${CLANG:-/opt/swift/usr/bin/clang}
export PIN=sweep-pin-123456 SOPIN=9876-so P12PASS=keyshare-test
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 LSAN_OPTIONS=report_objects=0
"$KS" token create --label sweep --pin-source env:PIN --so-pin-source env:SOPIN >/dev/null
"$KS" import "$FIXTURES/identities/signature-ds-email.modern.p12" --pin-source env:PIN --password-source env:P12PASS >/dev/null

# run NAME BINARY ARGS...: the binary's own result line, and no sanitizer report.
run() {
  local name=$1; shift
  "$@" >"$WORK/out" 2>&1; local rc=$?
  grep -E '^FAIL|^  ' "$WORK/out" | head -20
  if [ "$rc" -eq 0 ] && ! grep -qE "ERROR: (Address|Leak)Sanitizer" "$WORK/out"; then
    ok "$name: $(grep -E '^[0-9]+ passed' "$WORK/out"), no ASan/LSan report"
  else bad "$name (exit $rc)" "$(grep -A15 -E 'ERROR: |^FAIL' "$WORK/out" | head -30)"; fi
}
check "compile sweep with ASan" "$CLANG" -g -O1 -fsanitize=address -I "$ROOT/pkcs11/types" -o "$WORK/sweep" "$ROOT/Tests/fuzz/abi_sweep.c" -ldl
# In-process (the module's own code under ASan), then in the default agent
# mode (the client and the protocol codec under ASan; the agent is $KS).
KEYSHARE_IN_PROCESS=1 run "full sweep in-process (6 states x every function x every argument)" "$WORK/sweep" "$MODULE"
KEYSHARE_AGENT_PROGRAM=$(realpath "$KS") run "full sweep through the agent (the client under ASan)" "$WORK/sweep" "$MODULE"

# The 51 sweep's C program, as that script writes it, compiled with ASan.
sed -n "/^cat > \"\$WORK\/abi.c\" <<'EOF'$/,/^EOF$/p" "$ROOT/Tests/integration/51-pkcs11-abi.sh" | sed '1d;$d' >"$WORK/abi.c"
# The 51 token: abi.c logs in with PIN 0000; pkcs11-tool reads the PINs from the environment.
export PIN=0000 SOPIN=1234
P=(pkcs11-tool --module "$(dirname "$KS")/libkeyshare-pkcs11.so")   # the release module: pkcs11-tool has no ASan runtime
export KEYSHARE_HOME; KEYSHARE_HOME=$(mktemp -d /tmp/keyshare-abi51.XXXXXX)
"${P[@]}" --init-token --label abi --so-pin env:SOPIN --slot 1 >/dev/null 2>&1
"${P[@]}" --init-pin --login --login-type so --so-pin env:SOPIN --new-pin env:PIN --token-label abi >/dev/null 2>&1
openssl pkey -in "$FIXTURES/identities/auth-upn-new.key.pem" -outform DER -out "$WORK/ec.der"
"${P[@]}" --token-label abi --login --pin env:PIN --write-object "$WORK/ec.der" --type privkey --id 02 --label ec >/dev/null 2>&1
check "compile the 51 sweep with ASan" "$CLANG" -g -O1 -fsanitize=address -Wno-unused-result -I "$ROOT/pkcs11/types" -I "$ROOT/pkcs11/abi/include" -o "$WORK/abi" "$WORK/abi.c" -ldl -lpthread
KEYSHARE_IN_PROCESS=1 run "51 sweep (getters, zero sweep, threads, fork)" "$WORK/abi" "$MODULE"
rm -rf "$KEYSHARE_HOME"
finish
