#!/usr/bin/env bash
# The agent's per-application policy (issue 16 item 4, docs/agent.md "Policy"):
# `keyshare policy allow|deny|list`, judged on the executable the agent
# verified at the hello, by what it is (its file and content, issue 26 defect 7;
# the bind-mount attack is in 81-agent-namespaces). Checks: no policy allows
# every program; an allowed program works; a denied program's C_Initialize
# fails with CKR_TOKEN_NOT_PRESENT, and so does its copy (same content); an
# allowed program upgraded in place stays allowed, with copies of either
# version; a format-1 policy is read and rewritten as format 2; a token
# allowed only to another program, or denied per token, has no slot (and its
# slot ID is CKR_SLOT_ID_INVALID);
# KEYSHARE_ACCESS_GROUPS narrows the policy's groups and never widens them;
# the connect-then-exec race is refused both ways; a symlinked or planted
# store (where the policy lives) and a malformed policy refuse the client;
# every decision is one log line without secrets.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
new_home
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/keyshare-policy.XXXXXX)
export KEYSHARE_AGENT_IDLE_TIMEOUT=60 KEYSHARE_AGENT_PROGRAM=$KS
unset KEYSHARE_IN_PROCESS
export PIN=1234-user SOPIN=9876-so
cleanup() { rm -rf "$WORK" "$KEYSHARE_HOME" "${HOME2:-}"; }
trap cleanup EXIT
LOG=$(agent_dir)/agent.log
SOCK=$(agent_dir)/agent.sock
ks() { "$KS" "$@"; }

check "token work" ks token create --label work --pin-source env:PIN --so-pin-source env:SOPIN
check "token other" ks token create --label other --pin-source env:PIN --so-pin-source env:SOPIN
# Three programs: copies of pkcs11-tool made different (a trailer after the ELF image keeps each
# runnable), since a copy with the same content is the same program (AgentPolicy: by content).
for t in allowed denied third; do cp "$(command -v pkcs11-tool)" "$WORK/$t-tool"; printf '%s' "$t" >>"$WORK/$t-tool"; done
check "compile the race helper" cc -O1 -Wall -Werror -I "$ROOT/Sources/AgentProtocol/include" -o "$WORK/allowed-race" "$ROOT/Tests/integration/c/policyrace.c"
cp "$WORK/allowed-race" "$WORK/denied-race"; printf denied >>"$WORK/denied-race"
labels() { local p=$WORK/$1-tool; [ -x "$p" ] || p=$WORK/$1; "$p" --module "$MODULE" -L 2>&1 | awk -F': *' '/token label/ {print $2}' | sort | tr '\n' ' '; }
logged() { grep -c -- "$1" "${2:-$LOG}" 2>/dev/null || true; }

# --- no policy: every program sees every token -----------------------------------------
check_out "policy list: none" "no policy" ks policy list
[ "$(labels third)" = "other work " ] && ok "no policy: a program sees every token" || bad "no policy: every token" "$(labels third)"
[ "$(logged "third-tool (as the client names it; dev [0-9:]* ino [0-9]*, sha256 [0-9a-f]*…): allowed.*no policy: allow all")" -ge 1 ] && ok "the allow-all decision is logged" || bad "allow-all logged" "$(tail -3 "$LOG")"

# --- allow / deny ----------------------------------------------------------------------
check_out "allow a program the token work" "allow $WORK/allowed-tool token work" ks policy allow --exe "$WORK/allowed-tool" --token work
check_out "deny a program everything" "deny $WORK/denied-tool every token" ks policy deny --exe "$WORK/denied-tool"
check_out "policy list shows both" "denied-tool" ks policy list
[ "$(labels allowed)" = "other work " ] && ok "the allowed program sees its token (and the unruled one)" || bad "allowed program" "$(labels allowed)"
out=$("$WORK/denied-tool" --module "$MODULE" -L 2>&1)
grep -q "CKR_TOKEN_NOT_PRESENT" <<<"$out" && ! grep -q "token label" <<<"$out" \
  && ok "the denied program's C_Initialize fails with CKR_TOKEN_NOT_PRESENT" || bad "denied program refused" "$out"
