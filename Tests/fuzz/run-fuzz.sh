#!/usr/bin/env bash
# `make fuzz` (issue 8): libFuzzer + AddressSanitizer on the four input parsers,
# FUZZ_SECONDS each (default 450: 30 minutes in total), two at a time, niced.
#   pkcs12, x509, password: the Swift harness Tests/fuzz/swift/Fuzz.swift
#     (binary keyshare-fuzz, built with KEYSHARE_SANITIZE=1 -sanitize=fuzzer,address)
#   module: Tests/fuzz/module_fuzz.c, clang -fsanitize=fuzzer,address, dlopening
#     the sanitized module from the same build (templates, mechanism parameters)
#   protocol: Tests/fuzz/protocol_fuzz.c, the agent protocol's codecs
#     (Sources/AgentProtocol, docs/agent.md) compiled into the fuzzer with ASan:
#     the agent decoding a client's call, the client applying an agent's reply
#   shm: Tests/fuzz/shm_fuzz.c, the agent's side of the shared region (shm.c)
#     under a client that scribbles on its half and on the socket
# Seeds: Tests/Fixtures/testdata + Tests/fuzz/corpus/<target>. New coverage is
# merged back into Tests/fuzz/corpus/<target> (small); crashes are written to
# Tests/fuzz/crashes/<target>-* and replayed by make test from then on.
# Usage: run-fuzz.sh KEYSHARE FUZZ_BUILD_DIR   (FUZZ_BUILD_DIR holds keyshare-fuzz and the module)
# FUZZ_SECONDS (per target) and FUZZ_TARGETS (default: all six) choose the run.
set -u
KS=${1:?keyshare binary}
BUILD=${2:?sanitized build dir}
SECS=${FUZZ_SECONDS:-450}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/Tests/integration/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-fuzz.XXXXXX)
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
FZ="$ROOT/Tests/fuzz"
CLANG=${CLANG:-/opt/swift/usr/bin/clang}
mkdir -p "$FZ/crashes"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=0}   # leaks: the ABI sweep checks those

# The module target needs a token with keys (the same store format as the CLI's).
export PIN=1234-user SOPIN=9876-so P12PASS=keyshare-test
"$KS" token create --label fuzz --pin-source env:PIN --so-pin-source env:SOPIN >/dev/null
for n in device-ds-ke signature-ds-email; do
  "$KS" import "$FIXTURES/identities/$n.modern.p12" --pin-source env:PIN --password-source env:P12PASS >/dev/null
done
check "compile module fuzzer" "$CLANG" -g -O1 -fsanitize=fuzzer,address -I "$ROOT/pkcs11/types" \
  -o "$WORK/module_fuzz" "$FZ/module_fuzz.c" -ldl
AP="$ROOT/Sources/AgentProtocol"
check "compile protocol fuzzer" "$CLANG" -g -O1 -fsanitize=fuzzer,address -I "$ROOT/pkcs11/types" -I "$AP/include" \
  -o "$WORK/protocol_fuzz" "$FZ/protocol_fuzz.c" "$AP/codec.c" "$AP/kdf_params.c" "$AP/struct_params.c" "$AP/breadth_params.c" "$AP/template_params.c" "$AP/v32_params.c" "$AP/pq_params.c" "$AP/frame.c" "$AP/serve.c"
AP_ALL=("$AP/codec.c" "$AP/kdf_params.c" "$AP/struct_params.c" "$AP/breadth_params.c" "$AP/template_params.c" "$AP/v32_params.c" "$AP/pq_params.c" "$AP/frame.c" "$AP/serve.c")
check "compile shm fuzzer" "$CLANG" -g -O1 -fsanitize=fuzzer,address -I "$ROOT/pkcs11/types" -I "$AP/include" \
  -o "$WORK/shm_fuzz" "$FZ/shm_fuzz.c" "$AP/shm.c" "$AP/spin.c" "${AP_ALL[@]}"
check "compile protocol seeds" "$CLANG" -g -O1 -DFUZZ_MAKE_SEEDS -I "$ROOT/pkcs11/types" -I "$AP/include" \
  -o "$WORK/protocol_seeds" "$FZ/protocol_fuzz.c" "$AP/codec.c" "$AP/kdf_params.c" "$AP/struct_params.c" "$AP/breadth_params.c" "$AP/template_params.c" "$AP/v32_params.c" "$AP/pq_params.c" "$AP/frame.c" "$AP/serve.c"

