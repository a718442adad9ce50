#!/usr/bin/env bash
# Verify in the client (issue 30; docs/agent-transport.md, "Verify in the client"): the
# module verifies ECDSA and RSA (PKCS #1 v1.5, PSS; raw and hashed) signatures
# itself with the system's libcrypto.so.3, once the agent has accepted the same
# C_VerifyInit on the session and handed it the public key, and only while the
# agent's epoch page says nothing changed since. Checks:
# (a) the verify happens in the client: 200 x (C_VerifyInit + C_Verify) with
#     the same init reach the agent once (the agent's per-call lines in the
#     client's debug log), 200 times with KEYSHARE_AGENT_VERIFY_LOCAL=0; the
#     host has libcrypto.so.3 mapped while the module links none;
# (b) invalidation across processes: a key deleted by pkcs11-tool, a public key
#     whose CKA_VERIFY another process (Python PyKCS11) set false, a key deleted
#     by the CLI (`keyshare delete`, which writes the store itself: the agent's
#     watcher of the store's directory) make the next C_VerifyInit of the first
#     process fail, from the init, as through the agent (CKR_KEY_HANDLE_INVALID,
#     CKR_KEY_FUNCTION_NOT_PERMITTED); a private public key is gone after
#     C_Logout; a fresh key verifies again afterwards, and another process's
#     login, listing and logout leave the first one's verifies in the client;
# (c) the answers are the agent's: for every mechanism family (CKM_ECDSA and
#     CKM_ECDSA_SHA*, CKM_RSA_PKCS and CKM_SHA*_RSA_PKCS, CKM_RSA_PKCS_PSS and
#     CKM_SHA*_RSA_PKCS_PSS, a zero salt) a host answers a script of good, damaged,
#     short, NULL, cut and grown inputs, C_Verify after the end, a multi-part
#     verify and a second init, line for line as one with KEYSHARE_AGENT_VERIFY_LOCAL=0.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
agent_work verify
export KEYSHARE_AGENT_IDLE_TIMEOUT=60 KEYSHARE_AGENT_PROGRAM=$KS
# This script tests the agent path: always through the agent.
unset KEYSHARE_IN_PROCESS KEYSHARE_AGENT KEYSHARE_AGENT_VERIFY_LOCAL KEYSHARE_AGENT_PAIR
export PIN=1234-user SOPIN=9876-so
PY=/usr/bin/python3
HOSTPID=
cleanup() {
  [ -n "$HOSTPID" ] && kill "$HOSTPID" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$WORK" "$KEYSHARE_HOME"
}
trap cleanup EXIT

check "token create" "$KS" token create --label verify --pin-source env:PIN --so-pin-source env:SOPIN
check "compile the host" cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$WORK/verifyhost" \
  "$ROOT/Tests/integration/c/verifyhost.c" -ldl

# The long-lived host A: its debug log holds the agent's line for each call it made.
coproc HOST { exec env KEYSHARE_DEBUG=1 KEYSHARE_LOG="$WORK/a.log" "$WORK/verifyhost" "$MODULE"; }
HOSTPID=$HOST_PID
# say CMD: one command to host A, its one-line answer in $ANSWER.
say() { ANSWER=; echo "$*" >&"${HOST[1]}" && read -r -t 120 ANSWER <&"${HOST[0]}"; }
expect() {  # expect NAME WANT CMD...
  local name=$1 want=$2; shift 2
  say "$@"
  [ "$ANSWER" = "$want" ] && ok "$name" || bad "$name" "answer: '$ANSWER', want '$want'"
}
read -r -t 60 line <&"${HOST[0]}"
[ "$line" = ready ] && ok "host A has a session" || bad "host A has a session" "$line"
expect "host A logs in" CKR_OK login
for k in "ec1 ec" "rsa1 rsa" "ec2 ec" "rsa2 rsa" "ec3 ec" "ec4 ec" "ecp ec private"; do
  say gen $k
  [ "$ANSWER" = CKR_OK ] || bad "generate ${k%% *}" "$ANSWER"
done
ok "seven token key pairs (EC P-256, RSA-2048; one public key CKA_PRIVATE)"
calls() { grep -c "$1(" "$2" 2>/dev/null || true; }

# ---- (a) where the verify happens ----
expect "ECDSA: sign" CKR_OK sign ecdsa ec1
v0=$(calls C_Verify "$WORK/a.log"); i0=$(calls C_VerifyInit "$WORK/a.log")
expect "ECDSA: 200 x (C_VerifyInit + C_Verify), the same init" "ok 200" loop 200 ecdsa ec1
v1=$(calls C_Verify "$WORK/a.log"); i1=$(calls C_VerifyInit "$WORK/a.log")
[ $((v1 - v0)) -le 1 ] && [ $((i1 - i0)) -le 1 ] \
  && ok "ECDSA: the agent saw $((i1 - i0)) C_VerifyInit and $((v1 - v0)) C_Verify of those 200 (verified in the client)" \
  || bad "ECDSA: verified in the client" "the agent saw $((i1 - i0)) C_VerifyInit, $((v1 - v0)) C_Verify"
