#!/usr/bin/env bash
# Wraps and unwraps a 1 GiB file and reports each direction's peak RSS
# (/usr/bin/time -v), to show that wrapping streams in bounded memory
# (target: < 64 MiB). Not part of `make test`: it writes 3 GiB of scratch.
# Usage: Tests/bench/wrap-1g.sh KEYSHARE_BIN [SIZE_MIB]
set -eu
KS=${1:?keyshare binary}
MIB=${2:-1024}
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)"; exit 2; }
export KEYSHARE_HOME KEYSHARE_KDF_LOG2N=10 PIN=bench-pin SOPIN=bench-so
KEYSHARE_HOME=$(mktemp -d /tmp/keyshare-bench.XXXXXX)
W=$(mktemp -d /tmp/keyshare-wrap-bench.XXXXXX)
trap 'rm -rf "$W" "$KEYSHARE_HOME"' EXIT
"$KS" token create --label bench --pin-source env:PIN --so-pin-source env:SOPIN >/dev/null
head -c $((MIB * 1024 * 1024)) /dev/urandom >"$W/plain"
run() {  # NAME CMD...
  local name=$1; shift
  /usr/bin/time -v "$@" 2>"$W/time.$name" >/dev/null
  local rss secs
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$W/time.$name")
  secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$W/time.$name")
  echo "$name: ${MIB} MiB, peak RSS $((rss / 1024)) MiB ($rss KiB), wall $secs"
  [ "$rss" -lt $((64 * 1024)) ] || { echo "$name: peak RSS over 64 MiB"; return 1; }
}
run wrap "$KS" wrap --group bench "$W/plain" "$W/wrapped" --pin-source env:PIN
run unwrap "$KS" unwrap "$W/wrapped" "$W/out" --pin-source env:PIN
cmp "$W/plain" "$W/out" && echo "round trip: identical"