# Seeds: fixtures for the parsers, a few request lines for the password service.
for t in pkcs12 x509 password module protocol shm; do mkdir -p "$WORK/corpus-$t" "$FZ/corpus/$t"; cp "$FZ/corpus/$t"/* "$WORK/corpus-$t/" 2>/dev/null; done
find "$FIXTURES" -name '*.p12' -exec cp {} "$WORK/corpus-pkcs12/" \;
find "$FIXTURES" \( -name '*.der' -o -name '*.cert.pem' -o -name 'ca-chain.pem' \) -exec cp {} "$WORK/corpus-x509/" \;
printf '{"v":1,"service":"red.hound.KeySharingPassword-v1.0.0","call":"fetchPassword"}\n' >"$WORK/corpus-password/ok"
printf '{"v":2,"service":"x","call":"y"}' >"$WORK/corpus-password/v2"
printf '{"v":1,"state":"granted","password":"p"}' >"$WORK/corpus-password/reply"
"$WORK/protocol_seeds" "$WORK/corpus-protocol" >/dev/null

# fuzz TARGET: one libFuzzer run; prints the exec count line.
fuzz() {
  local t=$1 bin env=()
  if [ "$t" = module ]; then bin="$WORK/module_fuzz"; env=(KEYSHARE_IN_PROCESS=1 KEYSHARE_FUZZ_MODULE="$BUILD/libkeyshare-pkcs11.so")
  elif [ "$t" = protocol ]; then bin="$WORK/protocol_fuzz"; env=(KEYSHARE_FUZZ_TARGET=protocol)
  elif [ "$t" = shm ]; then bin="$WORK/shm_fuzz"; env=(KEYSHARE_FUZZ_TARGET=shm)
  else bin="$BUILD/keyshare-fuzz"; env=(KEYSHARE_FUZZ_TARGET="$t"); fi
  local len=8192; [ "$t" = module ] && len=2048
  env "${env[@]}" nice -n 19 "$bin" -max_total_time="$SECS" -max_len=$len -rss_limit_mb=3072 -timeout=30 \
    -print_final_stats=1 -artifact_prefix="$FZ/crashes/$t-" "$WORK/corpus-$t" >"$WORK/$t.log" 2>&1
  echo $? >"$WORK/$t.rc"
}
TARGETS=(${FUZZ_TARGETS:-pkcs12 x509 password module protocol shm})   # e.g. FUZZ_TARGETS=module for one
start=$(date +%s)
for ((i = 0; i < ${#TARGETS[@]}; i += 2)); do
  fuzz "${TARGETS[i]}" & [ -n "${TARGETS[i + 1]:-}" ] && fuzz "${TARGETS[i + 1]}" & wait
done
secs=$(($(date +%s) - start))

total=0
for t in "${TARGETS[@]}"; do
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$WORK/$t.log" | awk '{print $2}' | tail -1)
  total=$((total + ${execs:-0}))
  if [ "$(cat "$WORK/$t.rc")" = 0 ] && ! grep -q "ERROR: AddressSanitizer\|ERROR: libFuzzer\|Fatal error" "$WORK/$t.log"; then
    ok "fuzz $t: ${SECS}s, ${execs:-?} executions, no crash, no sanitizer report"
  else
    bad "fuzz $t (exit $(cat "$WORK/$t.rc"))" "$(grep -A12 'ERROR\|Fatal' "$WORK/$t.log" | head -30)"
  fi
  # Keep a small corpus: only inputs that add coverage, the 200 smallest of them.
  case $t in module) bin="$WORK/module_fuzz" ;; protocol) bin="$WORK/protocol_fuzz" ;; shm) bin="$WORK/shm_fuzz" ;; *) bin="$BUILD/keyshare-fuzz" ;; esac
  mkdir -p "$WORK/min-$t"
  KEYSHARE_IN_PROCESS=1 KEYSHARE_FUZZ_TARGET=$t KEYSHARE_FUZZ_MODULE="$BUILD/libkeyshare-pkcs11.so" nice -n 19 "$bin" -merge=1 \
    "$WORK/min-$t" "$WORK/corpus-$t" >/dev/null 2>&1 && { rm -f "$FZ/corpus/$t"/*
    ls -S -r "$WORK/min-$t" | head -200 | while read -r c; do cp "$WORK/min-$t/$c" "$FZ/corpus/$t/"; done; }
done
echo "  fuzzing: $secs s wall, ${#TARGETS[@]} x $SECS s, $total executions in total"
finish
