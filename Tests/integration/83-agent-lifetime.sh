#!/usr/bin/env bash
# How long things last in the agent, and how it is managed (issue 26 defects
# 1 and 10; docs/agent.md "How long an unlock lasts", "Managing the agent",
# "No store, no agent", "Upgrades").
# - A module load that finds no store creates none and starts no agent (it
#   lists the free slot; pkcs11-tool, p11-kit list-modules); C_InitToken on the
#   free slot creates the store. Before: any load made keychain.db and a 600 s agent.
# - keyshare agent status|stop|restart [--json].
# - An agent of an older protocol is asked to leave (SIGTERM) and a new one
#   started; a retiring agent stops listening at once and serves its clients
#   until they go.
# - `keyshare unlock --for 2s` ends on time while programs keep connecting
#   (before: never, while the accept loop was busy), and is refused at use.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
agent_work lifetime
export KEYSHARE_AGENT_IDLE_TIMEOUT=60 KEYSHARE_AGENT_PROGRAM=$KS
unset KEYSHARE_IN_PROCESS KEYSHARE_AGENT_NO_START
export PIN=1234-user SOPIN=9876-so KEYSHARE_TEST_PIN=1234-user
PIDS=() HP=
cleanup() {
  for p in "${PIDS[@]}" $HP; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$WORK" "$KEYSHARE_HOME"
}
trap cleanup EXIT
agent_pid() { cat "$(agent_dir)/agent.pid" 2>/dev/null; }
# The agents serving this script's store (other runs may use the same binary).
running_agents() {
  local p
  for p in $(pgrep -f -- "^$KS agent"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "KEYSHARE_HOME=$KEYSHARE_HOME" && printf '%s ' "$p"
  done
}

# --- no store, no agent ------------------------------------------------------------------------
rmdir "$KEYSHARE_HOME"   # new_home made the directory: a user who never used keyshare has none
out=$(KEYSHARE_DEBUG=1 pkcs11-tool --module "$MODULE" -L 2>&1)
grep -q "keyshare free slot" <<<"$out" && ! grep -q "token label" <<<"$out" \
  && ok "with no store, a module load lists only the free slot" || bad "no store: the free slot" "$out"
grep -q "nothing started or created" <<<"$out" && ok "the debug log says nothing was started or created" || bad "no-store debug line" "$out"
check "pkcs11-tool -M (mechanisms) and -I (info) too" sh -c "pkcs11-tool --module '$MODULE' -M >/dev/null && pkcs11-tool --module '$MODULE' -I >/dev/null"
# p11-kit's own listing, from a user's module configuration (p11-kit reads none as root): uid 1000 with a fresh home.
UH=$WORK/u1000; mkdir -p "$UH/.config/pkcs11/modules"
printf 'module: %s\n' "$MODULE" >"$UH/.config/pkcs11/modules/keyshare.module"
mkdir "$UH/lib"; copy_images "$UH/lib"   # not in $UH itself: that is the user's XDG_RUNTIME_DIR
printf 'module: %s\n' "$UH/lib/libkeyshare-pkcs11.so" >"$UH/.config/pkcs11/modules/keyshare.module"
chmod 0711 "$WORK"; chown -R 1000:1000 "$UH"
out=$(setpriv --reuid 1000 --regid 1000 --clear-groups env -i PATH=/usr/bin:/bin HOME="$UH" XDG_RUNTIME_DIR="$UH" p11-kit list-modules 2>/dev/null)
grep -q "^keyshare: " <<<"$out" && grep -q "library-manufacturer: keyshare" <<<"$out" && [ ! -e "$UH/.local/share/keyshare" ] \
  && [ -z "$(find "$UH" -name 'agent.*')" ] \
  && ok "p11-kit list-modules (uid 1000, fresh home) lists the module; no store made ($UH/.local/share/keyshare absent), no agent started" \
  || bad "p11-kit list-modules creates nothing" "$(grep -A4 '^keyshare' <<<"$out"); $(find "$UH" -name 'agent.*' -o -name keychain.db)"
[ ! -e "$KEYSHARE_HOME" ] && [ ! -e "$(agent_dir)/agent.pid" ] && [ -z "$(running_agents)" ] \
  && ok "nothing was created ($KEYSHARE_HOME absent) and no agent was started" \
  || bad "no store, no agent" "$(ls -la "$KEYSHARE_HOME" 2>&1 | head -3); agents: $(running_agents)"
"$KS" agent status >/dev/null 2>&1; rc=$?
[ $rc = 3 ] && ok "keyshare agent status: none running (exit 3)" || bad "agent status with none running" "exit $rc"
check "C_InitToken on the free slot creates the store (through a new agent)" \
  pkcs11-tool --module "$MODULE" --slot 1 --init-token --label fresh --so-pin env:SOPIN
[ -s "$KEYSHARE_HOME/keychain.db" ] && [ -n "$(agent_pid)" ] && ok "the store exists and an agent serves it" \
  || bad "C_InitToken made the store" "$(ls -la "$KEYSHARE_HOME" 2>&1)"
check "init the user PIN" pkcs11-tool --module "$MODULE" --token-label fresh --login --login-type so --so-pin env:SOPIN --init-pin --new-pin env:PIN
check "an EC key" "$KS" key generate --type ec --curve P-256 --label k --tag k --token fresh --pin-source env:PIN

# --- keyshare agent status | stop | restart -----------------------------------------------------
A1=$(agent_pid)
st=$("$KS" agent status --json)
grep -q '"running" : "true"' <<<"$st" && grep -q "\"pid\" : \"$A1\"" <<<"$st" && grep -q '"protocol" : "5"' <<<"$st" \
  && grep -q "\"store\" : \"$KEYSHARE_HOME\"" <<<"$st" && ok "agent status --json: running, pid $A1, protocol 5, its store" \
  || bad "agent status --json" "$st"
check_out "agent status (text)" "pid: $A1" "$KS" agent status
check_out "agent restart" "started the keyshare agent \(pid [0-9]+\), replacing pid $A1" "$KS" agent restart
A2=$(agent_pid)
! kill -0 "$A1" 2>/dev/null && [ -n "$A2" ] && [ "$A2" != "$A1" ] && ok "restart: pid $A1 gone, pid $A2 serves" || bad "restart" "$A1 -> $A2"
check_out "agent stop --json" "\"stopped\" : \"$A2\"" "$KS" agent stop --json
! kill -0 "$A2" 2>/dev/null && [ ! -S "$(agent_dir)/agent.sock" ] && ok "stop: the agent and its socket are gone" || bad "stop" "$(ls -la "$(agent_dir)")"
check_out "agent stop with none running" "no keyshare agent was running" "$KS" agent stop

# --- an agent of an older protocol ----------------------------------------------------------------
check "compile the old agent" cc -O1 -Wall -Werror -o "$WORK/oldagent" "$ROOT/Tests/integration/c/oldagent.c"
# The old agent answers the hello and closes at once, often before the client
# has sent its debug log's descriptor after the hello: the client must still
# read the answer (before the fix, 2 runs in 20 here took the closed socket for
# an agent gone and gave up after 3 attempts). Fifteen in a row.
SOCK=$(agent_dir)/agent.sock
retire_fails=0 retire_out=
for round in $(seq 15); do
  stop_agent
  mkdir -p -m 0700 "$(agent_dir)"
  rm -f "$WORK/old.record"
  bash -c 'exec -a keyshare "$0" agent "$1" "$2"' "$WORK/oldagent" "$SOCK" "$WORK/old.record" & OLD=$!; PIDS+=($OLD)
  # Listening (not only bound: a connect between bind and listen is refused).
  for _ in $(seq 100); do grep -q listening "$WORK/old.record" 2>/dev/null && break; sleep 0.05; done
  out=$(KEYSHARE_DEBUG=1 pkcs11-tool --module "$MODULE" -L 2>&1)
  if ! grep -Eq "token label +: fresh" <<<"$out"; then
    retire_fails=$((retire_fails + 1)); retire_out="round $round: $out"$'\n'"agent log: $(tail -5 "$(agent_dir)/agent.log" 2>&1)"
  fi
  [ "$round" = 15 ] || { kill "$OLD" 2>/dev/null; wait "$OLD" 2>/dev/null; }
done
[ "$retire_fails" = 0 ] && ok "a client meeting an agent of protocol 4 gets served by a new agent (15 rounds)" \
  || bad "older agent replaced ($retire_fails of 15 rounds failed)" "$retire_out"
for _ in $(seq 50); do kill -0 "$OLD" 2>/dev/null || break; sleep 0.1; done
grep -q "hello v5" "$WORK/old.record" && grep -q TERM "$WORK/old.record" && ! kill -0 "$OLD" 2>/dev/null \
  && ok "the old agent saw our hello, was asked to leave (SIGTERM) and left" || bad "the old agent was retired" "$(cat "$WORK/old.record")"
grep -q "speaks protocol 4, this module 5: asking it to retire" <<<"$out" && ok "the debug log says so" || bad "retire logged" "$out"
check_out "the new agent speaks protocol 5" '"protocol" : "5"' "$KS" agent status --json

# --- a retiring agent (SIGTERM) serves its clients, and a new one serves new clients ---------------
check "compile the signing host" cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$WORK/agenthost" "$ROOT/Tests/integration/c/agenthost.c" -ldl
coproc HOST { exec "$WORK/agenthost" "$MODULE"; }
HP=$HOST_PID
say() { echo "$1" >&"${HOST[1]}"; read -r -t 20 r <&"${HOST[0]}"; echo "$r"; }
read -r -t 20 line <&"${HOST[0]}"
say ec >/dev/null
A3=$(agent_pid)
kill -TERM "$A3"
for _ in $(seq 20); do [ -S "$SOCK" ] || break; sleep 0.05; done
[ ! -S "$SOCK" ] && kill -0 "$A3" 2>/dev/null && ok "SIGTERM: the agent stops listening at once (socket gone) and stays for its client" \
  || bad "a retiring agent" "socket $(ls -la "$SOCK" 2>&1); alive $(kill -0 "$A3" 2>&1 && echo yes)"
printf 'retire' >"$WORK/data"
check "meanwhile a new client is served by a new agent" pkcs11-tool --module "$MODULE" --login --pin env:PIN --sign -m ECDSA-SHA256 -i "$WORK/data" -o /dev/null
A4=$(agent_pid)
[ -n "$A4" ] && [ "$A4" != "$A3" ] && ok "the new agent is another process (pid $A4, the retiring one $A3)" || bad "a new agent" "$A3 / $A4"
r=$(say ec)
[ "$r" = 0x0 ] && ok "the retiring agent still serves its client (it signs)" || bad "the retiring agent serves its client" "rv $r"
exec {HOST[1]}>&-; wait "$HP" 2>/dev/null; HP=
for _ in $(seq 50); do kill -0 "$A3" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$A3" 2>/dev/null && ok "the retiring agent exits when its last client goes" || bad "the retiring agent exits" "pid $A3 runs"
grep -q "retired, and the last client is gone: exiting" "$(agent_dir)/agent.log" && ok "its log says so" || bad "retire logged" "$(tail -3 "$(agent_dir)/agent.log")"

# --- defect 1: an unlock ends on time under a stream of connections --------------------------------
AGENT=$(agent_pid)
/usr/bin/python3 - "$SOCK" <<'PY' & PIDS+=($!); CHURN=$!
import socket, sys, time
while True:   # a program of the user connecting and disconnecting every 0.1 s
    s = socket.socket(socket.AF_UNIX)
    try: s.connect(sys.argv[1])
    except OSError: pass
    s.close(); time.sleep(0.1)
PY
: >"$(agent_dir)/agent.log"
check "unlock pkcs11-tool for 2 s (while a program connects and disconnects every 0.1 s)" "$KS" unlock --for 2s \
  --program "$(command -v pkcs11-tool)" --pin-source env:PIN
t0=$(date +%s.%N)
check "a host signs without C_Login during the unlock" pkcs11-tool --module "$MODULE" --sign -m ECDSA-SHA256 -i "$WORK/data" -o /dev/null
for _ in $(seq 60); do grep -q "unlock expired" "$(agent_dir)/agent.log" && break; sleep 0.05; done
t1=$(date +%s.%N)
late=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
grep -q "unlock expired" "$(agent_dir)/agent.log" && awk -v l="$late" 'BEGIN { exit !(l < 3.0) }' \
  && ok "the unlock ends on time under the stream ($late s after it began; its key dropped)" \
  || bad "the unlock ends on time under connections" "after $late s: $(tail -3 "$(agent_dir)/agent.log")"
sleep 1
rm -f "$WORK/late.sig"
out=$(pkcs11-tool --module "$MODULE" --sign -m ECDSA-SHA256 -i "$WORK/data" -o "$WORK/late.sig" 2>&1 </dev/null)
# pkcs11-tool sees a session that is not logged in any more and asks for the PIN (no terminal: it fails).
[ ! -s "$WORK/late.sig" ] && grep -Eq "CKR_USER_NOT_LOGGED_IN|Logging in to" <<<"$out" \
  && ok "after it a host cannot sign without C_Login (the session is not logged in)" || bad "expired unlock refused at use" "$out"
check_out "unlock --status shows nothing unlocked (no negative time)" "no token of this store is unlocked" "$KS" unlock --status
kill "$CHURN" 2>/dev/null; wait "$CHURN" 2>/dev/null
[ "$(agent_pid)" = "$AGENT" ] && ok "the same agent throughout (pid $AGENT)" || bad "the same agent" "$AGENT -> $(agent_pid)"
finish
