#!/usr/bin/env bash
# Driver configuration (issue 26, defect 9b; docs/agent.md "Driver
# configuration"): a driver's variables (SOFTHSM2_CONF here) are stored with
# it (`driver add --env`, shown by `driver list`) and given to the module
# wherever it is loaded: the agent, started before the variable was set and
# never inheriting it, logs in to the mirrored SoftHSM2 card and signs; the
# in-process mode applies the same stored variables and ignores its own. A
# driver that does not show a token it mirrored is reported (agent-log line,
# CKR_TOKEN_NOT_PRESENT, `token list` state "unreachable by driver"), never
# a silent CKR_DEVICE_REMOVED.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
agent_work driver-env
# The agent is the default; this script sets KEYSHARE_IN_PROCESS per command.
unset KEYSHARE_IN_PROCESS SOFTHSM2_CONF
export KEYSHARE_AGENT_IDLE_TIMEOUT=120 KEYSHARE_AGENT_PROGRAM=$KS KEYSHARE_DRIVER_TIMEOUT=5
export CARDPIN=card-pin-4815 CARDSO=card-so-1623
SOFTHSM=/usr/lib/softhsm/libsofthsm2.so
CONF=$WORK/softhsm2.conf EMPTY=$WORK/empty.conf
mkdir -p "$WORK/hsm" "$WORK/none"
printf 'directories.tokendir = %s/hsm\nobjectstore.backend = file\nlog.level = ERROR\n' "$WORK" >"$CONF"
printf 'directories.tokendir = %s/none\nobjectstore.backend = file\nlog.level = ERROR\n' "$WORK" >"$EMPTY"
ADIR=$(agent_dir)  # the agent serving this store (lib.sh): its agent.pid and agent.log
AGENTLOG=$ADIR/agent.log
cleanup() {
  local p; p=$(cat "$ADIR/agent.pid" 2>/dev/null); [ -n "$p" ] && kill "$p" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$WORK" "$KEYSHARE_HOME"
}
trap cleanup EXIT
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
# The card: made with SOFTHSM2_CONF in these commands' environment only.
( export SOFTHSM2_CONF=$CONF
  softhsm_init_token "$SOFTHSM" card CARDSO CARDPIN &&
  pkcs11-tool --module "$SOFTHSM" --token-label card --login --pin env:CARDPIN --keypairgen --key-type EC:prime256v1 \
    --id 01 --label ec >/dev/null 2>&1 &&
  ec_pubkey_der "$WORK/ec.pub.der" pkcs11-tool --module "$SOFTHSM" --token-label card ) \
  && ok "a SoftHSM2 card with an EC key (its own SOFTHSM2_CONF)" || bad "a SoftHSM2 card with an EC key"
SERIAL=$(SOFTHSM2_CONF=$CONF softhsm2-util --show-slots | awk '/Label:/ {l=$2} /Serial number:/ {s=$3} l=="card" && s {print s; exit}')
CARDID=pkcs11.softhsm2:$SERIAL
echo "data to sign" >"$WORK/data"
# sign OUT [ENV...]: pkcs11-tool through the module logs in to the card and signs.
sign() { local out=$1; shift; env "$@" pkcs11-tool --module "$MODULE" --token-label card --login --pin env:CARDPIN \
  --sign -m ECDSA-SHA256 --signature-format openssl --id 01 -i "$WORK/data" -o "$out" 2>&1; }
verify() { openssl dgst -sha256 -verify <(openssl pkey -pubin -inform DER -in "$WORK/ec.pub.der") -signature "$1" "$WORK/data"; }

# --- 1. the agent first, without SOFTHSM2_CONF ------------------------------
# A store (a soft token) first: an agent starts only for a store that exists.
export PIN=soft-pin-4242 SOPIN=soft-so-4242
check "a soft token (the store the agent serves)" "$KS" token create --label soft --pin-source env:PIN --so-pin-source env:SOPIN
check "the agent starts first (pkcs11-tool -L through the module, no SOFTHSM2_CONF anywhere)" \
  pkcs11-tool --module "$MODULE" -L
AGENT=$(cat "$ADIR/agent.pid" 2>/dev/null)
[ -n "$AGENT" ] && kill -0 "$AGENT" 2>/dev/null && ok "the agent runs (pid $AGENT)" || bad "the agent runs"