[ "$(logged "denied-tool (as the client names it.*): denied by rule \"deny $WORK/denied-tool every token\" (same file)")" -ge 1 ] && ok "the refusal is logged with its rule" || bad "refusal logged" "$(tail -3 "$LOG")"
[ "$(labels third)" = "other " ] && ok "a token allowed only to another program has no slot" || bad "allow-listed token hidden" "$(labels third)"
WORKSLOT=$("$WORK/allowed-tool" --module "$MODULE" -L 2>&1 | awk '/^Slot/ {s=$3} /token label *: work/ {print s; exit}' | tr -d '():')
check "control: the allowed program opens a session on the work slot by its ID ($WORKSLOT)" \
  "$WORK/allowed-tool" --module "$MODULE" --slot "$WORKSLOT" -O
out=$("$WORK/third-tool" --module "$MODULE" --slot "$WORKSLOT" -O 2>&1)
grep -q "C_OpenSession failed: rv = CKR_SLOT_ID_INVALID" <<<"$out" \
  && ok "the hidden token's slot ID is CKR_SLOT_ID_INVALID for that program" || bad "hidden slot ID" "$out"
check_out "deny one token to a program" "deny $WORK/allowed-tool token other" ks policy deny --exe "$WORK/allowed-tool" --token other
[ "$(labels allowed)" = "work " ] && ok "a per-token deny hides that token's slot" || bad "per-token deny" "$(labels allowed)"
[ "$(logged "allowed-tool (as the client names it.*): allowed.*hidden tokens")" -ge 1 ] && ok "the hidden tokens are logged" || bad "hidden tokens logged" "$(tail -3 "$LOG")"
check_out "remove a rule" "removed 1 rule" ks policy remove --exe "$WORK/allowed-tool" --token other
[ "$(labels allowed)" = "other work " ] && ok "removing the rule shows the token again (new clients)" || bad "rule removed" "$(labels allowed)"
check_fail "policy for a missing program" "cannot resolve" ks policy allow --exe "$WORK/nope"
check_fail "policy for an unknown token" "other|work|token" ks policy allow --exe "$WORK/third-tool" --token nosuch

# --- a program is what it is (issue 26 defect 7): copies, upgrades in place ------------------------------
cp "$WORK/denied-tool" "$WORK/denied-copy"
out=$("$WORK/denied-copy" --module "$MODULE" -L 2>&1)
grep -q CKR_TOKEN_NOT_PRESENT <<<"$out" && [ "$(logged "denied-copy (as the client names it.*): denied by rule \"deny $WORK/denied-tool every token\" (same content)")" -ge 1 ] \
  && ok "a copy of a denied program (same content, another path) is denied too" || bad "copy of a denied program" "$out / $(tail -2 "$LOG")"
json=$(ks policy list --json)
grep -q "\"sha256\" *: *\"$(sha256sum "$WORK/denied-tool" | cut -c1-64)\"" <<<"$json" \
  && ok "the rule records the program's SHA-256 (policy list --json)" || bad "rule digest" "$json"
cp "$(command -v pkcs11-tool)" "$WORK/up-tool"; printf v1 >>"$WORK/up-tool"
check "allow up-tool (version 1) the token other" ks policy allow --exe "$WORK/up-tool" --token other
cp "$WORK/up-tool" "$WORK/up-v1-copy"
cp "$(command -v pkcs11-tool)" "$WORK/up-new"; printf v2 >>"$WORK/up-new"; mv "$WORK/up-new" "$WORK/up-tool"
cp "$WORK/up-tool" "$WORK/up-v2-copy"
[ "$(labels up)" = "other " ] && ok "upgraded in place (new file, new content at the rule's path): still allowed" || bad "upgrade keeps the rule" "$(labels up)"
[ "$(labels up-v1-copy)" = "other " ] && [ "$(labels up-v2-copy)" = "other " ] \
  && ok "copies of the recorded version and of the version at the path now are the same program" || bad "copies allowed" "$(labels up-v1-copy) / $(labels up-v2-copy)"
