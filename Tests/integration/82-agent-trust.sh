#!/usr/bin/env bash
# Whom the module and the CLI trust with a PIN, and what an agent inherits
# (issue 26 defects 2 and 3; docs/agent.md "Reaching the agent", "Start").
#
# Defect 2: with XDG_RUNTIME_DIR unset (cron, su, sudo -i) another local user
# pre-creates /tmp/keyshare-agent-UID with a fake agent in it; with
# XDG_RUNTIME_DIR naming another user's directory (sudo -E). Before the fix
# the module sent the fake agent the PIN at C_Login and the CLI at `keyshare
# unlock`. Now the directory (ours, 0700, not a link, ancestors ours or
# root's) and the listener's uid (SO_PEERCRED) are checked before a byte is
# sent, and the refusal is one line naming the path, owner and mode
# (KEYSHARE_DEBUG for the module; always for the CLI).
# Defect 3: an agent started by the CLI inherited the CLI's whole
# environment (PINs, KEYSHARE_KDF_LOG2N). Now the one start path gives it the
# same minimal environment, and the agent wraps PINs at the default cost.
# A setuid or setgid host (sudo or su with pam_p11) runs with its invoker's
# environment: the module reads none of it (secure_getenv) and starts no
# agent there (before: the invoker's KEYSHARE_AGENT_PROGRAM ran with euid 0,
# and its KEYSHARE_LOG was created as root).
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
agent_work trust
export KEYSHARE_AGENT_IDLE_TIMEOUT=60 KEYSHARE_AGENT_PROGRAM=$KS
unset KEYSHARE_IN_PROCESS
export PIN=1234-user SOPIN=9876-so P12PASS=keyshare-test
VICTIM=1000 ATTACKER=65534
getent passwd $VICTIM >/dev/null || { bad "uid $VICTIM exists (the victim of these checks)"; finish; exit 1; }
FAKES=()
cleanup() {
  for p in "${FAKES[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  # Agents the victim started, by their pid files (stop_agent checks each is a keyshare agent).
  [ -n "${VHOME:-}" ] && stop_agent "$VHOME/run"
  [ -n "${PLANTED:-}" ] && rm -rf "$PLANTED"
  rm -rf "$WORK" "$KEYSHARE_HOME"
}
trap cleanup EXIT
chmod 0711 "$WORK"
copy_images "$WORK"
VKS=$WORK/keyshare VMOD=$WORK/libkeyshare-pkcs11.so

# The victim: uid 1000 with a store and a token, its own environment.
VHOME=$WORK/victim
mkdir -m 0700 "$VHOME" "$VHOME/run"; chown -R $VICTIM:$VICTIM "$VHOME"
# as_victim CMD...: CMD as uid 1000 in its own home; PIN and SOPIN reach it in the exported
# environment (never on a command line), XDG_RUNTIME_DIR only where a call names it.
as_victim() {
  setpriv --reuid $VICTIM --regid $VICTIM --clear-groups env -u XDG_RUNTIME_DIR -u KEYSHARE_DEBUG PATH=/usr/bin:/bin \
    HOME="$VHOME" KEYSHARE_HOME="$VHOME/store" KEYSHARE_AGENT_PROGRAM="$VKS" KEYSHARE_KDF_LOG2N=10 \
    KEYSHARE_AGENT_IDLE_TIMEOUT=30 "$@"
}
check "the victim makes a token" as_victim XDG_RUNTIME_DIR="$VHOME/run" "$VKS" token create --label victim --pin-source env:PIN --so-pin-source env:SOPIN
check "the victim makes a key" as_victim XDG_RUNTIME_DIR="$VHOME/run" "$VKS" key generate --type ec --curve P-256 --label k --tag k --pin-source env:PIN
stop_agent "$VHOME/run"

# A fake agent of the attacker: listens at PATH, records every byte it receives to OUT.
cat >"$WORK/fake.py" <<'PY'
import os, socket, sys
path, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX)
s.bind(path); os.chmod(path, 0o777); s.listen(8)
open(out, "wb").close()
while True:
    c, _ = s.accept()
    c.settimeout(3)
    try:
        while True:
            b = c.recv(65536)
            if not b: break
            with open(out, "ab") as f: f.write(b)
    except OSError:
        pass
    c.close()