expect "RSA: sign (CKM_SHA256_RSA_PKCS)" CKR_OK sign sha256-rsa rsa1
v0=$(calls C_Verify "$WORK/a.log")
expect "RSA: 200 x (C_VerifyInit + C_Verify)" "ok 200" loop 200 sha256-rsa rsa1
v1=$(calls C_Verify "$WORK/a.log")
[ $((v1 - v0)) -le 1 ] && ok "RSA: the agent saw $((v1 - v0)) C_Verify of those 200" \
  || bad "RSA: verified in the client" "the agent saw $((v1 - v0)) C_Verify"
grep -q "the same init again is verified in this process" "$WORK/a.log" \
  && ok "the debug log says the module verifies in the process" || bad "the debug log names the local verify"
grep -q 'libcrypto\.so\.3' "/proc/$HOSTPID/maps" && ok "host A has the system's libcrypto.so.3 mapped (dlopen)" \
  || bad "libcrypto.so.3 loaded in the host"
! readelf -d "$MODULE" | grep NEEDED | grep -qi crypto && ok "the module links no libcrypto" \
  || bad "the module links no libcrypto" "$(readelf -d "$MODULE" | grep NEEDED)"
out=$(printf 'login\nsign ecdsa ec1\nloop 200 ecdsa ec1\nquit\n' |
  KEYSHARE_AGENT_VERIFY_LOCAL=0 KEYSHARE_DEBUG=1 KEYSHARE_LOG="$WORK/r.log" "$WORK/verifyhost" "$MODULE" 2>&1 | tail -1)
n=$(calls C_Verify "$WORK/r.log")
[ "$out" = "ok 200" ] && [ "$n" -ge 200 ] && ok "KEYSHARE_AGENT_VERIFY_LOCAL=0: all 200 go to the agent ($n C_Verify)" \
  || bad "KEYSHARE_AGENT_VERIFY_LOCAL=0 verifies through the agent" "$out, $n C_Verify"

# ---- (b) changes by other processes end the ticket ----
expect "ec2: sign" CKR_OK sign ecdsa ec2
expect "ec2: 20 verifies (ticket held)" "ok 20" loop 20 ecdsa ec2
if pkcs11-tool --module "$MODULE" --login --pin env:PIN --delete-object --type pubkey --label ec2 >"$WORK/p11.out" 2>&1; then
  ok "pkcs11-tool (another process) deletes ec2's public key"
else bad "pkcs11-tool deletes ec2's public key" "$(cat "$WORK/p11.out")"; fi
expect "ec2 deleted elsewhere: the next C_VerifyInit is CKR_KEY_HANDLE_INVALID" CKR_KEY_HANDLE_INVALID vinit ecdsa ec2
expect "  and C_Verify after it: CKR_OPERATION_NOT_INITIALIZED" CKR_OPERATION_NOT_INITIALIZED verify

expect "rsa2: sign" CKR_OK sign sha256-rsa rsa2
expect "rsa2: 20 verifies" "ok 20" loop 20 sha256-rsa rsa2
if "$PY" - "$MODULE" rsa2 >"$WORK/py.out" 2>&1 <<'EOF'
import os, sys, PyKCS11
lib = PyKCS11.PyKCS11Lib()
lib.load(sys.argv[1])
s = lib.openSession(lib.getSlotList(tokenPresent=True)[0], PyKCS11.CKF_SERIAL_SESSION | PyKCS11.CKF_RW_SESSION)
s.login(os.environ["PIN"])
o = s.findObjects([(PyKCS11.CKA_CLASS, PyKCS11.CKO_PUBLIC_KEY), (PyKCS11.CKA_LABEL, sys.argv[2])])
s.setAttributeValue(o[0], [(PyKCS11.CKA_VERIFY, PyKCS11.CK_FALSE)])
s.logout()
s.closeSession()
EOF
then ok "Python PyKCS11 (another process) sets rsa2's CKA_VERIFY false"
else bad "PyKCS11 sets CKA_VERIFY false" "$(tail -3 "$WORK/py.out")"; fi
expect "CKA_VERIFY false elsewhere: the next C_VerifyInit is CKR_KEY_FUNCTION_NOT_PERMITTED" \
  CKR_KEY_FUNCTION_NOT_PERMITTED vinit sha256-rsa rsa2

expect "ec3: sign" CKR_OK sign ecdsa ec3
expect "ec3: 20 verifies" "ok 20" loop 20 ecdsa ec3
check "keyshare delete ec3 (the CLI, writing the store itself)" "$KS" delete ec3 --pin-source env:PIN
sleep 0.2
expect "ec3 deleted by the CLI: the next C_VerifyInit is CKR_KEY_HANDLE_INVALID" CKR_KEY_HANDLE_INVALID vinit ecdsa ec3