# --- 2. the defect's sequence: SOFTHSM2_CONF set only in the shell of driver add
out=$(SOFTHSM2_CONF=$CONF "$KS" driver add --module "$SOFTHSM" 2>"$WORK/add.err")
grep -q "0 token(s) present" <<<"$out" \
  && ok "driver add without --env does not take SOFTHSM2_CONF from its shell (no card mirrored that the agent could not see)" \
  || bad "driver add without --env does not take SOFTHSM2_CONF from its shell" "$out"
grep -q "note: SOFTHSM2_CONF is set here .*--env SOFTHSM2_CONF=$CONF" "$WORK/add.err" \
  && ok "... and says how to give it (--env SOFTHSM2_CONF=...)" || bad "... and says how to give it" "$(cat "$WORK/add.err")"
# Whatever a process mirrored, a login through the module never ends in a silent CKR_DEVICE_REMOVED.
cp "$AGENTLOG" "$WORK/agentlog.before"
out=$(sign "$WORK/x.sig")
if grep -q CKR_DEVICE_REMOVED <<<"$out" && ! diff "$WORK/agentlog.before" "$AGENTLOG" | grep -q "driver softhsm2"; then
  bad "a card listed through the module: its login is not a silent CKR_DEVICE_REMOVED" "$(tail -3 <<<"$out")"
else
  ok "a card listed through the module: its login is not a silent CKR_DEVICE_REMOVED"
fi
"$KS" driver remove softhsm2 >/dev/null 2>&1

# --- 3. --env: stored with the driver, given to the agent's load --------------
check_fail "--env LD_PRELOAD refused" "--env LD_PRELOAD: refused: LD_\*" \
  "$KS" driver add --module "$SOFTHSM" --env LD_PRELOAD=/tmp/x.so
for v in GLIBC_TUNABLES=glibc.malloc.check=3 KEYSHARE_HOME=/tmp PATH=/tmp HOME=/tmp; do
  check_fail "--env ${v%%=*} refused" "--env ${v%%=*}: refused" "$KS" driver add --module "$SOFTHSM" --env "$v"
done
check_fail "--env 1BAD=x: not a variable name" "not a variable name" "$KS" driver add --module "$SOFTHSM" --env 1BAD=x
check_fail "--env without '='" "--env takes NAME=VALUE" "$KS" driver add --module "$SOFTHSM" --env SOFTHSM2_CONF
check_fail "--env given twice" "given twice" "$KS" driver add --module "$SOFTHSM" --env A=1 --env A=2
check_out "driver add --env SOFTHSM2_CONF=... (a shell without it): the card is present" \
  "added driver softhsm2 .*1 token\(s\) present: $CARDID" env -u SOFTHSM2_CONF "$KS" driver add --module "$SOFTHSM" --env "SOFTHSM2_CONF=$CONF"
check_out "driver list shows the variable" "softhsm2 .*SOFTHSM2_CONF=$CONF" "$KS" driver list
check_out "driver list --json shows it" "^$CONF\$" sh -c "\"$KS\" driver list --json | python3 -c \"import json,sys; print(json.load(sys.stdin)[0]['environment']['SOFTHSM2_CONF'])\""
check_fail "a second driver of the same module with other variables is refused" "loads .*libsofthsm2.so with other variables" \
  "$KS" driver add --module "$SOFTHSM" --name other --env "SOFTHSM2_CONF=$EMPTY"
check_out "token list: the card is present" "$CARDID .*present" "$KS" token list
kill -0 "$AGENT" 2>/dev/null && [ "$(cat "$ADIR/agent.pid")" = "$AGENT" ] \
  && ok "still the agent started before the driver was added" || bad "still the agent started before the driver was added"
if env_of_agent=$(tr '\0' '\n' <"/proc/$AGENT/environ" 2>/dev/null); then
  grep -q '^SOFTHSM2_CONF=' <<<"$env_of_agent" && bad "the agent's environment has no SOFTHSM2_CONF" \
    || ok "the agent's environment has no SOFTHSM2_CONF"
fi
rm -f "$WORK/agent.sig"
out=$(sign "$WORK/agent.sig")
[ -s "$WORK/agent.sig" ] && ok "agent mode: pkcs11-tool logs in to the mirrored card and signs" \
  || bad "agent mode: pkcs11-tool logs in to the mirrored card and signs" "$(tail -3 <<<"$out")"
