#!/usr/bin/env bash
# Bounded adaptive polling on the agent's socket (docs/agent-transport.md, "Round trips:
# bounded polling"): after a request the client polls briefly for the reply,
# after a reply the agent's connection thread polls briefly for the next
# request, both before blocking. Checks: the agent names its budget
# (KEYSHARE_AGENT_SPIN_US, default 50 us; 0 = off); calls work with polling on
# and off; an idle connected client and its agent use no CPU (utime+stime of
# both flat over 1 s right after a burst of calls); a long call in the agent
# (RSA-3072 key generation) costs the waiting client almost no CPU. The
# per-call times are printed (speed is for `make bench`).
# The shared region beside the socket ("Round trips: shared memory"): the
# agent names it (KEYSHARE_AGENT_SHM=0: off), a polling connection's calls
# and replies go through it (the agent's line at the connection's end counts
# them), none with it off; a hostile client that scribbles over its region
# and the socket gets a sealed region, and the agent survives it and goes on
# serving another client.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
agent_work spin
export KEYSHARE_AGENT_IDLE_TIMEOUT=60 KEYSHARE_AGENT_PROGRAM=$KS
# This script tests the agent's transport: always through the agent.
unset KEYSHARE_IN_PROCESS KEYSHARE_AGENT KEYSHARE_AGENT_SPIN_US
export PIN=1234-user SOPIN=9876-so KEYSHARE_TEST_PIN=1234-user
HOSTPID=
agent_pid() { cat "$(agent_dir)/agent.pid" 2>/dev/null; }
stop_agent() {
  local p; p=$(agent_pid)
  if [ -n "$p" ] && tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q " agent"; then
    kill "$p" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  fi
}
cleanup() {
  [ -n "$HOSTPID" ] && kill "$HOSTPID" 2>/dev/null
  stop_agent
  wait 2>/dev/null
  rm -rf "$WORK" "$KEYSHARE_HOME"
}
trap cleanup EXIT
# utime + stime of a process (all its threads), in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null; }

check "token create" "$KS" token create --label spin --pin-source env:PIN --so-pin-source env:SOPIN
check "compile the host" cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$WORK/spinhost" \
  "$ROOT/Tests/integration/c/spinhost.c" -ldl

# One round: a host connected (auto-starting the agent with the given
# environment), a burst of empty calls, then 1 s idle, then a long call.
round() {  # $1: label, $2: KEYSHARE_AGENT_SPIN_US ("" = unset), $3: the budget the agent must name,
           # $4: KEYSHARE_AGENT_SHM ("" = unset: the region on)
  local label=$1 knob=$2 want=$3 shm=${4:-} line a0 h0 a1 h1 run kg envs=()
  stop_agent
  if [ -d "$XDG_RUNTIME_DIR/keyshare" ]; then : >"$(agent_dir)/agent.log"; fi
  [ -n "$knob" ] && envs+=(KEYSHARE_AGENT_SPIN_US="$knob")
  [ -n "$shm" ] && envs+=(KEYSHARE_AGENT_SHM="$shm")
  coproc HOST { exec env "${envs[@]}" "$WORK/spinhost" "$MODULE" 2000; }
  HOSTPID=$HOST_PID
  read -r -t 60 line <&"${HOST[0]}"
  [ "${line%% *}" = ready ] && ok "$label: 2,000 empty calls through the agent (${line#ready } us per call)" \
    || bad "$label: empty calls through the agent" "$line"
  grep -q "poll $want us" "$(agent_dir)/agent.log" \
    && ok "$label: the agent polls at most $want us (its log says so)" \
    || bad "$label: the agent names its poll budget $want us" "$(grep listening "$(agent_dir)/agent.log")"
  # Idle right after a burst: both processes must sleep, not poll.
  echo run >&"${HOST[1]}"; read -r -t 60 run <&"${HOST[0]}"
  AP=$(agent_pid)
  sleep 0.1
  a0=$(cpu_ticks "$AP"); h0=$(cpu_ticks "$HOSTPID")
  sleep 1
  a1=$(cpu_ticks "$AP"); h1=$(cpu_ticks "$HOSTPID")
  # At most 3 ticks (30 ms) each: a process that polled would burn ~100 in the second; an
  # asleep agent's housekeeping (its 500 ms accept poll, unlock expiry) was once charged 2
  # ticks (tick accounting charges a whole tick to whoever runs at it).
  [ -n "$a0" ] && [ -n "$h0" ] && [ $((a1 - a0)) -le 3 ] && [ $((h1 - h0)) -le 3 ] \
    && ok "$label: an idle connected client and its agent use no CPU over 1 s (ticks: agent $((a1 - a0)), client $((h1 - h0)); burst $run us per call)" \
    || bad "$label: idle client and agent use no CPU" "agent $a0 -> $a1, client $h0 -> $h1 ticks"
  # A long call: the waiting client polls one budget at most, then sleeps.
  echo keygen >&"${HOST[1]}"; read -r -t 120 kg <&"${HOST[0]}"
  [ "${kg%% *}" = 0x0 ] && [ "${kg#* }" -lt 20000 ] \
    && ok "$label: an RSA-3072 key generation in the agent costs the waiting client ${kg#* } us of CPU (< 20 ms)" \
    || bad "$label: a long call costs the client little CPU" "$kg"
  exec {HOST[1]}>&-; wait "$HOSTPID" 2>/dev/null; HOSTPID=
  # The agent's line at the connection's end: how many frames went through the region.
  local log=$(agent_dir)/agent.log closed= calls=0 viashm=0
  for _ in $(seq 50); do closed=$(grep -m1 "connection closed after" "$log"); [ -n "$closed" ] && break; sleep 0.1; done
  if [[ $closed =~ after\ ([0-9]+)\ calls:\ ([0-9]+)\ calls ]]; then calls=${BASH_REMATCH[1]}; viashm=${BASH_REMATCH[2]}; fi
  if [ "$shm" = 0 ]; then
    grep -q "shared memory off" "$log" && [[ $closed == *"0 calls and 0 replies through shared memory (none: sockets only)"* ]] \
      && ok "$label: no shared region, every frame on the socket ($calls calls)" \
      || bad "$label: no shared region" "$(grep -E 'listening|connection closed' "$log")"
  elif [ "$want" = 0 ]; then
    grep -q "shared memory on" "$log" && [ "$calls" -ge 2000 ] \
      && ok "$label: the region is there, used only when a frame meets no sleeper ($viashm of $calls calls)" \
      || bad "$label: the connection's frames are counted" "$closed"
  else
    grep -q "shared memory on" "$log" && [ "$calls" -ge 2000 ] && [ "$viashm" -gt 0 ] \
      && ok "$label: calls through the shared region while the agent polls ($viashm of $calls calls)" \
      || bad "$label: calls through the shared region" "$(grep -E 'listening|connection closed' "$log")"
  fi
}