[ "$(labels third)" = "" ] && ok "another program still does not see the allow-listed token" || bad "allow-list kept" "$(labels third)"
check "remove up-tool's rule" ks policy remove --exe "$WORK/up-tool"

# --- access groups: the policy's, narrowed never widened ------------------------------------
check "key in group a" ks key generate --type ec --label ga --tag ga --access-group grp.a --pin-source env:PIN --token work
check "key in group b" ks key generate --type ec --label gb --tag gb --access-group grp.b --pin-source env:PIN --token work
check "allow third-tool token work, group a" ks policy allow --exe "$WORK/third-tool" --token work --access-group grp.a
pub() { local tool=third; [ "${1:-}" = --tool ] && { tool=$2; shift 2; }; env "$@" "$WORK/$tool-tool" --module "$MODULE" --token-label work -O --type pubkey 2>&1 | awk -F': *' '/label/ {print $2}' | sort | tr '\n' ' '; }
[ "$(pub)" = "ga " ] && ok "the policy's groups bind the program (only group a)" || bad "policy groups" "$(pub)"
[ "$(pub KEYSHARE_ACCESS_GROUPS=grp.a,grp.b)" = "ga " ] && ok "KEYSHARE_ACCESS_GROUPS cannot widen the policy's groups" || bad "no widening" "$(pub KEYSHARE_ACCESS_GROUPS=grp.a,grp.b)"
out=$(KEYSHARE_ACCESS_GROUPS=grp.b "$WORK/third-tool" --module "$MODULE" -L 2>&1)
grep -q CKR_TOKEN_NOT_PRESENT <<<"$out" && [ "$(logged "names none of the groups the policy allows")" -ge 1 ] \
  && ok "asking only for a group outside the policy is refused, not widened" || bad "outside group refused" "$out"
[ "$(pub --tool allowed KEYSHARE_ACCESS_GROUPS=grp.b)" = "gb " ] \
  && ok "without group rules KEYSHARE_ACCESS_GROUPS still narrows" || bad "narrowing without rules"
check "remove third-tool's rules" ks policy remove --exe "$WORK/third-tool"

# --- the connect-then-exec race ---------------------------------------------------------------
check "deny the race's denied program" ks policy deny --exe "$WORK/denied-race"
check_out "control: the allowed program's own hello is accepted" "^status 0$" "$WORK/allowed-race" "$SOCK" hello
check_out "control: the denied program's own hello is refused" "^status 3$" "$WORK/denied-race" "$SOCK" hello
out=$("$WORK/denied-race" "$SOCK" exec "$WORK/allowed-race")
[ "$out" = "status 3" ] && [ "$(logged "without close-on-exec")" -ge 1 ] \
  && ok "denied program connects, execs an allowed one keeping the socket: refused" || bad "denied->allowed exec race" "$out"
n0=$(logged "without close-on-exec")
out=$("$WORK/allowed-race" "$SOCK" exec "$WORK/denied-race")
[ "$out" = "status 3" ] && [ "$(logged "without close-on-exec")" -gt "$n0" ] \
  && ok "allowed program connects, execs a denied one keeping the socket: refused" || bad "allowed->denied exec race" "$out"
check_out "a socket that could outlive an exec is refused even to an allowed program" "^status 3$" "$WORK/allowed-race" "$SOCK" hello-inherit

