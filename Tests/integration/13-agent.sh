#!/usr/bin/env bash
# The keyshare agent (issue 16, docs/agent.md): the module as a client of a
# per-user agent that holds the keys. Checks: 8 concurrent first users start
# exactly one agent (75-agent-core.sh: a logged-in signing host's core holds
# none of the private keys' bytes); a relative KEYSHARE_HOME names the
# client's store; the agent is
# non-dumpable for another process of the same non-root uid; another uid is
# refused; kill -9 of the agent: the call in flight gets CKR_DEVICE_REMOVED,
# old sessions CKR_SESSION_HANDLE_INVALID, a new session works. The agent is
# the default mode (no variable set); the auto-started agent's environment is
# a minimal one, not its starter's (a secret there does not live on in it).
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
agent_work agent
chmod 0711 "$WORK"
export KEYSHARE_AGENT_IDLE_TIMEOUT=60 KEYSHARE_AGENT_PROGRAM=$KS
# This script tests the agent itself, also in `make integration-test-in-process`
# (KEYSHARE_IN_PROCESS=1 is the only way to the in-process mode); its control sets it per command.
unset KEYSHARE_IN_PROCESS KEYSHARE_AGENT
# A secret in the first starter's environment (as a PIN in a shell variable is).
export KS_IT_STARTER_SECRET=starter-secret-4711
export PIN=1234-user SOPIN=9876-so P12PASS=keyshare-test KEYSHARE_TEST_PIN=1234-user
pids=()
agent_pid() { cat "$(agent_dir)/agent.pid" 2>/dev/null; }
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  p=$(agent_pid); [ -n "$p" ] && kill "$p" 2>/dev/null
  [ -n "${NOBODY_AGENT:-}" ] && kill "$NOBODY_AGENT" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$WORK" "$KEYSHARE_HOME"
}
trap cleanup EXIT
ID="$FIXTURES/identities"

check "token create" "$KS" token create --label agent --pin-source env:PIN --so-pin-source env:SOPIN
check "import an RSA identity" "$KS" import "$ID/device-ds-ke.modern.p12" --pin-source env:PIN --password-source env:P12PASS
check "compile the signing host" cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$WORK/agenthost" \
  "$ROOT/Tests/integration/c/agenthost.c" -ldl

# --- 8 concurrent first users, exactly one agent -------------------------------
for i in $(seq 8); do pkcs11-tool --module "$MODULE" -L >"$WORK/l$i" 2>&1 & pids+=($!); done
okc=0; for p in "${pids[@]}"; do wait "$p" && okc=$((okc + 1)); done; pids=()
[ "$okc" = 8 ] && ok "8 concurrent first users all list the token" || bad "8 concurrent first users" "$(cat "$WORK"/l*)"
n=$(grep -c "listening on" "$(agent_dir)/agent.log")
running=$(pgrep -c -f -- "^$KS agent" || true)
[ "$n" = 1 ] && [ "$running" = 1 ] && ok "exactly one agent started (log: $n listening, $running running)" \
  || bad "exactly one agent started" "listening lines: $n, processes: $running"
AGENT=$(agent_pid)
# The agent's environment (root reads /proc/PID/environ of the non-dumpable agent).
env_of_agent=$(tr '\0' '\n' <"/proc/$AGENT/environ" 2>&1)
if grep -q '^XDG_RUNTIME_DIR=' <<<"$env_of_agent" && ! grep -Eq '^(KS_IT_STARTER_SECRET|PIN|SOPIN|P12PASS|KEYSHARE_TEST_PIN|KEYSHARE_KDF_LOG2N)=' <<<"$env_of_agent"; then
  ok "the auto-started agent's environment is minimal: no secret of its starter ($(grep -c = <<<"$env_of_agent") variables)"
else
  bad "the auto-started agent's environment is minimal" "$(grep -Eo '^[A-Z0-9_]+=' <<<"$env_of_agent" | tr '\n' ' ')"
fi
[ -S "$(agent_dir)/agent.sock" ] && [ "$(stat -c %a "$XDG_RUNTIME_DIR/keyshare")" = 700 ] && [ "$(stat -c %a "$(agent_dir)")" = 700 ] \
  && ok "socket in \$XDG_RUNTIME_DIR/keyshare/s.<store> (0700)" || bad "socket directory"

# A relative KEYSHARE_HOME names the store under the CLIENT's working
# directory (as in-process), not under the agent's: the module sends it absolute.
MODABS=$(realpath "$MODULE")
out=$(cd "$(dirname "$KEYSHARE_HOME")" && KEYSHARE_HOME=./$(basename "$KEYSHARE_HOME") pkcs11-tool --module "$MODABS" -L 2>&1)
grep -Eq "token label +: agent$" <<<"$out" && ok "a relative KEYSHARE_HOME (./$(basename "$KEYSHARE_HOME") from its parent) names the client's store in the agent" \
  || bad "a relative KEYSHARE_HOME names the client's store in the agent" "$(grep -E "label|Slot" <<<"$out" | head -3)"

