#!/usr/bin/env bash
# `make fuzz` (issue 8): libFuzzer + AddressSanitizer on the input parsers,
# FUZZ_SECONDS each (default 450), FUZZ_PARALLEL at a time (default 2), at nice FUZZ_NICE (19).
#   pkcs12, x509, password, control: the Swift harness Tests/fuzz/swift/Fuzz.swift
#     (binary keyshare-fuzz, built with KEYSHARE_SANITIZE=1 -sanitize=fuzzer,address);
#     control is the agent's decoder of the CLI's control requests (ControlProtocol.fuzzDecode)
#   module: Tests/fuzz/module_fuzz.c, clang -fsanitize=fuzzer,address, dlopening
#     the sanitized module from the same build (templates, mechanism parameters)
#   The agent protocol's C (Sources/AgentProtocol, docs/agent.md), compiled into each
#   fuzzer with -fsanitize=fuzzer,address,undefined (UBSan reports are crashes):
#   protocol: Tests/fuzz/protocol_fuzz.c, the call codec: the agent decoding a
#     client's call, the client applying an agent's reply
#   shm: Tests/fuzz/shm_fuzz.c, the agent's side of the shared region (shm.c)
#     under a client that scribbles on its half and on the socket
#   hello: Tests/fuzz/hello_fuzz.c, the hello and its reply (hello.c)
#   gate: Tests/fuzz/gate_fuzz.c, the agent's gate before a first frame (gate.c)
#     under clients that write in pieces and close; LeakSanitizer on
# Seeds: Tests/Fixtures/testdata + Tests/fuzz/corpus/<target> + seeds the C targets
# build with the protocol's own encoders. New coverage is merged back into
# Tests/fuzz/corpus/<target> (small); crashes are written to
# Tests/fuzz/crashes/<target>-* and replayed by make test from then on.
# Usage: run-fuzz.sh KEYSHARE FUZZ_BUILD_DIR   (FUZZ_BUILD_DIR holds keyshare-fuzz and the module)
# FUZZ_TARGETS (default: all nine) chooses the run; FUZZ_SECONDS_<target> overrides
# FUZZ_SECONDS for one target (e.g. FUZZ_SECONDS_hello=600).
set -u
KS=${1:?keyshare binary}
BUILD=${2:?sanitized build dir}
SECS=${FUZZ_SECONDS:-450}
PAR=${FUZZ_PARALLEL:-2}
NICE=${FUZZ_NICE:-19}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/Tests/integration/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-fuzz.XXXXXX)
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
FZ="$ROOT/Tests/fuzz"
CLANG=${CLANG:-/opt/swift/usr/bin/clang}
mkdir -p "$FZ/crashes"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=0}   # leaks: the ABI sweep checks those (gate: below)

# The module target needs a token with keys (the same store format as the CLI's).
export PIN=1234-user SOPIN=9876-so P12PASS=keyshare-test
"$KS" token create --label fuzz --pin-source env:PIN --so-pin-source env:SOPIN >/dev/null
for n in device-ds-ke signature-ds-email; do
  "$KS" import "$FIXTURES/identities/$n.modern.p12" --pin-source env:PIN --password-source env:P12PASS >/dev/null
done
check "compile module fuzzer" "$CLANG" -g -O1 -fsanitize=fuzzer,address -I "$ROOT/pkcs11/types" \
  -o "$WORK/module_fuzz" "$FZ/module_fuzz.c" -ldl
AP="$ROOT/Sources/AgentProtocol"
# frame.c's deadlines use spin.c's clock (ksa_mono_ns).
AP_ALL=("$AP/codec.c" "$AP/kdf_params.c" "$AP/struct_params.c" "$AP/breadth_params.c" "$AP/template_params.c" "$AP/v32_params.c" "$AP/pq_params.c" "$AP/frame.c" "$AP/serve.c" "$AP/epoch.c" "$AP/spin.c")
# UBSan without its function-type check: the protocol target calls one fake PKCS #11 entry through
# every type of the function table (protocol_fuzz.c), which that check reports by design.
CFUZZ=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize=function -fno-sanitize-recover=undefined -I "$ROOT/pkcs11/types" -I "$AP/include")
check "compile protocol fuzzer" "$CLANG" "${CFUZZ[@]}" -o "$WORK/protocol_fuzz" "$FZ/protocol_fuzz.c" "${AP_ALL[@]}"
# The shm script is single-threaded: the rest of a partial frame never comes, so the agent's
# side must not wait KSA_FRAME_TIMEOUT_MS (10 s) for it (1 execution a second if it did).
check "compile shm fuzzer" "$CLANG" "${CFUZZ[@]}" -DKSA_FRAME_TIMEOUT_MS=0 -o "$WORK/shm_fuzz" "$FZ/shm_fuzz.c" "$AP/shm.c" "${AP_ALL[@]}"
check "compile hello fuzzer" "$CLANG" "${CFUZZ[@]}" -o "$WORK/hello_fuzz" "$FZ/hello_fuzz.c" "$AP/hello.c" "${AP_ALL[@]}"
check "compile gate fuzzer" "$CLANG" "${CFUZZ[@]}" -o "$WORK/gate_fuzz" "$FZ/gate_fuzz.c" "$AP/gate.c" "$AP/hello.c" "${AP_ALL[@]}"
for t in protocol hello gate; do
  check "compile $t seeds" "$CLANG" -g -O1 -DFUZZ_MAKE_SEEDS -I "$ROOT/pkcs11/types" -I "$AP/include" \
    -o "$WORK/${t}_seeds" "$FZ/${t}_fuzz.c" "$AP/gate.c" "$AP/hello.c" "${AP_ALL[@]}"