PY
chmod 0644 "$WORK/fake.py"

# --- XDG_RUNTIME_DIR unset: a planted /tmp/keyshare-agent-1000 ----------------------------
PLANTED=/tmp/keyshare-agent-$VICTIM
rm -rf "$PLANTED"
SOCK=$(as_victim "$VKS" agent socket 2>/dev/null) || SOCK=$PLANTED/agent.sock   # (0.3.0: no per-store directory)
case $SOCK in "$PLANTED"/*) ok "without XDG_RUNTIME_DIR the victim's socket is under $PLANTED" ;;
  *) bad "the fallback directory" "$SOCK" ;; esac
setpriv --reuid $ATTACKER --regid $ATTACKER --clear-groups sh -c "mkdir -p '$(dirname "$SOCK")' && chmod 0755 '$PLANTED' '$(dirname "$SOCK")'"
touch "$WORK/got1"; chown $ATTACKER "$WORK/got1"
setpriv --reuid $ATTACKER --regid $ATTACKER --clear-groups /usr/bin/python3 "$WORK/fake.py" "$SOCK" "$WORK/got1" & FAKES+=($!)
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] && ok "the attacker's fake agent listens at $SOCK" || bad "the fake agent listens"
out=$(as_victim KEYSHARE_DEBUG=1 timeout 30 pkcs11-tool --module "$VMOD" --login --pin env:PIN -O 2>&1)
grep -q "CKR_DEVICE_ERROR" <<<"$out" && ok "the module refuses the planted directory: C_Initialize is CKR_DEVICE_ERROR" \
  || bad "the module refuses the planted directory" "$out"
line=$(grep "keyshare-pkcs11" <<<"$out" | grep "refusing")
grep -q "$PLANTED" <<<"$line" && grep -q "uid $ATTACKER" <<<"$line" && grep -q "0755" <<<"$line" \
  && ok "with KEYSHARE_DEBUG the host's stderr names the path, its owner and its mode: ${line#*: }" \
  || bad "the refusal line names path, owner and mode" "$out"
[ ! -s "$WORK/got1" ] && ok "the fake agent received nothing (no hello, no PIN)" || bad "the fake agent received nothing" "$(wc -c <"$WORK/got1") bytes"
err=$(as_victim "$VKS" unlock --for 10s --pin-source env:PIN 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] && [ "$(grep -c . <<<"$err")" = 1 ] && grep -q "$PLANTED" <<<"$err" && grep -q "uid $ATTACKER" <<<"$err" \
  && ok "keyshare unlock refuses it in one line: $err" || bad "keyshare unlock refuses the planted directory" "rc $rc: $err"
[ ! -s "$WORK/got1" ] && ok "the fake agent still received nothing (the CLI sent no PIN)" || bad "the CLI sent nothing" "$(wc -c <"$WORK/got1") bytes"
kill "${FAKES[-1]}" 2>/dev/null; wait "${FAKES[-1]}" 2>/dev/null
rm -rf "$PLANTED"

# --- XDG_RUNTIME_DIR naming another user's directory (sudo -E) ------------------------------
OTHER=$WORK/other-run
mkdir -m 0711 "$OTHER"; mkdir -m 0777 "$OTHER/keyshare"; chown -R $ATTACKER:$ATTACKER "$OTHER"
out=$(as_victim XDG_RUNTIME_DIR="$OTHER" KEYSHARE_DEBUG=1 timeout 30 pkcs11-tool --module "$VMOD" --login --pin env:PIN -O 2>&1)
grep -q CKR_DEVICE_ERROR <<<"$out" && grep "refusing" <<<"$out" | grep -q "owned by uid $ATTACKER" \
  && ok "XDG_RUNTIME_DIR of another user: refused ($(grep -o 'its parent [^ ]* is owned by uid [0-9]*' <<<"$out" | head -1))" \
  || bad "XDG_RUNTIME_DIR of another user is refused" "$out"
[ -z "$(find "$OTHER" -user $VICTIM 2>/dev/null)" ] && ok "nothing of the victim's was made in the other user's directory" \
  || bad "nothing made in the other user's directory" "$(find "$OTHER" -user $VICTIM)"

# --- a listener of another uid in a directory that passes the checks ----------------------
# Root binds the socket in the victim's own directory, gives the file to the victim, then
# listens as the attacker: only SO_PEERCRED can tell.
VRUN=$VHOME/run2; mkdir -m 0700 "$VRUN"; chown $VICTIM:$VICTIM "$VRUN"
VSOCK=$(as_victim XDG_RUNTIME_DIR="$VRUN" "$VKS" agent socket)
mkdir -m 0700 -p "$(dirname "$VSOCK")"; chown -R $VICTIM:$VICTIM "$VRUN"
/usr/bin/python3 - "$VSOCK" "$VICTIM" "$ATTACKER" "$WORK/got3" <<'PY' & FAKES+=($!)
import os, socket, sys
path, victim, attacker, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
s = socket.socket(socket.AF_UNIX); s.bind(path); os.chown(path, victim, victim); os.chmod(path, 0o600)
open(out, "wb").close(); os.chown(out, attacker, attacker)
os.setgid(attacker); os.setuid(attacker)
s.listen(8)
while True:
    c, _ = s.accept(); c.settimeout(3)
    try:
        b = c.recv(65536)
        with open(out, "ab") as f: f.write(b)
    except OSError:
        pass
    c.close()
PY
for _ in $(seq 50); do [ -S "$VSOCK" ] && break; sleep 0.1; done
out=$(as_victim XDG_RUNTIME_DIR="$VRUN" KEYSHARE_DEBUG=1 timeout 30 pkcs11-tool --module "$VMOD" --login --pin env:PIN -O 2>&1)
grep -q CKR_DEVICE_ERROR <<<"$out" && grep -q "served by uid $ATTACKER" <<<"$out" \
  && ok "a socket whose listener is another uid is refused (SO_PEERCRED): $(grep -o 'refusing.*' <<<"$out" | head -1)" \
  || bad "the listener's uid is checked" "$out"
err=$(as_victim XDG_RUNTIME_DIR="$VRUN" "$VKS" unlock --for 10s --pin-source env:PIN 2>&1 >/dev/null)
grep -q "served by uid $ATTACKER" <<<"$err" && ok "and by the CLI: $err" || bad "the CLI checks the listener's uid" "$err"
[ ! -s "$WORK/got3" ] && ok "that listener received nothing" || bad "the other uid's listener received nothing" "$(wc -c <"$WORK/got3") bytes"
kill "${FAKES[-1]}" 2>/dev/null; wait "${FAKES[-1]}" 2>/dev/null

# --- control: the victim's own directory works ------------------------------------------------
rm -rf "$VRUN"; mkdir -m 0700 "$VRUN"; chown $VICTIM:$VICTIM "$VRUN"
printf 'trust' >"$WORK/data"; chmod 0644 "$WORK/data"
check "control: in its own runtime directory the victim's host logs in and signs" \
  as_victim XDG_RUNTIME_DIR="$VRUN" pkcs11-tool --module "$VMOD" --login --pin env:PIN --sign -m ECDSA-SHA256 -i "$WORK/data" -o /dev/null
stop_agent "$VRUN"

# --- defect 3: an agent started by the CLI gets the minimal environment -------------------------
new_home   # this script's own store (root), KEYSHARE_KDF_LOG2N=10 for the CLI's own wraps
check "token create" "$KS" token create --label env --pin-source env:PIN --so-pin-source env:SOPIN
export KS_IT_CANARY=canary-4711 KEYSHARE_DEBUG=1
check "the CLI starts the agent (keyshare unlock --status, with PINs, a password and KEYSHARE_KDF_LOG2N in its environment)" \
  "$KS" unlock --status
unset KEYSHARE_DEBUG
AP=$(cat "$(agent_dir)/agent.pid" 2>/dev/null)
env_of_agent=$(tr '\0' '\n' <"/proc/$AP/environ" 2>&1)
leaked=$(grep -Eo '^(PIN|SOPIN|P12PASS|KEYSHARE_KDF_LOG2N|KS_IT_CANARY|KEYSHARE_DEBUG)=' <<<"$env_of_agent" | tr '\n' ' ')
[ -n "$AP" ] && [ -z "$leaked" ] && grep -q "^KEYSHARE_HOME=$KEYSHARE_HOME$" <<<"$env_of_agent" \
  && ok "the CLI-started agent's environment holds no PIN, password, KDF setting or canary ($(grep -c = <<<"$env_of_agent") variables; KEYSHARE_HOME absolute)" \
  || bad "the CLI-started agent's environment is minimal" "pid $AP; leaked: $leaked; $(grep -Eo '^[A-Z0-9_]+=' <<<"$env_of_agent" | tr '\n' ' ')"
kdf() { sqlite3 -cmd '.timeout 5000' "$KEYSHARE_HOME/keychain.db" "SELECT user_kdf FROM tokens WHERE label = 'env'"; }  # (waits out the agent's write lock)
[ "$(kdf | cut -d'$' -f2)" = 10 ] && ok "control: the CLI's own wrap used its KEYSHARE_KDF_LOG2N (2^$(kdf | cut -d'$' -f2))" || bad "control: the CLI's wrap cost" "$(kdf)"
export NEWPIN=5678-user
check "C_SetPIN through that agent (pkcs11-tool --change-pin)" pkcs11-tool --module "$MODULE" --login --pin env:PIN --change-pin --new-pin env:NEWPIN
[ "$(kdf | cut -d'$' -f2)" = 15 ] && ok "the agent wrapped the new PIN at the default scrypt cost 2^15, not its starter's 2^10" \
  || bad "the agent's PIN wrap cost" "$(kdf)"
# --- a setuid or setgid host (sudo or su through pam_p11): its invoker's environment is not trusted --------
# Before, the module in a setuid-root program run by uid 1000 started the invoker's
# KEYSHARE_AGENT_PROGRAM with euid 0 (the invoker naming its own store and a root-owned directory as
# XDG_RUNTIME_DIR), and created KEYSHARE_LOG as root in a directory only root may write (its line
# holding a path the invoker chose: /etc/ld.so.preload would do). Now the module reads its
# environment with secure_getenv and such a program starts no agent.
SU=$WORK/setuid; mkdir -m 0711 "$SU"; mkdir -m 0777 "$SU/out"; mkdir -m 0700 "$SU/run"; mkdir -m 0755 "$SU/rootonly"
if cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$SU/host" "$ROOT/Tests/integration/c/setuidhost.c" -ldl \
   && cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -DRECORD="\"$SU/out/ran\"" -o "$SU/record" "$ROOT/Tests/integration/c/setuidhost.c" \
   && chmod 4755 "$SU/host" && chmod 0755 "$SU/record"; then
  out=$(as_victim XDG_RUNTIME_DIR="$SU/run" KEYSHARE_AGENT_PROGRAM="$SU/record" KEYSHARE_DEBUG=1 KEYSHARE_LOG="$SU/rootonly/log" \
        timeout 30 "$SU/host" "$VMOD" 2>&1)
  grep -q "^uid $VICTIM euid 0 init" <<<"$out" && [ ! -e "$SU/out/ran" ] \
    && ok "a setuid-root host run by uid $VICTIM does not start the invoker's KEYSHARE_AGENT_PROGRAM ($(grep -o 'init 0x[0-9a-f]*' <<<"$out"))" \
    || bad "a setuid-root host does not start the invoker's KEYSHARE_AGENT_PROGRAM" "$out; it ran: $(cat "$SU/out/ran" 2>/dev/null)"
  [ ! -e "$SU/rootonly/log" ] && ok "nor does it create the invoker's KEYSHARE_LOG as root (in a directory only root may write)" \
    || bad "a setuid-root host creates the invoker's KEYSHARE_LOG as root" "$(ls -la "$SU/rootonly/log"; head -2 "$SU/rootonly/log")"
  # Whether root's store exists is asked as root (stat), not with the invoker's uid
  # (access(): uid 1000 cannot search /root, so EACCES took root's missing store for one
  # that exists, and C_Initialize failed with CKR_DEVICE_ERROR, 0x30). A private mount
  # namespace gives root an empty 0700 /root: no store, so the empty listing (CKR_OK).
  out=$(unshare -m --propagation private sh -c 'mount -t tmpfs -o mode=0700 tmpfs /root && exec "$@"' sh \
        setpriv --reuid $VICTIM --regid $VICTIM --clear-groups env -u XDG_RUNTIME_DIR HOME="$VHOME" \
        timeout 30 "$SU/host" "$VMOD" 2>&1)
  grep -q "^uid $VICTIM euid 0 init 0x0$" <<<"$out" \
    && ok "a setuid-root host finds root's store missing (stat as root): no token, not an error ($out)" \
    || bad "a setuid-root host finds root's store missing (stat as root), CKR_OK" "$out"
  # Nor does it send the invoker's display variables to root's agent (it would prompt where the
  # invoker chose). In a private mount namespace root has a store (an empty file) and, at its
  # socket, c/oldagent.c, which records "display" when a hello carries DISPLAY=.
  if cc -O1 -Wall -Werror -o "$SU/oldagent" "$ROOT/Tests/integration/c/oldagent.c"; then
    [ -d /tmp/keyshare-agent-0 ] || mkdir -m 0700 /tmp/keyshare-agent-0
    out=$(unshare -m --propagation private bash -c '
      mount -t tmpfs -o mode=0700 tmpfs /root && mkdir -p /root/.local/share/keyshare \
        && : >/root/.local/share/keyshare/keychain.db && mount -t tmpfs -o mode=0700 tmpfs /tmp/keyshare-agent-0 || exit 9
      "$1" agent /tmp/keyshare-agent-0/agent.sock "$2" & A=$!
      for _ in $(seq 100); do grep -q listening "$2" 2>/dev/null && break; sleep 0.05; done
      setpriv --reuid "$5" --regid "$5" --clear-groups env -u XDG_RUNTIME_DIR HOME="$6" DISPLAY=:77 XAUTHORITY=/tmp/invoker-xauthority \
        timeout 30 "$3" "$4"
      kill $A; wait $A 2>/dev/null' sh "$SU/oldagent" "$SU/out/hello.record" "$SU/host" "$VMOD" $VICTIM "$VHOME" 2>&1)
    grep -q '^hello' "$SU/out/hello.record" 2>/dev/null && ! grep -q '^display' "$SU/out/hello.record" \
      && ok "a setuid-root host sends root's agent none of its invoker's display variables ($(grep -c '^hello' "$SU/out/hello.record") hello(s))" \
      || bad "a setuid-root host sends root's agent none of its invoker's display variables" "$out / record: $(tr '\n' ' ' <"$SU/out/hello.record" 2>&1)"
  else
    bad "compile the old agent (Tests/integration/c/oldagent.c)"
  fi
else
  bad "compile the setuid host (Tests/integration/c/setuidhost.c)"
fi

# --- client-supplied strings cannot forge a line of the agent's log --------------------------------
# A program's path (and a tty name, a display value) is the client's to choose: one holding a
# newline wrote a second, forged line into the agent's log before. Control characters are now
# written as \xNN.
FORGE="$WORK/x
keyshare-agent[1] 0: forged line"
mkdir -p "$FORGE" && cp "$(command -v pkcs11-tool)" "$FORGE/pkcs11-tool"
timeout 30 "$FORGE/pkcs11-tool" --module "$MODULE" -L >/dev/null 2>&1
LOG="$(agent_dir)/agent.log"
if grep -q 'x\\x0akeyshare-agent\[1\] 0: forged line' "$LOG" && ! grep -q '^keyshare-agent\[1\] 0: forged line' "$LOG"; then
  ok "a program path with a newline stays on one log line ($(grep -o 'x\\x0akeyshare-agent\[1\][^/]*' "$LOG" | head -1))"
else
  bad "a program path with a newline stays on one log line" "$(grep -a -n 'forged' "$LOG" | head -3)"
fi
rm -rf -- "$FORGE"

finish