round "default" "" 50
round "KEYSHARE_AGENT_SPIN_US=0" 0 0
round "KEYSHARE_AGENT_SPIN_US=200" 200 200
round "KEYSHARE_AGENT_SHM=0" "" 50 0

# Pairs (issue 30, docs/agent-transport.md "Round trips: init and call in one frame"): an
# init that succeeded before with the same arguments travels with its call.
# c/pairhost.c checks the PKCS #11 answers (errors from the init, a second init
# refused, length queries, multi-part, symmetric, a key destroyed in between);
# the same host with KEYSHARE_AGENT_PAIR=0 must print the same lines, and the
# agent must count fewer calls with pairs on.
check "compile the pair host" cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$WORK/pairhost" \
  "$ROOT/Tests/integration/c/pairhost.c" -ldl
pair_run() {  # $1: KEYSHARE_AGENT_PAIR ("" = unset); prints the host's output, then "calls N"
  stop_agent
  if [ -d "$XDG_RUNTIME_DIR/keyshare" ]; then : >"$(agent_dir)/agent.log"; fi
  local envs=() n=0 line
  [ -n "$1" ] && envs+=(KEYSHARE_AGENT_PAIR="$1")
  env "${envs[@]}" "$WORK/pairhost" "$MODULE"
  for _ in $(seq 50); do grep -q "connection closed after" "$(agent_dir)/agent.log" 2>/dev/null && break; sleep 0.1; done
  while read -r line; do [[ $line =~ after\ ([0-9]+)\ calls ]] && n=$((n + BASH_REMATCH[1])); done < <(grep "connection closed after" "$(agent_dir)/agent.log")
  echo "calls $n"
}
on=$(pair_run ""); off=$(pair_run 0)
[[ $on == *" passed, 0 failed"* ]] && ok "pairs: init and call in one frame keep every PKCS #11 answer ($(grep -c '^ok' <<<"$on") checks)" \
  || bad "pairs keep the PKCS #11 answers" "$(grep -v '^ok' <<<"$on")"
[ "$(grep -v '^calls' <<<"$on")" = "$(grep -v '^calls' <<<"$off")" ] \
  && ok "pairs: the same answers, line for line, with KEYSHARE_AGENT_PAIR=0" \
  || bad "pairs: the same answers with pairs off" "$(diff <(echo "$on") <(echo "$off") | head -10)"
con=$(sed -n 's/^calls //p' <<<"$on"); coff=$(sed -n 's/^calls //p' <<<"$off")
[ -n "$con" ] && [ -n "$coff" ] && [ "$con" -gt 0 ] && [ "$con" -lt "$coff" ] \
  && ok "pairs: fewer round trips ($con frames with pairs, $coff without)" \
  || bad "pairs: fewer round trips" "with $con, without $coff"

# A hostile client (c/shmhostile.c) beside a well-behaved one: its region is
# sealed; scribbling over the region and the socket for a second ends its
# own connection at most; the agent (same pid) still serves the other.
check "compile the hostile region client" cc -O1 -Wall -Werror -pthread -I "$ROOT/Sources/AgentProtocol/include" \
  -I "$ROOT/pkcs11/types" -o "$WORK/shmhostile" "$ROOT/Tests/integration/c/shmhostile.c"
stop_agent
coproc HOST { exec "$WORK/spinhost" "$MODULE" 200; }
HOSTPID=$HOST_PID
read -r -t 60 line <&"${HOST[0]}"
AP=$(agent_pid)
out=$("$WORK/shmhostile" "$(agent_dir)/agent.sock" 2>&1)
[[ $out == *"region "*" bytes"* && $out == *"sealed (Operation not permitted)"* ]] \
  && ok "a client's region cannot be shrunk or grown (sealed memfd: $(echo "$out" | head -1))" \
  || bad "the region is sealed" "$out"
echo run >&"${HOST[1]}"; read -r -t 60 run <&"${HOST[0]}"
[ -n "$run" ] && [ "$(agent_pid)" = "$AP" ] && kill -0 "$AP" 2>/dev/null \
  && ok "after a client scribbled over its region ($(echo "$out" | tail -1)) the agent (pid $AP) still serves another ($run us per call)" \
  || bad "the agent survives a hostile region" "agent $AP -> $(agent_pid), host said '$run'; $out"
exec {HOST[1]}>&-; wait "$HOSTPID" 2>/dev/null; HOSTPID=
finish
