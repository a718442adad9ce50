#!/usr/bin/env bash
# kill -9 of the keyshare agent under a mixed load (issue 16; docs/reliability.md
# "Agent: kill -9 under load"): NPROC processes of Tests/integration/c/agentload.c
# sign, create, find and destroy token objects through the agent while it is
# killed KILLS times. Pass: every process recovers (new session, login) and
# makes progress after its last recovery (the module restarted the agent),
# no CK_RV other than CKR_DEVICE_REMOVED / CKR_SESSION_HANDLE_INVALID / stale
# handles; every object whose C_CreateObject returned CKR_OK and that nobody
# tried to destroy exists, every one whose C_DestroyObject returned CKR_OK is
# gone; PRAGMA integrity_check ok.
# Usage: 77-agent-kill.sh KEYSHARE MODULE [NPROC SECONDS KILLS]
# (defaults 4 6 2 for make test; `make stress` runs 4 60 20).
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
NPROC=${3:-4} SECS=${4:-6} KILLS=${5:-2}
source "$(dirname "$0")/lib.sh"
agent_work agentkill
# The agent is what this script tests, whatever mode the suite runs in.
export KEYSHARE_AGENT_IDLE_TIMEOUT=60 KEYSHARE_AGENT_PROGRAM=$KS
unset KEYSHARE_IN_PROCESS
export PIN=1234-user SOPIN=9876-so P12PASS=keyshare-test KEYSHARE_TEST_PIN=1234-user
pids=()
agent_pid() { cat "$(agent_dir)/agent.pid" 2>/dev/null; }
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  p=$(agent_pid)
  if [ -n "$p" ] && kill "$p" 2>/dev/null; then  # not our child: wait until it is gone
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
  fi
  wait 2>/dev/null
  rm -rf "$WORK" "$KEYSHARE_HOME"
}
trap cleanup EXIT
ID="$FIXTURES/identities"

check "token create" "$KS" token create --label kill --pin-source env:PIN --so-pin-source env:SOPIN
check "import an RSA identity" "$KS" import "$ID/device-ds-ke.modern.p12" --pin-source env:PIN --password-source env:P12PASS
check "compile the load host" cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$WORK/agentload" \
  "$ROOT/Tests/integration/c/agentload.c" -ldl
mkdir "$WORK/logs"
for i in $(seq "$NPROC"); do "$WORK/agentload" "$MODULE" "$WORK/logs" "$SECS" >"$WORK/out.$i" 2>&1 & pids+=($!); done

# Kill the agent KILLS times, spread over the first 60 % of the run, each time
# the agent that is running then (the one the clients restarted).
killed=0 agents=()
for k in $(seq "$KILLS"); do
  sleep "$(awk -v s="$SECS" -v n="$KILLS" 'BEGIN { printf "%.2f", s * 0.6 / n }')"
  a=$(agent_pid)
  if [ -n "$a" ] && grep -q "agent" "/proc/$a/cmdline" 2>/dev/null && kill -9 "$a" 2>/dev/null; then
    killed=$((killed + 1)); agents+=("$a")
  fi
  # The next kill must hit a restarted agent, not the dead one's stale pid file.
  for _ in $(seq 100); do b=$(agent_pid); [ -n "$b" ] && [ "$b" != "$a" ] && kill -0 "$b" 2>/dev/null && break; sleep 0.05; done
done
fails=0
for p in "${pids[@]}"; do wait "$p" || fails=$((fails + 1)); done; pids=()
[ "$killed" = "$KILLS" ] && ok "the agent was killed (-9) $killed times under load (pids ${agents[*]})" \
  || bad "the agent was killed $KILLS times" "killed $killed"
summary=$(cat "$WORK"/out.*)
echo "$summary" | sed 's/^/       /'
rec=$(echo "$summary" | awk '/^pid/ {r += $6} END {print r + 0}')
[ "$fails" = 0 ] && ok "$NPROC processes recovered and went on (recoveries: $rec; no other CK_RV)" \
  || bad "every process recovered and went on after the last kill" "$summary"
[ "$rec" -ge "$NPROC" ] && ok "every process saw the agent die at least once" || bad "the kills reached the clients" "recoveries $rec"

# Acknowledged creates exist, acknowledged destroys are gone.
cat "$WORK"/logs/ops-*.log >"$WORK/all.log"
want=$(awk '$1 == "C" {c[$2] = 1} $1 == "d" || $1 == "D" {delete c[$2]} END {n = 0; for (l in c) n++; print n}' "$WORK/all.log")
gone=$(awk '$1 == "D" {n++} END {print n + 0}' "$WORK/all.log")
pkcs11-tool --module "$MODULE" --login --pin env:PIN -O --type data 2>/dev/null |
  sed -n "s/^[[:space:]]*label:[[:space:]]*'\(.*\)'$/\1/p" | sort -u >"$WORK/present"
missing=$(awk 'NR == FNR {p[$1] = 1; next} $1 == "C" {c[$2] = 1} $1 == "d" || $1 == "D" {delete c[$2]} END {for (l in c) if (!(l in p)) print l}' \
  "$WORK/present" "$WORK/all.log")
revived=$(awk 'NR == FNR {p[$1] = 1; next} $1 == "D" && ($2 in p) {print $2}' "$WORK/present" "$WORK/all.log")
[ "$want" -gt 0 ] && [ -z "$missing" ] && ok "all $want acknowledged creates (not destroyed) are present" \
  || bad "every acknowledged create is present" "of $want: missing $(echo $missing | head -c 300)"
[ -z "$revived" ] && ok "all $gone acknowledged destroys are gone" || bad "acknowledged destroys are gone" "present: $revived"
check "the store passes integrity_check" sh -c "sqlite3 '$KEYSHARE_HOME/keychain.db' 'PRAGMA integrity_check' | grep -qx ok"
finish
