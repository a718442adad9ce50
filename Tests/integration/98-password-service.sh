#!/usr/bin/env bash
# The password service without a PIN in the clear (issue 28 item 4,
# docs/password-service.md "Where the PIN comes from"):
# - `keyshare serve` without --pin-source holds no PIN, no key, no password:
#   each request goes to the agent, which answers the client while the token
#   is unlocked for the calling program (`keyshare unlock --program`), as the
#   share policy says; locked, a lock, an unlock for another program: refused
#   with a line naming keyshare unlock;
# - a PIN from file: or env: is refused (exit 78, one line), and so is the
#   plaintext file the unit of 0.3 read (~/.config/keyshare/pin) while it exists;
# - credential:NAME reads $CREDENTIALS_DIRECTORY/NAME (as systemd's
#   LoadCredentialEncrypted= lays it out: a 0500 directory, a 0400 file);
# - the user unit runs `keyshare serve` with no PIN source and does not restart
#   on status 78;
# - the policy's exe rules name a program by what it is: a program bind-mounted
#   over the allowed path in the caller's own mount namespace (unshare -Urm) is
#   refused, in both modes.
# Usage: 98-password-service.sh KEYSHARE [MODULE].
set -u
KS=${1:?keyshare binary}
source "$(dirname "$0")/lib.sh"
new_home
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
KS=$(realpath "$KS")
export KEYSHARE_AGENT_PROGRAM=$KS KEYSHARE_AGENT_IDLE_TIMEOUT=60
export PIN=1234-user SOPIN=9876-so
T=$(mktemp -d /tmp/keyshare-pwsvc.XXXXXX)
chmod 755 "$T"
CLIENT="$T/share_client.py"
cp "$HERE/share_client.py" "$CLIENT"; chmod 644 "$CLIENT"
PY=$(realpath /usr/bin/python3)  # the interpreter itself (python3 on PATH may be a wrapper script)
SERVE_PID=
stop_serve() { [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null; SERVE_PID=; }
cleanup() { stop_serve; chmod -R u+w "$T" 2>/dev/null; rm -rf "$T" "$KEYSHARE_HOME"; }
trap cleanup EXIT
ks() { "$KS" "$@"; }
mkdir -m 700 "$T/run"; SOCK=$T/run/password.sock
export XDG_CONFIG_HOME=$T/config
# start_serve LOG ARGS...: serve in the background (no PIN in its environment); waits for the socket.
start_serve() {
  local log=$1; shift
  rm -f "$SOCK"
  env -u PIN -u SOPIN "$KS" serve --socket "$SOCK" "$@" 2>"$log" &
  SERVE_PID=$!
  for _ in $(seq 100); do [ -S "$SOCK" ] && return 0; kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.1; done
  return 1
}
fetch_len() { local pw; pw=$(ks password fetch --socket "$SOCK" --stdout 2>/dev/null); echo "${#pw}"; }

check_out "token pwsvc" "created token" ks token create --label pwsvc --pin-source env:PIN --so-pin-source env:SOPIN
check_out "share allow keyshare" "allowed exe" ks share allow --exe "$KS"
EXPECT=$(ks password --stdout --pin-source env:PIN 2>/dev/null)
[ "${#EXPECT}" -eq 32 ] && ok "the shared password exists (32 characters)" || bad "the shared password exists" "${#EXPECT}"

# --- serve from the agent's unlock --------------------------------------------------------------
if start_serve "$T/agent-serve.log"; then ok "serve without --pin-source starts (no PIN, no terminal)"
else bad "serve without --pin-source starts (no PIN, no terminal)" "$(cat "$T/agent-serve.log")"; fi
check_out "it says it serves through the agent" "through the keyshare agent" cat "$T/agent-serve.log"
check_fail "locked: a client is refused, naming keyshare unlock" "not-enabled .*is locked.*keyshare unlock" ks password fetch --socket "$SOCK" --stdout
check_out "unlock for keyshare (the client)" "unlocked token pwsvc" ks unlock --for 5m --program "$KS" --pin-source env:PIN
pw=$(ks password fetch --socket "$SOCK" --stdout 2>/dev/null)
[ -n "$pw" ] && [ "$pw" = "$EXPECT" ] && ok "unlocked: the allowed client gets the shared password" || bad "unlocked: the allowed client gets the shared password" "${#pw} characters"
unset pw
check_out "the share policy still applies: python3 is blocked while unlocked" "^blocked" python3 "$CLIENT" fetch "$SOCK"
check_out "unlock for python3 only" "unlocked token pwsvc" ks unlock --for 5m --program "$PY" --pin-source env:PIN
check_fail "unlocked for another program: refused, naming the program" "not unlocked for .*keyshare unlock --for" ks password fetch --socket "$SOCK" --stdout
check_out "unlock for keyshare again" "unlocked token pwsvc" ks unlock --for 5m --program "$KS" --pin-source env:PIN
[ "$(fetch_len)" = 32 ] && ok "answered again" || bad "answered again"
if unshare -Urm true 2>/dev/null; then
  s=$(unshare -Urm sh -c "mount --bind '$PY' '$KS' && exec '$KS' '$CLIENT' fetch '$SOCK'" 2>&1)
  grep -q "^blocked" <<<"$s" && ok "python3 bind-mounted over the allowed keyshare (unshare -Urm) is blocked (agent)" \
    || bad "python3 bind-mounted over the allowed keyshare (unshare -Urm) is blocked (agent)" "$s"
else
  echo "skip - unshare -Urm is not available: the bind-mount check"
fi
check_out "lock" "locked 1 token" ks lock
check_fail "after keyshare lock: refused again" "is locked" ks password fetch --socket "$SOCK" --stdout
c=$(tr "\0" " " </proc/"$SERVE_PID"/cmdline 2>/dev/null)
e=$(tr '\0' '\n' </proc/"$SERVE_PID"/environ 2>/dev/null || true)
! grep -qFf <(pin_pipe PIN; echo) <<<"$c$e" && ! grep -q -- "--pin-source" <<<"$c" && ok "no PIN in the service's command line or environment" \
  || bad "no PIN in the service's command line or environment" "$c"
# grep -f reads the password from a pipe (printf is a builtin): never on grep's argv.
grep -qFf <(printf '%s\n' "$EXPECT") "$T/agent-serve.log" "$(agent_dir)/agent.log" && bad "password never logged (service, agent)" || ok "password never logged (service, agent)"
check_out "the agent logs the answers" "password service: .*: not-blocked for token pwsvc" cat "$(agent_dir)/agent.log"
stop_serve
stop_agent
start_serve "$T/noagent.log" && ok "agent stopped: serve starts (and starts the agent)" || bad "agent stopped: serve starts" "$(cat "$T/noagent.log")"
check_fail "a new agent holds no unlock: locked" "is locked" ks password fetch --socket "$SOCK" --stdout
stop_agent
check_fail "the agent gone while serving: refused, no hang" "not-enabled" timeout 20 "$KS" password fetch --socket "$SOCK" --stdout
stop_serve

# --- PINs in the clear are refused ------------------------------------------------------------
printf '%s\n' "$PIN" >"$T/pin"; chmod 600 "$T/pin"
status_of() { "$@" >/dev/null 2>&1; echo $?; }
check_fail "serve --pin-source file: is refused, naming the alternatives" "does not read its PIN from a file.*agent's unlock.*credential:NAME" \
  timeout 10 "$KS" serve --socket "$SOCK" --pin-source "file:$T/pin"
[ "$(status_of timeout 10 "$KS" serve --socket "$SOCK" --pin-source "file:$T/pin")" = 78 ] && ok "... with status 78" || bad "file: refused with status 78"
check_fail "serve --pin-source env: is refused" "does not read its PIN from a file or the environment" timeout 10 "$KS" serve --socket "$SOCK" --pin-source env:PIN
mkdir -p "$XDG_CONFIG_HOME/keyshare"; cp "$T/pin" "$XDG_CONFIG_HOME/keyshare/pin"
check_fail "the 0.3 unit's plaintext PIN file is refused while it exists" "config/keyshare/pin holds a PIN in the clear.*shred -u" timeout 10 "$KS" serve --socket "$SOCK"
[ "$(status_of timeout 10 "$KS" serve --socket "$SOCK")" = 78 ] && ok "... with status 78" || bad "plaintext PIN file refused with status 78"
[ ! -e "$SOCK" ] && ok "a refused serve made no socket" || bad "a refused serve made no socket"
rm -f "$XDG_CONFIG_HOME/keyshare/pin"

# --- credential:NAME ($CREDENTIALS_DIRECTORY, as systemd lays it out) -------------------------------
mkdir "$T/creds"; cp "$T/pin" "$T/creds/keyshare-pin"; chmod 0400 "$T/creds/keyshare-pin"; chmod 0500 "$T/creds"
check_fail "credential: without CREDENTIALS_DIRECTORY says what sets it" "needs .CREDENTIALS_DIRECTORY.*LoadCredentialEncrypted" \
  timeout 10 env -u CREDENTIALS_DIRECTORY "$KS" serve --socket "$SOCK" --pin-source credential:keyshare-pin
check_fail "credential: with a path is not a credential name" "pin-source" timeout 10 "$KS" serve --socket "$SOCK" --pin-source credential:../pin
export CREDENTIALS_DIRECTORY=$T/creds
if start_serve "$T/cred-serve.log" --pin-source credential:keyshare-pin; then ok "serve --pin-source credential:NAME starts"
else bad "serve --pin-source credential:NAME starts" "$(cat "$T/cred-serve.log")"; fi
unset CREDENTIALS_DIRECTORY
[ "$(fetch_len)" = 32 ] && ok "credential: the allowed client gets the password (no unlock)" || bad "credential: the allowed client gets the password"
check_out "credential: python3 is blocked" "^blocked" python3 "$CLIENT" fetch "$SOCK"
if unshare -Urm true 2>/dev/null; then
  s=$(unshare -Urm sh -c "mount --bind '$PY' '$KS' && exec '$KS' '$CLIENT' fetch '$SOCK'" 2>&1)
  grep -q "^blocked" <<<"$s" && ok "python3 bind-mounted over the allowed keyshare (unshare -Urm) is blocked (credential)" \
    || bad "python3 bind-mounted over the allowed keyshare (unshare -Urm) is blocked (credential)" "$s"
fi
grep -qFf <(printf '%s\n' "$EXPECT") "$T/cred-serve.log" && bad "password never logged (credential)" || ok "password never logged (credential)"
stop_serve

# --- the user unit ------------------------------------------------------------------------------
U=$ROOT/dist/systemd/keyshare-password.service
check_out "the unit runs keyshare serve with no PIN source" '^ExecStart=@bindir@/keyshare serve$' grep '^ExecStart=' "$U"
! grep -Eq 'pin-source (file|env):|ConditionPathExists=.*pin' "$U" && ok "the unit names no plaintext PIN file" || bad "the unit names no plaintext PIN file" "$(grep -E 'pin' "$U")"
check_out "the unit does not restart on a refused setup (78)" '^RestartPreventExitStatus=78' grep '^RestartPreventExitStatus' "$U"
unset EXPECT
finish