expect "a private public key: sign" CKR_OK sign ecdsa ecp
expect "  20 verifies while logged in" "ok 20" loop 20 ecdsa ecp
expect "  C_Logout" CKR_OK logout
expect "  after C_Logout its C_VerifyInit is CKR_USER_NOT_LOGGED_IN (the agent's answer)" CKR_USER_NOT_LOGGED_IN vinit ecdsa ecp
expect "  login again" CKR_OK login
expect "ec4 (untouched): sign" CKR_OK sign ecdsa ec4
expect "ec4: 50 verifies after all that" "ok 50" loop 50 ecdsa ec4
# Another client's own logins and sessions change nothing this one finds (its C_Login writes
# the store's PIN counter, which the watcher sees: one ticket fetched again, no more).
pkcs11-tool --module "$MODULE" --login --pin env:PIN -O >/dev/null 2>&1
v0=$(calls C_Verify "$WORK/a.log")
expect "ec4: 50 more after pkcs11-tool logged in, listed and logged out in another process" "ok 50" loop 50 ecdsa ec4
v1=$(calls C_Verify "$WORK/a.log")
[ $((v1 - v0)) -le 1 ] && ok "  $((v1 - v0)) of them reached the agent (the ticket fetched again once at most)" \
  || bad "  another client's login costs this one its tickets once at most" "$((v1 - v0)) C_Verify reached the agent"
expect "ec4: a damaged signature: CKR_SIGNATURE_INVALID" CKR_OK vinit ecdsa ec4
expect "  (its C_Verify)" CKR_SIGNATURE_INVALID verify-bad
say quit
wait "$HOSTPID" 2>/dev/null
HOSTPID=

# ---- (c) the same answers as the agent's ----
script() {  # script KEY MECH...: one round of every input per mechanism
  local key=$1; shift
  echo login
  for m in "$@"; do
    echo "sign $m $key"
    for c in verify verify verify-bad verify-len verify-null "verify-data 0" "verify-data 20" "verify-data 31" \
             "verify-data 33" "verify-data 300" verify; do
      echo "vinit $m $key"; echo "$c"
    done
    echo verify
    echo "vinit $m $key"; echo update; echo final
    echo "vinit $m $key"; echo "vinit $m $key"; echo verify
    echo "loop 5 $m $key"
  done
  echo "vinit ecdsa rsa1"; echo "vinit sha256-rsa ec1"
  echo quit
}
EC="ecdsa ecdsa-sha1 ecdsa-sha224 ecdsa-sha256 ecdsa-sha384 ecdsa-sha512"
RSA="rsa-pkcs sha1-rsa sha224-rsa sha256-rsa sha384-rsa sha512-rsa pss sha1-pss sha224-pss sha256-pss sha384-pss sha512-pss pss-salt0"
for fam in "ec1 $EC" "rsa1 $RSA"; do
  set -- $fam
  key=$1; shift
  # shellcheck disable=SC2086
  script "$key" "$@" | KEYSHARE_DEBUG=1 KEYSHARE_LOG="$WORK/l-$key.log" "$WORK/verifyhost" "$MODULE" >"$WORK/l-$key.out" 2>&1
  # shellcheck disable=SC2086
  script "$key" "$@" | KEYSHARE_AGENT_VERIFY_LOCAL=0 KEYSHARE_DEBUG=1 KEYSHARE_LOG="$WORK/r-$key.log" \
    "$WORK/verifyhost" "$MODULE" >"$WORK/r-$key.out" 2>&1
  lines=$(wc -l <"$WORK/r-$key.out")
  if cmp -s "$WORK/l-$key.out" "$WORK/r-$key.out" && [ "$lines" -gt 50 ]; then
    ok "$key ($*): $lines answers, the same in the client as through the agent"
  else
    bad "$key: the same answers in the client as through the agent" "$(diff "$WORK/r-$key.out" "$WORK/l-$key.out" | head -20)"
  fi
  grep -q CKR_SIGNATURE_INVALID "$WORK/r-$key.out" && grep -q CKR_SIGNATURE_LEN_RANGE "$WORK/r-$key.out" \
    && grep -qx "ok 5" "$WORK/r-$key.out" && ok "  $key: good, damaged and short signatures among them" \
    || bad "  $key: the script reached every kind of answer" "$(sort "$WORK/r-$key.out" | uniq -c)"
  nl=$(calls C_Verify "$WORK/l-$key.log"); nr=$(calls C_Verify "$WORK/r-$key.log")
  [ "$nl" -lt "$nr" ] && ok "  $key: the agent saw $nl C_Verify from the client verifying itself, $nr from the other" \
    || bad "  $key: fewer C_Verify reach the agent" "$nl vs $nr"
done

finish
