#!/usr/bin/env bash
# Runs p11bench: keyshare's module against SoftHSM2 and raw OpenSSL.
# Usage: Benchmarks/run.sh KEYSHARE_BIN MODULE_PATH [P11BENCH_BIN]
# Sets up its own stores in a temp dir: a SoftHSM2 token (private
# SOFTHSM2_CONF, pkcs11-tool --init-token) and a keyshare token
# (`keyshare token create`), both labelled "bench" with the same PIN. The PINs
# go to every program through the environment (BENCH_PIN, BENCH_SO), never on
# a command line, where every local user would read them in `ps`.
# BENCH_SMOKE=1 for a quick run that asserts nothing about speed;
# BENCH_AGENT=1 / BENCH_IN_PROCESS=1 choose the module's mode (default: the module's own); other
# BENCH_* variables are described at the top of p11bench.c.
set -euo pipefail
KEYSHARE=$(readlink -f "${1:?keyshare binary}")
MODULE=$(readlink -f "${2:?module path}")
HERE=$(cd "$(dirname "$0")" && pwd)
BENCH=${3:-$HERE/p11bench}
SOFTHSM=${SOFTHSM2_MODULE:-}
for c in /usr/lib/softhsm/libsofthsm2.so /usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so /usr/local/lib/softhsm/libsofthsm2.so; do
  [ -z "$SOFTHSM" ] && [ -f "$c" ] && SOFTHSM=$c
done
[ -n "$SOFTHSM" ] || { echo "run.sh: libsofthsm2.so not found (apt-get install softhsm2)" >&2; exit 2; }

WORK=$(mktemp -d "${BENCH_SCRATCH_PARENT:-/tmp}/p11bench.XXXXXX")
# keyshare through its agent (issue 16) unless BENCH_IN_PROCESS=1: a private
# runtime directory, so the agent is this run's own (started by the first
# C_Initialize, the binary under test) and is stopped by its PID at exit.
export XDG_RUNTIME_DIR=$WORK/run
mkdir -m 0700 "$XDG_RUNTIME_DIR"
# The directory of the agent serving this run's store (as Tests/integration/lib.sh finds it).
agent_dir() { "$KEYSHARE" agent socket --dir 2>/dev/null || echo "$XDG_RUNTIME_DIR/keyshare"; }
stop_agent() {
  local p
  p=$(cat "$(agent_dir)/agent.pid" 2>/dev/null) || true
  if [ -n "$p" ] && tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q " agent"; then kill "$p"; fi
}
trap 'stop_agent; rm -rf "$WORK"' EXIT
# The module's mode: BENCH_IN_PROCESS=1 forces in-process, BENCH_AGENT=1 the
# agent (`make bench` sets it: the issue's figures are through the agent);
# neither: the module's default, as an application gets it (80-bench-smoke).
SUBJECT=keyshare
export KEYSHARE_AGENT_PROGRAM=$KEYSHARE KEYSHARE_AGENT_IDLE_TIMEOUT=60
if [ "${BENCH_IN_PROCESS:-0}" != 0 ]; then
  export KEYSHARE_IN_PROCESS=1; unset KEYSHARE_AGENT
elif [ "${BENCH_AGENT:-0}" != 0 ]; then
  unset KEYSHARE_IN_PROCESS
  SUBJECT="keyshare (agent)"
fi
export BENCH_PIN=123456 BENCH_SO=12345678 BENCH_SCRATCH=$WORK
# The PIN KDF cost: the default (2^15) unless the caller chose one; smoke runs use the minimum.
if [ "${BENCH_SMOKE:-0}" != 0 ]; then export KEYSHARE_KDF_LOG2N=${KEYSHARE_KDF_LOG2N:-10}; fi
export BENCH_KDF_LOG2N=${KEYSHARE_KDF_LOG2N:-15}

# SoftHSM2: file store in the temp dir.
mkdir -p "$WORK/softhsm/tokens"
printf 'directories.tokendir = %s\nobjectstore.backend = file\nlog.level = ERROR\n' "$WORK/softhsm/tokens" > "$WORK/softhsm/softhsm2.conf"
export SOFTHSM2_CONF=$WORK/softhsm/softhsm2.conf
# pkcs11-tool reads the PINs from the environment (env:VAR); softhsm2-util takes them only as arguments.
pkcs11-tool --module "$SOFTHSM" --slot-index 0 --init-token --label bench --so-pin env:BENCH_SO >/dev/null
pkcs11-tool --module "$SOFTHSM" --token-label bench --login --login-type so --so-pin env:BENCH_SO \
  --init-pin --new-pin env:BENCH_PIN >/dev/null

# keyshare: the store the module uses, and a second one for the CLI import row.
export KEYSHARE_HOME=$WORK/keyshare
"$KEYSHARE" token create --label bench --pin-source env:BENCH_PIN --so-pin-source env:BENCH_SO >/dev/null
KEYSHARE_HOME=$WORK/keyshare-cli "$KEYSHARE" token create --label bench --pin-source env:BENCH_PIN --so-pin-source env:BENCH_SO >/dev/null

# BENCH_NO_REF=1 leaves SoftHSM2 out; BENCH_WRAP prefixes the command (profiling:
# BENCH_WRAP="valgrind --tool=callgrind --toggle-collect=p11_sign" BENCH_ONLY=...).
REF=(--module "SoftHSM2=$SOFTHSM")
[ "${BENCH_NO_REF:-0}" != 0 ] && REF=()
# p11bench reads the PIN from BENCH_PIN.
# shellcheck disable=SC2086
${BENCH_WRAP:-} "$BENCH" --module "$SUBJECT=$MODULE" "${REF[@]}" --token bench \
  --cli "$KEYSHARE" --cli-home "$WORK/keyshare-cli"
if [ -e "$(agent_dir)/agent.pid" ]; then echo "keyshare ran through its agent"; else echo "keyshare ran in-process"; fi
# Post-quantum rows (issue 18): pqbench, linked with the module's OpenSSL, in this run's mode and in-process.
PQBENCH=${PQBENCH:-$HERE/pqbench}
if [ -x "$PQBENCH" ] && [ "${BENCH_NO_PQ:-0}" = 0 ]; then
  echo
  "$PQBENCH" "$MODULE" bench
  [ "${KEYSHARE_IN_PROCESS:-0}" = 1 ] || KEYSHARE_IN_PROCESS=1 "$PQBENCH" "$MODULE" bench
fi
