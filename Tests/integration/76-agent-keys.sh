#!/usr/bin/env bash
# Key material in the agent (issue 16, docs/reliability.md "Agent: key
# material zeroed at logout"): while a client is logged in and has signed, the
# agent's memory holds the RSA key (its prime p); after C_Logout, after
# C_CloseAllSessions, after the last C_CloseSession, after C_Finalize, after
# `keyshare lock` and the expiry of `keyshare unlock --for` (a host that
# signed on the shared unlock, without C_Login) and after the client process exits, a root read of the agent's writable memory
# (/proc/PID/mem, which works on the non-dumpable agent) holds no 24-byte
# window of p in either byte order, and no copy of the token key. Also: the agent says in its log what it
# keeps in locked memory.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
agent_work agentkeys
# The agent is what this script tests, whatever mode the suite runs in.
export KEYSHARE_AGENT_IDLE_TIMEOUT=60 KEYSHARE_AGENT_PROGRAM=$KS
unset KEYSHARE_IN_PROCESS
export PIN=1234-user SOPIN=9876-so P12PASS=keyshare-test KEYSHARE_TEST_PIN=1234-user
HP=
agent_pid() { cat "$(agent_dir)/agent.pid" 2>/dev/null; }
cleanup() {
  [ -n "$HP" ] && kill "$HP" 2>/dev/null
  p=$(agent_pid)
  if [ -n "$p" ] && kill "$p" 2>/dev/null; then  # not our child: wait until it is gone
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
  fi
  wait 2>/dev/null
  rm -rf "$WORK" "$KEYSHARE_HOME"
}
trap cleanup EXIT
ID="$FIXTURES/identities"

check "token create" "$KS" token create --label keys --pin-source env:PIN --so-pin-source env:SOPIN
check "import an RSA identity" "$KS" import "$ID/device-ds-ke.modern.p12" --pin-source env:PIN --password-source env:P12PASS
check "compile the signing host" cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$WORK/agenthost" \
  "$ROOT/Tests/integration/c/agenthost.c" -ldl
NEEDLE=$(openssl pkcs12 -in "$ID/device-ds-ke.modern.p12" -nocerts -nodes -passin env:P12PASS 2>/dev/null |
  openssl rsa -noout -text 2>/dev/null | awk '/^prime1:/{f=1;next} /^prime2:/{f=0} f' | tr -d ' :\n' | sed 's/^00//')