check "... and the signature verifies with the card's public key" verify "$WORK/agent.sig"
rm -f "$WORK/inproc.sig"
out=$(sign "$WORK/inproc.sig" KEYSHARE_IN_PROCESS=1 SOFTHSM2_CONF="$EMPTY")
[ -s "$WORK/inproc.sig" ] && verify "$WORK/inproc.sig" >/dev/null 2>&1 \
  && ok "in-process mode: the stored variable applies (not the application's own SOFTHSM2_CONF): signs" \
  || bad "in-process mode: the stored variable applies, not the application's own" "$(tail -3 <<<"$out")"

# --- 4. a driver that does not show the token it mirrored -------------------
check_out "driver set-env: the driver now points to an empty token directory" "driver softhsm2: SOFTHSM2_CONF=$EMPTY" \
  "$KS" driver set-env softhsm2 --env "SOFTHSM2_CONF=$EMPTY"
check_out "driver list shows the new variable" "softhsm2 .*SOFTHSM2_CONF=$EMPTY" "$KS" driver list
"$KS" token list >"$WORK/list.out" 2>"$WORK/list.err"
grep -Eq "$CARDID .*unreachable by driver" "$WORK/list.out" && ok "token list: the card is 'unreachable by driver'" \
  || bad "token list: the card is 'unreachable by driver'" "$(cat "$WORK/list.out" "$WORK/list.err")"
grep -q "note: .*keyshare driver set-env" "$WORK/list.err" && ok "... with a note saying what to check and how to fix it" \
  || bad "... with a note saying what to check and how to fix it" "$(cat "$WORK/list.err")"
check_out "token list --json: state 'unreachable by driver'" "^unreachable by driver\$" \
  sh -c "\"$KS\" token list --json | python3 -c \"import json,sys; print([t['state'] for t in json.load(sys.stdin) if t['tokenID']=='$CARDID'][0])\""
before=$(grep -c "does not show it" "$AGENTLOG")
out=$(sign "$WORK/y.sig")
grep -q "CKR_TOKEN_NOT_PRESENT" <<<"$out" && ok "agent mode: C_Login on it is CKR_TOKEN_NOT_PRESENT" \
  || bad "agent mode: C_Login on it is CKR_TOKEN_NOT_PRESENT" "$(tail -3 <<<"$out")"
after=$(grep -c "does not show it" "$AGENTLOG")
line=$(grep "does not show it" "$AGENTLOG" | tail -1)
[ $((after - before)) = 1 ] && grep -q "token $CARDID is listed present but driver softhsm2 ($SOFTHSM), loaded here with SOFTHSM2_CONF=$EMPTY" <<<"$line" \
  && grep -q "keyshare driver set-env softhsm2 --env" <<<"$line" \
  && ok "... and the agent log has one line naming the token, the driver, its variables and the fix" \
  || bad "... and the agent log has one line naming the token, the driver, its variables and the fix" "lines: $before -> $after: $line"
grep -qf <(pin_pipe CARDPIN; echo) "$AGENTLOG" && bad "no PIN in the agent log" || ok "no PIN in the agent log"
out=$(sign "$WORK/z.sig" KEYSHARE_IN_PROCESS=1 KEYSHARE_DEBUG=1 KEYSHARE_LOG="$WORK/inproc.log" SOFTHSM2_CONF="$CONF")
grep -q "CKR_TOKEN_NOT_PRESENT" <<<"$out" && grep -q "token $CARDID is listed present but driver softhsm2" "$WORK/inproc.log" \
  && ok "in-process mode: the same answer (its own SOFTHSM2_CONF ignored), and the debug log has the line" \
  || bad "in-process mode: the same answer, and the debug log has the line" "$(tail -2 <<<"$out"; grep -c . "$WORK/inproc.log" 2>&1)"

# --- 5. fixed configuration: the running agent reloads the driver with it ---
check_out "driver set-env back to the card's configuration" "SOFTHSM2_CONF=$CONF" \
  "$KS" driver set-env softhsm2 --env "SOFTHSM2_CONF=$CONF"
check_out "token list: present again" "$CARDID .*present" "$KS" token list
rm -f "$WORK/again.sig"
out=$(sign "$WORK/again.sig")
[ -s "$WORK/again.sig" ] && verify "$WORK/again.sig" >/dev/null 2>&1 \
  && ok "the same agent (pid $AGENT) signs on the card again with the new variables" \
  || bad "the same agent signs on the card again with the new variables" "$(tail -3 <<<"$out")"
finish