# --- the policy's home is the store: planted, symlinked, malformed --------------------------------
HOME2=$(mktemp -d /tmp/keyshare-it2.XXXXXX)
ln -s "$KEYSHARE_HOME/keychain.db" "$HOME2/keychain.db"
# One agent per store (docs/agent.md, "Which agent, which store"): HOME2's agent logs there.
LOG2=$(KEYSHARE_HOME=$HOME2 agent_dir)/agent.log
out=$(KEYSHARE_HOME=$HOME2 "$WORK/allowed-tool" --module "$MODULE" -L 2>&1)
grep -q CKR_DEVICE_ERROR <<<"$out" && [ "$(logged "policy of store $HOME2 cannot be read.*symbolic link" "$LOG2")" -ge 1 ] \
  && ok "a symlinked store (and its policy) refuses the client" || bad "symlinked store refused" "$out / $(tail -2 "$LOG2")"
check_fail "the CLI refuses the symlinked store too" "symbolic link" env KEYSHARE_HOME="$HOME2" "$KS" policy list
rm -f "$HOME2/keychain.db"; cp -a "$KEYSHARE_HOME/." "$HOME2/"; chmod 0777 "$HOME2"
out=$(KEYSHARE_HOME=$HOME2 "$WORK/allowed-tool" --module "$MODULE" -L 2>&1)
grep -q CKR_DEVICE_ERROR <<<"$out" && [ "$(logged "policy of store $HOME2 cannot be read.*world-writable" "$LOG2")" -ge 1 ] \
  && ok "a store others could have planted (world-writable) refuses the client" || bad "planted store refused" "$out / $(tail -2 "$LOG2")"
chmod 0700 "$HOME2"
sqlite3 "$HOME2/keychain.db" "UPDATE meta SET value = CAST('keyshare-agent-policy 1' || char(10) || 'allow' AS BLOB) WHERE key = 'agent-policy'"
out=$(KEYSHARE_HOME=$HOME2 "$WORK/allowed-tool" --module "$MODULE" -L 2>&1)
grep -q CKR_DEVICE_ERROR <<<"$out" && [ "$(logged "policy of store $HOME2 cannot be read.*malformed" "$LOG2")" -ge 1 ] \
  && ok "a malformed policy refuses the client (fails closed)" || bad "malformed policy refused" "$out / $(tail -2 "$LOG2")"
# Format 1 (before rules recorded the program's digest) is still read: its rules name the file at their path.
sqlite3 "$HOME2/keychain.db" "UPDATE meta SET value = CAST('keyshare-agent-policy 1' || char(10) || 'deny' || char(9) || '$WORK/denied-tool' || char(9) || '*' || char(9) || char(9) || '*' || char(10) AS BLOB) WHERE key = 'agent-policy'"
out=$(KEYSHARE_HOME=$HOME2 "$WORK/denied-tool" --module "$MODULE" -L 2>&1)
out2=$(KEYSHARE_HOME=$HOME2 "$WORK/third-tool" --module "$MODULE" -L 2>&1)
grep -q CKR_TOKEN_NOT_PRESENT <<<"$out" && grep -q "token label.*work" <<<"$out2" \
  && ok "a format-1 policy is still read (its deny holds, another program is served)" || bad "format-1 policy" "$out / $out2"
check "a rule added to a format-1 policy" env KEYSHARE_HOME="$HOME2" "$KS" policy deny --exe "$WORK/third-tool" --token other
stored=$(sqlite3 "$HOME2/keychain.db" "SELECT CAST(value AS TEXT) FROM meta WHERE key = 'agent-policy'")
[ "$(head -1 <<<"$stored")" = "keyshare-agent-policy 2" ] && grep -q "^deny	$WORK/denied-tool	\*		\*	-	-$" <<<"$stored" \
  && ok "rewritten as format 2, the format-1 rule kept (no digest recorded)" || bad "format 2 rewrite" "$stored"

# --- no secrets in the log ---------------------------------------------------------------------------
! grep -qF -f <(printf '%s\n' "$PIN" "$SOPIN") "$LOG" && ok "the agent log holds no PIN" || bad "no PIN in the log"
echo "agent decisions logged: $(grep -c "allowed\|refused" "$LOG")"
finish