# --- another uid is refused ---------------------------------------------------------
U=65534
AD=$(agent_dir)
chmod 0711 "$XDG_RUNTIME_DIR" "$XDG_RUNTIME_DIR/keyshare" "$AD"; chmod 0666 "$AD/agent.sock"
out=$(setpriv --reuid $U --regid $U --clear-groups /usr/bin/python3 - "$(agent_dir)/agent.sock" <<'PY'
import socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
hello = struct.pack('<IHH', 0x3141534b, 1, 0) + bytes(16) + b'\0\0\0\0\0' * 4
try:
    # The agent may close before the hello is even sent: that is a refusal too.
    s.sendall(struct.pack('<I', len(hello)) + hello)
    print('reply' if s.recv(64) else 'closed')
except (ConnectionResetError, BrokenPipeError):
    print('closed')
PY
)
chmod 0700 "$XDG_RUNTIME_DIR" "$XDG_RUNTIME_DIR/keyshare" "$AD"; chmod 0600 "$AD/agent.sock"
[ "$out" = closed ] && grep -q "uid $U is not the agent's uid" "$(agent_dir)/agent.log" \
  && ok "a client of another uid is refused (SO_PEERCRED), even with the directory opened" \
  || bad "another uid is refused" "client saw: $out"

# --- the agent of a non-root user is non-dumpable for that user's other processes ----
mkdir -m 0700 "$WORK/nobody"; chown $U:$U "$WORK/nobody"; copy_images "$WORK"
(exec setpriv --reuid $U --regid $U --clear-groups env -i HOME="$WORK/nobody" XDG_RUNTIME_DIR="$WORK/nobody" \
  "$WORK/keyshare" agent --idle-timeout 30 2>/dev/null) &
NOBODY_AGENT=$!
# Its socket: agent.sock under $XDG_RUNTIME_DIR/keyshare (s.<hash>/ for a store other than the default).
nobody_sock() { find "$WORK/nobody/keyshare" -name agent.sock -type s 2>/dev/null | head -1; }
for _ in $(seq 50); do [ -n "$(nobody_sock)" ] && break; sleep 0.1; done
[ -n "$(nobody_sock)" ] && kill -0 "$NOBODY_AGENT" 2>/dev/null \
  && ok "uid $U's agent runs and listens (the checks below are about it)" || bad "uid $U's agent runs and listens"
out=$(setpriv --reuid $U --regid $U --clear-groups gcore -o "$WORK/nobody/core" "$NOBODY_AGENT" 2>&1)
[ ! -e "$WORK/nobody/core.$NOBODY_AGENT" ] && ok "gcore of the agent by another process of its uid fails" \
  || bad "gcore of the agent fails" "$out"
setpriv --reuid $U --regid $U --clear-groups dd if="/proc/$NOBODY_AGENT/mem" bs=1 count=1 skip=4194304 of=/dev/null 2>/dev/null \
  && bad "/proc/PID/mem of the agent is unreadable for its uid" || ok "/proc/PID/mem of the agent is unreadable for its uid"
kill "$NOBODY_AGENT" 2>/dev/null; wait "$NOBODY_AGENT" 2>/dev/null; NOBODY_AGENT=

# --- kill -9 of the agent under a logged-in client --------------------------------------
coproc HOST { exec "$WORK/agenthost" "$MODULE"; }
hp=$HOST_PID; pids+=("$hp")
read -r -t 20 line <&"${HOST[0]}"
[ "${line%% *}" = ready ] && ok "a host signs through the agent" || bad "a host signs through the agent" "$line"
kill -9 "$(agent_pid)"; sleep 0.2
echo sign >&"${HOST[1]}"; read -r -t 20 r1 <&"${HOST[0]}"
echo sign >&"${HOST[1]}"; read -r -t 20 r2 <&"${HOST[0]}"
echo renew >&"${HOST[1]}"; read -r -t 20 r3 <&"${HOST[0]}"
exec {HOST[1]}>&-; wait "$hp" 2>/dev/null
[ "$r1" = 0x32 ] && ok "agent killed: the call in flight gets CKR_DEVICE_REMOVED" || bad "CKR_DEVICE_REMOVED after kill -9" "got $r1"
[ "$r2" = 0xb3 ] && ok "then the old session is CKR_SESSION_HANDLE_INVALID at the new agent" || bad "old session invalid" "got $r2"
[ "$r3" = 0x0 ] && ok "a new session logs in and signs (the agent was restarted on demand)" || bad "new session after restart" "got $r3"
[ "$(agent_pid)" != "$AGENT" ] && [ -n "$(agent_pid)" ] && ok "a new agent runs" || bad "a new agent runs"
check "the store passes integrity_check after the kill" sh -c "sqlite3 '$KEYSHARE_HOME/keychain.db' 'PRAGMA integrity_check' | grep -qx ok"

# --- the auto-started agent keeps none of its starter's descriptors ----------------------
# A starter's descriptor without close-on-exec (a shell's `exec 9>lock` held
# by flock, a pipe someone waits to see closed) must not live on in the agent.
old=$(agent_pid); kill "$old" 2>/dev/null
for _ in $(seq 50); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
: >"$WORK/starter.lock"
( exec 7>>"$WORK/starter.lock"; flock 7; pkcs11-tool --module "$MODULE" -L >/dev/null 2>&1 )
new=$(agent_pid)
held=$(ls -l "/proc/$new/fd" 2>/dev/null | grep -c "starter.lock")
[ -n "$new" ] && [ "$new" != "$old" ] && [ "$held" = 0 ] && flock -n "$WORK/starter.lock" true \
  && ok "the auto-started agent holds none of its starter's descriptors (the starter's flock is free)" \
  || bad "the auto-started agent holds none of its starter's descriptors" "agent $new holds starter.lock $held times"
finish