[ ${#NEEDLE} -ge 128 ] && ok "the key's prime read for the search" || bad "the key's prime read for the search"

# The token key (what C_Login unlocks, 32 bytes): unwrapped here from the
# store's user PIN wrap (scrypt of the PIN, AES-256-GCM; Keychain/TokenKey.swift).
TOKENKEY=$(python3 - "$KEYSHARE_HOME/keychain.db" <<'PY'
import hashlib, os, sqlite3, sys
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
tid, salt, cost, w = sqlite3.connect(sys.argv[1]).execute(
    "SELECT token_id, user_salt, user_kdf, user_wrapped FROM tokens WHERE label = 'keys'").fetchone()
_, n, r, p = cost.split("$")
kek = hashlib.scrypt(os.environ["PIN"].encode(), salt=salt, n=1 << int(n), r=int(r), p=int(p), maxmem=1 << 30, dklen=32)
print(AESGCM(kek).decrypt(w[:12], w[12:], f"keyshare token key v1|user|{tid}".encode()).hex())
PY
)
[ ${#TOKENKEY} = 64 ] && ok "the token key unwrapped for the search" || bad "the token key unwrapped for the search"

# hits: how many places in the agent's writable mappings hold a window of p
# or the token key ("PRIME KEY").
hits() {
  python3 - "$(agent_pid)" "$NEEDLE" "$TOKENKEY" <<'PY'
import re, sys
pid, p, tk = sys.argv[1], bytes.fromhex(sys.argv[2]), bytes.fromhex(sys.argv[3])
windows = [p[16:40], p[::-1][16:40]]
n = k = 0
with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
    for line in maps:
        f = line.split()
        if f[1][1] != 'w':
            continue
        lo, hi = (int(x, 16) for x in f[0].split('-'))
        try:
            mem.seek(lo)
            data = mem.read(hi - lo)
        except OSError:
            continue
        n += sum(data.count(w) for w in windows)
        k += data.count(tk)
print(n, k)
PY
}

coproc HOST { exec "$WORK/agenthost" "$MODULE"; }
HP=$HOST_PID
read -r -t 20 line <&"${HOST[0]}"
[ "${line%% *}" = ready ] && ok "a host logs in and signs through the agent" || bad "a host signs through the agent" "$line"
say() { echo "$1" >&"${HOST[1]}"; read -r -t 20 r <&"${HOST[0]}"; echo "$r"; }

# What is locked depends on RLIMIT_MEMLOCK: all (mlockall), the key material
# (a secure heap: VmLck > 0), or nothing (said so). The log names the case.
LOG="$(agent_dir)/agent.log"
locked_kb=$(awk '/^VmLck:/ {print $2}' "/proc/$(agent_pid)/status")
if grep -q "key material is locked" "$LOG"; then
  [ "${locked_kb:-0}" -gt 0 ] && ok "the agent locks its key material (log says so; VmLck $locked_kb kB, RLIMIT_MEMLOCK $(ulimit -l) kB)" \
    || bad "the key material is locked" "VmLck $locked_kb kB; $(cat "$LOG")"
elif grep -Eq "all agent memory is locked|key material is not locked" "$LOG"; then
  ok "the agent's log says what it locks (VmLck $locked_kb kB, RLIMIT_MEMLOCK $(ulimit -l) kB)"
else
  bad "the agent's log says what key memory is locked" "$(cat "$LOG")"
fi
grep -q "freed heap memory is overwritten" "$LOG" && ok "the agent runs with freed memory overwritten" \
  || bad "the agent runs with freed memory overwritten" "$(cat "$LOG")"

# after EVENT: sign (so the key is in use), count (the control: > 0), EVENT, count (0).
after() {
  local ev=$1 expect=${2:-0x0} r n0 n1
  if [ "$ev" = lock ] || [ "$ev" = expiry ]; then
    # The host's own login ends; `keyshare unlock` logs it in (shared), it signs.
    r=$(say logout)
    "$KS" unlock --for "$([ "$ev" = lock ] && echo 60s || echo 5s)" --program "$WORK/agenthost" --pin-source env:PIN >/dev/null \
      || bad "keyshare unlock before $ev"
    r=$(say shared)
    [ "$r" = 0x0 ] || bad "the host signs on the shared unlock before $ev" "rv $r"
  elif [ "$ev" != logout ]; then
    r=$(say renew); r=$(say sign)
  else
    r=$(say sign)
  fi
  n0=$(hits)
  if [ "$ev" = lock ]; then
    "$KS" lock >/dev/null && r=0x0 || r=failed
  elif [ "$ev" = expiry ]; then
    for _ in $(seq 100); do "$KS" unlock --status 2>/dev/null | grep -q "no token of this store is unlocked" && break; sleep 0.1; done
    sleep 0.6  # the agent's expiry pass runs every 500 ms
    r=0x0
  elif [ "$ev" = exit ]; then
    exec {HOST[1]}>&-; wait "$HP" 2>/dev/null; HP=
    for _ in $(seq 50); do grep -q "client pid .* gone" "$(agent_dir)/agent.log" && break; sleep 0.1; done
    r=0x0
  elif [ "$ev" = "death with a thread blocked in C_WaitForSlotEvent" ]; then
    # Issue 26 defect 5: the process dies (kill -9) while one of its threads
    # waits in the agent; its other connections close, the waiting one's
    # thread stays blocked in the module. The agent finalises it from its
    # pidfd, which wakes the wait.
    r=$(say waiter)
    [ "$r" = 0x0 ] || bad "the host starts a thread blocked in C_WaitForSlotEvent" "rv $r"
    kill -9 "$HP"; wait "$HP" 2>/dev/null; HP=
    local t0=$SECONDS
    for _ in $(seq 50); do grep -q "client pid .* gone" "$(agent_dir)/agent.log" && break; sleep 0.1; done
    grep -q "client pid .* gone" "$(agent_dir)/agent.log" && ok "the dead client (a thread blocked in C_WaitForSlotEvent) is finalised ($((SECONDS - t0)) s after kill -9)" \
      || bad "the dead client with a blocked wait is finalised" "$(tail -3 "$(agent_dir)/agent.log")"
    r=0x0
  else
    r=$(say "$ev")
  fi
  n1=$(hits)
  set -- $n0; local p0=${1:-0} k0=${2:-0}
  set -- $n1; local p1=${1:-x} k1=${2:-x}
  [ "$p0" -gt 0 ] && [ "$k0" -gt 0 ] && ok "logged in and signing: the agent's memory holds the prime ($p0 places) and the token key ($k0; the search can fail)" \
    || bad "control before $ev: the prime and the token key are in the agent's memory" "found $p0 and $k0"
  [ "$r" = "$expect" ] && [ "$p1" = 0 ] && [ "$k1" = 0 ] && ok "after $ev the agent's memory holds none of the prime and no token key" \
    || bad "after $ev the agent's memory holds none of the prime and no token key" "rv $r, prime $p1 places, token key $k1"
}
after logout
after closeall
after close
after finalize
after lock
after expiry
after exit
# A new host, then its death with a wait blocked in the agent (issue 26 defect 5).
: >"$(agent_dir)/agent.log"
coproc HOST { exec "$WORK/agenthost" "$MODULE"; }
HP=$HOST_PID
read -r -t 20 line <&"${HOST[0]}"
[ "${line%% *}" = ready ] && ok "a second host logs in and signs" || bad "a second host signs" "$line"
after "death with a thread blocked in C_WaitForSlotEvent"
# No client is left behind (before the fix it stayed, so the agent never reached its idle exit).
st=$("$KS" agent status --json 2>&1)
grep -q '"clients" : "0"' <<<"$st" && ok "after the dead client the agent holds no client (agent status: clients 0)" \
  || bad "the agent holds no client after the dead client" "$st"
check "the store passes integrity_check" sh -c "sqlite3 '$KEYSHARE_HOME/keychain.db' 'PRAGMA integrity_check' | grep -qx ok"
finish
