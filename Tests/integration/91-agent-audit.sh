#!/usr/bin/env bash
# The agent's audit records (issue 27 section 2; docs/agent.md "Audit records"):
# every use of a token's private key goes to the systemd journal with
# structured fields (program, pid, uid, token, key label and reference,
# operation, result), and `keyshare log [--json]` reads them back. These
# machines run no journald: the script starts its own systemd-journald in a
# private mount namespace (its /run/systemd and /run/log on tmpfs) and runs
# the agent and its clients there; then, with no journal, checks the
# documented fallback (the agent's log, read by `keyshare log` too).
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
if [ -z "${KS_IT_AUDIT_NS:-}" ]; then
  # Into a private mount namespace of our own (root): the journal below is this test's only.
  exec env KS_IT_AUDIT_NS=1 unshare -m --propagation private bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
agent_work audit
export KEYSHARE_AGENT_IDLE_TIMEOUT=60 KEYSHARE_AGENT_PROGRAM=$KS
unset KEYSHARE_IN_PROCESS
export PIN=1234-user SOPIN=9876-so
JD=
cleanup() {
  [ -n "$JD" ] && kill "$JD" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$WORK" "$KEYSHARE_HOME"
}
trap cleanup EXIT
check "token create" "$KS" token create --label audit --pin-source env:PIN --so-pin-source env:SOPIN
check "an EC key" "$KS" key generate --type ec --curve P-256 --label audited --tag k --pin-source env:PIN
printf 'audit' >"$WORK/data"
REF=$("$KS" list --private --pin-source env:PIN --json | python3 -c 'import json,sys; print(next(i["reference"] for i in json.load(sys.stdin) if i["itemClass"] == "private-key"))')

# --- no journal: the fallback ---------------------------------------------------------------
check "no journal: pkcs11-tool signs" pkcs11-tool --module "$MODULE" --login --pin env:PIN --sign -m ECDSA-SHA256 -i "$WORK/data" -o /dev/null
LOG=$(agent_dir)/agent.log
for _ in $(seq 30); do grep -q '"KEYSHARE_OPERATION":"sign"' "$LOG" && break; sleep 0.1; done
[ "$(grep -c "no systemd journal is running" "$LOG")" = 1 ] && ok "no journal: the agent says once where the records go" \
  || bad "the fallback is announced once" "$(grep -c "no systemd journal" "$LOG")"
out=$("$KS" log --json)
FALLBACK_CHECK='
import sys, json
r = [x for x in json.load(sys.stdin) if x.get("KEYSHARE_OPERATION") == "sign" and x.get("KEYSHARE_KEY_REF") == sys.argv[1]]
assert r and "pkcs11-tool" in r[0]["KEYSHARE_PROGRAM"] and r[0]["KEYSHARE_RESULT"] == "CKR_OK", r
'
python3 -c "$FALLBACK_CHECK" "$REF" <<<"$out" >/dev/null 2>&1 && ok "keyshare log --json reads the fallback records (the sign with key $REF)" \
  || bad "keyshare log reads the fallback" "$out"
"$KS" agent stop >/dev/null
: >"$LOG"

# --- a journal of our own ----------------------------------------------------------------------
mkdir -p /run/systemd /run/log
mount -t tmpfs -o mode=0755 none /run/systemd && mount -t tmpfs -o mode=0755 none /run/log \
  && { [ ! -d /var/log/journal ] || mount -t tmpfs none /var/log/journal; } \
  || { bad "a private /run/systemd for the test's journal"; finish; exit 1; }
mkdir -p /run/systemd/journal
/lib/systemd/systemd-journald >"$WORK/journald.out" 2>&1 & JD=$!
for _ in $(seq 50); do [ -S /run/systemd/journal/socket ] && break; sleep 0.1; done
[ -S /run/systemd/journal/socket ] && ok "a systemd-journald of the test's own runs (pid $JD)" || { bad "journald started" "$(cat "$WORK/journald.out")"; finish; exit 1; }
for i in 1 2; do
  check "pkcs11-tool signs (run $i)" pkcs11-tool --module "$MODULE" --login --pin env:PIN --sign -m ECDSA-SHA256 -i "$WORK/data" -o /dev/null
done
for _ in $(seq 30); do [ "$(journalctl --no-pager -o cat KEYSHARE_EVENT=key-use 2>/dev/null | grep -c .)" -ge 2 ] && break; sleep 0.1; done
rec=$(journalctl --no-pager -o json SYSLOG_IDENTIFIER=keyshare-agent KEYSHARE_EVENT=key-use)
JOURNAL_CHECK='
import sys, json
recs = [json.loads(l) for l in sys.stdin if l.strip()]
first = [r for r in recs if r.get("KEYSHARE_COUNT") == "1" and r.get("KEYSHARE_RESULT")]
assert len(first) == 2, recs
for r in first:
    for f in ("KEYSHARE_PROGRAM", "KEYSHARE_PID", "KEYSHARE_UID", "KEYSHARE_TOKEN_ID", "KEYSHARE_TOKEN_LABEL",
              "KEYSHARE_KEY_LABEL", "KEYSHARE_KEY_REF", "KEYSHARE_OPERATION", "KEYSHARE_RESULT", "MESSAGE_ID"):
        assert f in r, (f, r)
    assert r["KEYSHARE_KEY_REF"] == sys.argv[1] and r["KEYSHARE_KEY_LABEL"] == "audited" and r["KEYSHARE_TOKEN_LABEL"] == "audit"
    assert r["KEYSHARE_OPERATION"] == "sign" and r["KEYSHARE_RESULT"] == "CKR_OK" and r["KEYSHARE_UID"] == sys.argv[2]
    assert "pkcs11-tool" in r["KEYSHARE_PROGRAM"]
assert first[0]["KEYSHARE_PID"] != first[1]["KEYSHARE_PID"]
'
python3 -c "$JOURNAL_CHECK" "$REF" "$(id -u)" <<<"$rec" && ok "the journal holds one record per program run, with the structured fields" \
  || bad "journal records and their fields" "$(head -c 1500 <<<"$rec")"
check_out "keyshare log (text) shows the program, the key and the operation" "pkcs11-tool.*used key audited .* to sign" "$KS" log
check_out "keyshare log --since filters through journalctl" '^\[' "$KS" log --json --since "1 hour ago"
exp=$(journalctl --no-pager -o export SYSLOG_IDENTIFIER=keyshare-agent)
! grep -qF -f <(printf '%s\n' "$PIN" "$SOPIN") <<<"$exp" && ok "nothing secret in the journal (no PIN, no SO PIN)" || bad "no secret in the journal"
! grep -q "no systemd journal is running" "$(agent_dir)/agent.log" 2>/dev/null && ok "with a journal the agent's log holds no audit lines" \
  || bad "no fallback with a journal" "$(grep audit "$(agent_dir)/agent.log" | head -2)"
finish