done
# Seeds: fixtures for the parsers, a few request lines for the password service.
for t in pkcs12 x509 password control module protocol shm hello gate; do mkdir -p "$WORK/corpus-$t" "$FZ/corpus/$t"; cp "$FZ/corpus/$t"/* "$WORK/corpus-$t/" 2>/dev/null; done
find "$FIXTURES" -name '*.p12' -exec cp {} "$WORK/corpus-pkcs12/" \;
find "$FIXTURES" \( -name '*.der' -o -name '*.cert.pem' -o -name 'ca-chain.pem' \) -exec cp {} "$WORK/corpus-x509/" \;
printf '{"v":1,"service":"red.hound.KeySharingPassword-v1.0.0","call":"fetchPassword"}\n' >"$WORK/corpus-password/ok"
printf '{"v":2,"service":"x","call":"y"}' >"$WORK/corpus-password/v2"
printf '{"v":1,"state":"granted","password":"p"}' >"$WORK/corpus-password/reply"
for t in protocol hello gate; do "$WORK/${t}_seeds" "$WORK/corpus-$t" >/dev/null; done
# The CLI's control requests as it encodes them: status (no field), unlock with a PIN field.
printf 'KSC1\001\000\003\000\000\000\000\000' >"$WORK/corpus-control/status"
printf 'KSC1\001\000\001\000\002\000\000\000\003\000\000\000pin\004\000\000\0001234\005\000\000\000token\001\000\000\000t' \
  >"$WORK/corpus-control/unlock"
printf 'KSC1\001\000\001\000\001\000\000\000\005\000\000\000error\004\000\000\000nope' >"$WORK/corpus-control/refused"
printf 'KSC1\001\000\000\000\001\000\000\000\003\000\000\000pid\002\000\000\00042' >"$WORK/corpus-control/answer"

# The binary and environment of a target.
bin_of() {
  case $1 in
    module) echo "$WORK/module_fuzz" ;;
    protocol | shm | hello | gate) echo "$WORK/$1_fuzz" ;;
    *) echo "$BUILD/keyshare-fuzz" ;;
  esac
}

# fuzz TARGET: one libFuzzer run; prints the exec count line.
fuzz() {
  local t=$1 bin env=() secs_var="FUZZ_SECONDS_$1"
  local secs=${!secs_var:-$SECS}
  bin=$(bin_of "$t")
  env=(KEYSHARE_FUZZ_TARGET="$t")
  [ "$t" = module ] && env=(KEYSHARE_IN_PROCESS=1 KEYSHARE_FUZZ_MODULE="$BUILD/libkeyshare-pkcs11.so")
  # The gate frees everything it holds: leaks are checked there.
  [ "$t" = gate ] && env+=(ASAN_OPTIONS=detect_leaks=1:abort_on_error=0)
  local len=8192; [ "$t" = module ] && len=2048
  env "${env[@]}" nice -n "$NICE" "$bin" -max_total_time="$secs" -max_len=$len -rss_limit_mb=3072 -timeout=30 \
    -print_final_stats=1 -artifact_prefix="$FZ/crashes/$t-" "$WORK/corpus-$t" >"$WORK/$t.log" 2>&1
  echo $? >"$WORK/$t.rc"
  echo "$secs" >"$WORK/$t.secs"
}
TARGETS=(${FUZZ_TARGETS:-pkcs12 x509 password control module protocol shm hello gate})   # e.g. FUZZ_TARGETS=module for one
start=$(date +%s)
for ((i = 0; i < ${#TARGETS[@]}; i += PAR)); do
  for ((k = i; k < i + PAR && k < ${#TARGETS[@]}; k++)); do fuzz "${TARGETS[k]}" & done
  wait
done
secs=$(($(date +%s) - start))

total=0
for t in "${TARGETS[@]}"; do
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$WORK/$t.log" | awk '{print $2}' | tail -1)
  total=$((total + ${execs:-0}))
  if [ "$(cat "$WORK/$t.rc")" = 0 ] && ! grep -q "ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:\|ERROR: libFuzzer\|Fatal error" "$WORK/$t.log"; then
    ok "fuzz $t: $(cat "$WORK/$t.secs")s, ${execs:-?} executions, no crash, no sanitizer report"
  else
    bad "fuzz $t (exit $(cat "$WORK/$t.rc"))" "$(grep -A12 'ERROR\|Fatal\|runtime error' "$WORK/$t.log" | head -30)"
  fi
  # Keep a small corpus: only inputs that add coverage, the 200 smallest of them.
  bin=$(bin_of "$t")
  mkdir -p "$WORK/min-$t"
  KEYSHARE_IN_PROCESS=1 KEYSHARE_FUZZ_TARGET=$t KEYSHARE_FUZZ_MODULE="$BUILD/libkeyshare-pkcs11.so" nice -n "$NICE" "$bin" -merge=1 \
    "$WORK/min-$t" "$WORK/corpus-$t" >/dev/null 2>&1 && { rm -f "$FZ/corpus/$t"/*
    ls -S -r "$WORK/min-$t" | head -200 | while read -r c; do cp "$WORK/min-$t/$c" "$FZ/corpus/$t/"; done; }
done
echo "  fuzzing: $secs s wall, ${#TARGETS[@]} targets, $total executions in total"
finish
