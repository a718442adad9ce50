#!/usr/bin/env bash
# Login across processes (issue 16 item 5, docs/agent.md "Unlock across
# processes"): `keyshare unlock --for D` / `keyshare lock`. The unlock names
# its programs (issue 27: --program, here the unlock host and pkcs11-tool;
# 87-agent-unlock-scope tests the scope). While unlocked, the named
# applications sign without C_Login (pkcs11-tool without --login, a running
# host whose session turns into a user session), C_Login checks the PIN and
# makes the login the application's own, one application's C_Logout ends it for that
# application only; `lock` ends it at once for every application (also one
# that makes no call), an application's own C_Login survives it; the unlock
# expires; a wrong PIN through unlock counts toward the lockout.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
new_home
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/keyshare-unlock.XXXXXX)
export KEYSHARE_AGENT_IDLE_TIMEOUT=60 KEYSHARE_AGENT_PROGRAM=$KS
unset KEYSHARE_IN_PROCESS
export PIN=1234-user SOPIN=9876-so WRONG=0000-wrong KEYSHARE_TEST_PIN=1234-user
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$WORK" "$KEYSHARE_HOME"; }
trap cleanup EXIT
LOG=$(agent_dir)/agent.log
ks() { "$KS" "$@"; }
printf 'unlocked signing\n' >"$WORK/data"
p11sign() {  # signs without --login; the DER signature is verified by openssl
  rm -f "$WORK/sig"
  pkcs11-tool --module "$MODULE" --token-label work -s -m ECDSA-SHA256 --label uk -i "$WORK/data" -o "$WORK/sig" \
    --signature-format openssl >/dev/null 2>&1 &&
    openssl dgst -sha256 -verify "$WORK/uk.pub" -signature "$WORK/sig" "$WORK/data" >/dev/null 2>&1
}

check "token work" ks token create --label work --pin-source env:PIN --so-pin-source env:SOPIN
check "EC key uk" ks key generate --type ec --label uk --tag uk --pin-source env:PIN
ks key public --tag uk >"$WORK/uk.pub"
check "compile the unlock host" cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$WORK/unlockhost" \
  "$ROOT/Tests/integration/c/unlockhost.c" -ldl
# The programs every unlock here names (an unlock reaches the programs it names only).
PROGRAMS=(--program "$WORK/unlockhost" --program "$(command -v pkcs11-tool)")

p11sign && bad "locked: pkcs11-tool cannot sign without --login" || ok "locked: pkcs11-tool cannot sign without --login"
coproc H1 { exec "$WORK/unlockhost" "$MODULE"; }
pids+=("$H1_PID")
read -r -t 20 line <&"${H1[0]}"; [ "$line" = ready ] || bad "host 1 ready" "$line"
ask() {  # ask HOST-FD-IN HOST-FD-OUT CMD
  echo "$3" >&"$1"; local r; read -r -t 20 r <&"$2"; echo "$r"
}
[ "$(ask "${H1[1]}" "${H1[0]}" state)" = "state 2 rv 0x0" ] && ok "a running host starts in a public session" || bad "host public session"

# --- the PIN through unlock counts ----------------------------------------------------------
left() { ks unlock --for 1m --pin-source env:WRONG 2>&1 | sed -n 's/.*incorrect user PIN for token work (\([0-9]*\) attempts\{0,1\} left.*/\1/p'; }
n1=$(left); n2=$(left)
[ -n "$n1" ] && [ "$n2" = $((n1 - 1)) ] && ok "a wrong PIN through unlock counts toward the lockout ($n1, then $n2 attempts left)" \
  || bad "wrong PINs through unlock count" "left: '$n1' then '$n2'"
check_out "the token shows the low count to applications" "count low" pkcs11-tool --module "$MODULE" -L
check_fail "a bad duration is refused" "--for must be" ks unlock --for 0s --pin-source env:PIN
check_fail "unlock without a PIN source or terminal" "give a source option" ks unlock --for 1m </dev/null

# --- unlocked -----------------------------------------------------------------------------------
t0=$(date +%s.%N)
check_out "unlock for 30m (the unlock host and pkcs11-tool)" "unlocked token work for 30m for 2 programs" ks unlock --for 30m "${PROGRAMS[@]}" --pin-source env:PIN
p11sign && ok "unlocked: pkcs11-tool signs without --login (openssl verifies)" || bad "unlocked: pkcs11-tool signs without --login"
[ "$(ask "${H1[1]}" "${H1[0]}" state)" = "state 3 rv 0x0" ] && ok "the running host's session is now a user session (C_GetSessionInfo)" || bad "host user session"
[ "$(ask "${H1[1]}" "${H1[0]}" sign)" = "sign 0x0" ] && ok "the running host signs without C_Login" || bad "host signs"
pkcs11-tool --module "$MODULE" --token-label work --login --pin env:PIN -s -m ECDSA-SHA256 --label uk -i "$WORK/data" \
  -o "$WORK/sig2" >/dev/null 2>&1 && ok "pkcs11-tool --login still works while unlocked" || bad "pkcs11-tool --login while unlocked"
{ coproc H3 { KEYSHARE_TEST_PIN=$WRONG exec "$WORK/unlockhost" "$MODULE"; }; } 2>/dev/null  # a second coproc: bash warns
pids+=("$H3_PID")
read -r -t 20 line <&"${H3[0]}"; [ "$line" = ready ] || bad "host 3 ready" "$line"
[ "$(ask "${H3[1]}" "${H3[0]}" login)" = "login 0xa0" ] && [ "$(ask "${H3[1]}" "${H3[0]}" state)" = "state 3 rv 0x0" ] \
  && ok "C_Login with a wrong PIN while unlocked: CKR_PIN_INCORRECT, the shared login stays" || bad "wrong C_Login while unlocked"
