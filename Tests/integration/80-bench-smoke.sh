#!/usr/bin/env bash
# The benchmark in smoke mode (tiny counts; asserts nothing about speed):
# p11bench builds, sets up its SoftHSM2 and keyshare tokens, runs every
# workload once and prints its table. Usage: 80-bench-smoke.sh KEYSHARE MODULE.
set -uo pipefail
KEYSHARE=${1:?keyshare binary}
MODULE=${2:?module path}
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d /tmp/keyshare-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# The Makefile's own rule and flags, with the binary written to the scratch dir.
if make -s -C "$ROOT" BENCH_BIN="$WORK/p11bench" "$WORK/p11bench" >"$WORK/cc.log" 2>&1; then
  ok "p11bench compiles"
else
  bad "p11bench compiles" "$(cat "$WORK/cc.log")"
fi

if [ -x "$WORK/p11bench" ]; then
  BENCH_SMOKE=1 BENCH_SCRATCH_PARENT=$WORK timeout 600 bash "$ROOT/Benchmarks/run.sh" "$KEYSHARE" "$MODULE" "$WORK/p11bench" >"$WORK/out" 2>"$WORK/err"
  rc=$?
  if [ "$rc" -eq 0 ]; then ok "smoke run completes"; else bad "smoke run completes" "exit $rc; $(tail -5 "$WORK/err")"; fi
  out=$(cat "$WORK/out")
  check_out "prints the table header" '^\| workload \| unit \| keyshare \| SoftHSM2 \| raw OpenSSL \|' printf '%s\n' "$out"
  check_out "has a keyshare ECDSA P-256 sign figure" '^\| sign ECDSA P-256 .*1 thread \| ops/s . \| [0-9]' printf '%s\n' "$out"
  check_out "has a find row" '^\| find by CKA_ID among' printf '%s\n' "$out"
  check_out "has the cold-start rows" '^\| dlopen \+ C_GetFunctionList \+ C_Initialize' printf '%s\n' "$out"
  check_out "has the RSS row" '^\| peak RSS' printf '%s\n' "$out"
  for size in "16 KiB" "1 MiB"; do
    check_out "has keyshare figures for the $size AES-GCM, ChaCha20-Poly1305 and AES-CTR rows" \
      "^\\| encrypt AES-256-CTR $size, C_EncryptUpdate .*\\| MB/s . \\| [0-9]" bash -c \
      'grep -E "^\| encrypt (AES-256-GCM|ChaCha20-Poly1305) $2, C_EncryptMessage .*\| MB/s . \| [0-9]" <<<"$1" | wc -l | grep -qx 2 && printf "%s\n" "$1"' _ "$out" "$size"
  done
  # Issue 30's rows: small operations, both signing keys in 2 processes x 2 threads, the copy limit.
  check_out "has the 64-byte AES-GCM rows" '^\| encrypt AES-256-GCM 64 B, C_EncryptInit\+C_Encrypt .*\| MB/s . \| [0-9]' printf '%s\n' "$out"
  check_out "has the HMAC-SHA256 32-byte row" '^\| sign HMAC-SHA256 .*32-byte message.*\| ops/s . \| [0-9]' printf '%s\n' "$out"
  check_out "has the RSA-2048 2 processes x 2 threads row" '^\| sign RSA-2048 PKCS #1, 2 processes × 2 threads \| ops/s . \| [0-9]' printf '%s\n' "$out"
  check_out "has the RSA-2048 verify rows at 1 and 2 threads" '^\| verify RSA-2048 PKCS #1 .*2 threads \| ops/s . \| [0-9]' printf '%s\n' "$out"
  check_out "has the memcpy rows (the copy limit)" '^\| memcpy 1048576 bytes .*\| MB/s . \| .* \| [0-9]' printf '%s\n' "$out"
  # run.sh finds the agent its run started, says so, and stops it (it used to call an
  # undefined agent_dir: "keyshare ran in-process", and the agent stayed for its idle timeout).
  check_out "run.sh names the agent its run went through" '^keyshare ran through its agent' printf '%s\n' "$out"
  left=$(for p in $(pgrep -f "keyshare agent"); do tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q "^XDG_RUNTIME_DIR=$WORK/" && echo "$p"; done)
  [ -z "$left" ] && ok "no agent of the run is left after it" || bad "no agent of the run is left" "pids $left"
  # Issue 13: the raw column must run the OpenSSL the module runs (it ran Debian's 3.0 against the
  # module's bundled 3.5, which made 3.5's faster GCM look like the module's). `keyshare --version`
  # names the engine the CLI, agent and module were built with.
  engine=$("$KEYSHARE" --version 2>/dev/null | sed -n 's/^OpenSSL \([0-9][0-9.]*\) .*/\1/p' | head -1)
  check_out "the raw column runs the module's OpenSSL (${engine:-unknown})" \
    "^p11bench .*, OpenSSL ${engine//./\\.}[ ;]" printf '%s\n' "$out"
  check_out "the header names each column's OpenSSL" '^OpenSSL: raw column OpenSSL [0-9].*; keyshare.* module ' printf '%s\n' "$out"
  # The TLS server rows (nginx through the libp11 engine), smoke mode: one 1 s run each.
  if [ -x /usr/sbin/nginx ]; then
    BENCH_SMOKE=1 BENCH_SCRATCH_PARENT=$WORK timeout 300 bash "$ROOT/Benchmarks/nginx.sh" "$KEYSHARE" "$MODULE" >"$WORK/nginx.out" 2>&1
    check_out "the nginx TLS rows (file key and keyshare key through libp11)" \
      '^\| nginx TLS 1.3 handshakes, RSA-2048 \| [0-9.]+ \| [0-9.]+ \|' grep -E '^\| nginx TLS 1.3 handshakes, ECDSA P-256 \| [0-9.]+ \| [0-9.]+ \|' -A1 "$WORK/nginx.out"
    pgrep -f "nginx -e $WORK" >/dev/null && bad "nginx stopped" "$(pgrep -af nginx)" || ok "no nginx of the run is left"
  else
    bad "nginx is installed (make deps: DEB_PACKAGES)" "no /usr/sbin/nginx"
  fi
  check_out "has the durable-write floor rows" '^\| durable-write floor: SQLite 1-row transaction .* \| [0-9]' printf '%s\n' "$out"
fi
finish
