#!/usr/bin/env bash
# `make demo` must keep working: run it on a throwaway store, under strace, and
# check that no PIN or password ever reaches a command line (issue 12 item 9:
# every local user can read every process's argv in `ps`).
set -u
KS=${1:?}; MODULE=${2:?}
source "$(dirname "$0")/lib.sh"
new_home
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export KEYSHARE_HOME="$dir/store"
# Distinctive secrets, so a match in the trace can only be one of them.
export DEMO_USER_PIN="pin-$RANDOM$RANDOM" DEMO_SO_PIN="so-$RANDOM$RANDOM" DEMO_P12_PASSWORD="p12-$RANDOM$RANDOM"
export DEMO_WORK="$dir/work"
# Agent mode (docs/agent.md): the agent is started here, untraced, so strace
# (which follows every descendant) does not wait for the agent's idle exit;
# lib.sh's trap stops it by its PID. In-process, it is simply never used.
env -u DEMO_USER_PIN -u DEMO_SO_PIN -u DEMO_P12_PASSWORD "$KS" agent --daemonize >/dev/null 2>&1 || true
strace -f -qq -e trace=execve -s 65536 -o "$dir/execve.trace" bash "$HERE/demo.sh" "$KS" "$MODULE" >"$dir/demo.out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -q "demo complete" "$dir/demo.out"; then ok "make demo runs end to end (under strace)"
else bad "make demo runs end to end (under strace)" "exit $rc: $(tail -5 "$dir/demo.out")"; fi
execs=$(grep -c 'execve(' "$dir/execve.trace" || true)
if [ "$execs" -ge 20 ] && grep -q 'pkcs11-tool' "$dir/execve.trace" && grep -q 'openssl", \["openssl", "dgst"' "$dir/execve.trace"; then
  ok "strace saw the demo's programs start ($execs execve calls)"
else
  bad "strace saw the demo's programs start" "$execs execve calls"
fi
SHARED=$(DEMO_USER_PIN=$DEMO_USER_PIN "$KS" password --stdout --pin-source env:DEMO_USER_PIN 2>/dev/null || true)
[ -n "$SHARED" ] && ok "the shared export password exists" || bad "the shared export password exists"
leaks=0
for name in DEMO_USER_PIN DEMO_SO_PIN DEMO_P12_PASSWORD SHARED; do
  value=${!name}
  [ -n "$value" ] || continue
  # The value goes to grep as a pattern file on a pipe, not as an argument.
  if grep -qF -f <(printf '%s\n' "$value") "$dir/execve.trace"; then
    leaks=$((leaks + 1)); bad "no $name in any argv" "$(grep -cF -f <(printf '%s\n' "$value") "$dir/execve.trace") execve lines carry it"
  fi
  if grep -qF -f <(printf '%s\n' "$value") "$dir/demo.out"; then
    leaks=$((leaks + 1)); bad "no $name in the demo's output"
  fi
done
[ "$leaks" -eq 0 ] && ok "no PIN or password in any of the $execs command lines or in the output"
finish