exec {H3[1]}>&-
check_out "unlock --status lists the token" "[0-9]+" ks unlock --status
{ coproc H2 { exec "$WORK/unlockhost" "$MODULE"; }; } 2>/dev/null  # a second coproc: bash warns
pids+=("$H2_PID")
read -r -t 20 line <&"${H2[0]}"; [ "$line" = ready ] || bad "host 2 ready" "$line"
[ "$(ask "${H2[1]}" "${H2[0]}" logout)" = "logout 0x0" ] && [ "$(ask "${H2[1]}" "${H2[0]}" state)" = "state 2 rv 0x0" ] \
  && ok "C_Logout ends the unlock for that application" || bad "C_Logout for one application"
[ "$(ask "${H2[1]}" "${H2[0]}" sign)" != "sign 0x0" ] && [ "$(ask "${H1[1]}" "${H1[0]}" sign)" = "sign 0x0" ] \
  && ok "... only: the other host still signs" || bad "other host unaffected by C_Logout"
[ "$(ask "${H2[1]}" "${H2[0]}" login)" = "login 0x0" ] && ok "that application logs in itself (C_Login, PIN checked)" || bad "own C_Login after logout"
{ coproc H4 { exec "$WORK/unlockhost" "$MODULE"; }; } 2>/dev/null  # a second coproc: bash warns
pids+=("$H4_PID")
read -r -t 20 line <&"${H4[0]}"; [ "$line" = ready ] || bad "host 4 ready" "$line"
[ "$(ask "${H4[1]}" "${H4[0]}" state)" = "state 3 rv 0x0" ] && [ "$(ask "${H4[1]}" "${H4[0]}" login)" = "login 0x0" ] \
  && ok "C_Login with the right PIN while unlocked: CKR_OK, the login becomes the host's own" || bad "C_Login takes over the shared login"

# --- lock -------------------------------------------------------------------------------------------
check_out "lock" "locked 1 token" ks lock
[ "$(ask "${H1[1]}" "${H1[0]}" state)" = "state 2 rv 0x0" ] && ok "lock: the running host is public at once" || bad "lock reaches the host"
[ "$(ask "${H1[1]}" "${H1[0]}" sign)" != "sign 0x0" ] && ok "lock: the running host can no longer sign" || bad "host refused after lock"
p11sign && bad "lock: pkcs11-tool without --login is refused" || ok "lock: pkcs11-tool without --login is refused"
[ "$(ask "${H2[1]}" "${H2[0]}" sign)" = "sign 0x0" ] && ok "an application's own C_Login survives lock" || bad "own login survives lock"
[ "$(ask "${H4[1]}" "${H4[0]}" state)" = "state 3 rv 0x0" ] && [ "$(ask "${H4[1]}" "${H4[0]}" sign)" = "sign 0x0" ] \
  && ok "a login taken over while unlocked survives lock" || bad "taken-over login survives lock"
exec {H4[1]}>&-
check_out "lock again: nothing to lock" "nothing was unlocked" ks lock
grep -q "locked by pid" "$LOG" && ok "the lock is logged" || bad "lock logged"

# --- expiry -------------------------------------------------------------------------------------------
check_out "unlock for 3s" "unlocked" ks unlock --for 3s "${PROGRAMS[@]}" --pin-source env:PIN
p11sign && ok "within 3 s: signs without --login" || bad "within 3 s"
sleep 4
p11sign && bad "after 4 s: refused (expired)" || ok "after 4 s: refused (expired)"
[ "$(ask "${H1[1]}" "${H1[0]}" state)" = "state 2 rv 0x0" ] && ok "the expiry reached the running host" || bad "expiry reaches the host"
grep -q "unlock expired" "$LOG" && ok "the expiry is logged" || bad "expiry logged"
! grep -qF -f <(printf '%s\n' "$PIN" "$WRONG") "$LOG" && ok "the agent log holds no PIN" || bad "no PIN in the log"
exec {H1[1]}>&- {H2[1]}>&-
finish
