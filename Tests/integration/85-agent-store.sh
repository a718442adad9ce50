#!/usr/bin/env bash
# Which store a client gets (issue 26 defects 6 and 9a; docs/agent.md "Which
# agent, which store"). The rule: an agent serves the one store it was started
# for, resolved once and bound to its keychain.db's device and inode; a client
# chooses a store only by the socket it reaches (one per store), and can name
# no path to an agent.
# - Defect 6: a refused program flipping a symlinked KEYSHARE_HOME between the
#   victim's store and its own got a session on the victim token, and while it
#   was unlocked a signature without a PIN (151 of 600 tries). Now: none.
# - A store directory replaced behind a running agent is refused, not served
#   with that agent's unlocks.
# - Defect 9a: a client in another mount namespace (a private /tmp: the store
#   and the runtime directory invisible to it) reaches the user's store
#   through the socket bound in, and its own KEYSHARE_HOME makes the agent
#   create nothing; a process in a user namespace of its own starts no agent.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
agent_work store
export KEYSHARE_AGENT_IDLE_TIMEOUT=60 KEYSHARE_AGENT_PROGRAM=$KS
unset KEYSHARE_IN_PROCESS KEYSHARE_AGENT_NO_START
export PIN=1234-user SOPIN=9876-so
TRIES=${STORE_RACE_TRIES:-200}
PIDS=() BINDDIR=
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  [ -n "$BINDDIR" ] && rmdir "$BINDDIR" 2>/dev/null
  rm -rf "$WORK" "$KEYSHARE_HOME" "${B:-}" "${D:-}" "${OWN:-/nonexistent}"
}
trap cleanup EXIT
A=$KEYSHARE_HOME
printf 'store' >"$WORK/data"

# The victim's store A: a token, a key, a policy that allows one program, unlocked.
check "A: token victim" "$KS" token create --label victim --pin-source env:PIN --so-pin-source env:SOPIN
check "A: EC key" "$KS" key generate --type ec --curve P-256 --label k --tag k --pin-source env:PIN
"$KS" key public --tag k >"$WORK/k.pub"
for t in allowed refused; do cp "$(command -v pkcs11-tool)" "$WORK/$t-tool"; printf '%s' "$t" >>"$WORK/$t-tool"; done
check "A: policy allows only allowed-tool" "$KS" policy allow --exe "$WORK/allowed-tool"
# The unlock names both programs: the refused one is kept from A's key by the policy alone.
check "A: unlocked for 5 minutes (for both programs)" "$KS" unlock --for 5m --program "$WORK/allowed-tool" \
  --program "$WORK/refused-tool" --pin-source env:PIN
AAGENT=$(cat "$(agent_dir)/agent.pid")
ASOCK=$(agent_dir)/agent.sock
check "control: the allowed program signs from A without a PIN" \
  "$WORK/allowed-tool" --module "$MODULE" --token-label victim --sign -m ECDSA-SHA256 -i "$WORK/data" -o "$WORK/ctl.sig" --signature-format openssl
check "control: that signature verifies with A's key" openssl dgst -sha256 -verify "$WORK/k.pub" -signature "$WORK/ctl.sig" "$WORK/data"
out=$("$WORK/refused-tool" --module "$MODULE" -L 2>&1)
grep -q CKR_TOKEN_NOT_PRESENT <<<"$out" && ok "control: the refused program is refused by A's policy" || bad "control: refused program" "$out"

# The attacker's store B: no policy (every program allowed), a token of its own.
B=$(mktemp -d /tmp/keyshare-itB.XXXXXX)
check "B: the attacker's own store and token" env KEYSHARE_HOME="$B" "$KS" token create --label attacker --pin-source env:PIN --so-pin-source env:SOPIN

# --- defect 6: the client cannot name the agent's store -------------------------------------------
out=$(KEYSHARE_HOME=$B KEYSHARE_AGENT_SOCKET=$ASOCK "$WORK/refused-tool" --module "$MODULE" -L 2>&1)
grep -q CKR_TOKEN_NOT_PRESENT <<<"$out" && ! grep -q "token label" <<<"$out" \
  && ok "naming its own store (KEYSHARE_HOME=B) on A's socket changes nothing: A's policy refuses it" || bad "store named on A's socket" "$out"
# The race: a link flipped between A and B as fast as a shell can, while the refused program signs without a PIN.
L=$WORK/link
ln -s "$A" "$L"
( while :; do ln -sfn "$A" "$L.new" && mv -T "$L.new" "$L"; ln -sfn "$B" "$L.new" && mv -T "$L.new" "$L"; done ) & FLIP=$!; PIDS+=($FLIP)
signed=0 refused=0 other=0
for i in $(seq "$TRIES"); do
  rm -f "$WORK/race.sig"
  out=$(KEYSHARE_HOME=$L timeout 20 "$WORK/refused-tool" --module "$MODULE" --token-label victim --sign -m ECDSA-SHA256 \
    -i "$WORK/data" -o "$WORK/race.sig" --signature-format openssl 2>&1 </dev/null)
  if [ -s "$WORK/race.sig" ] && openssl dgst -sha256 -verify "$WORK/k.pub" -signature "$WORK/race.sig" "$WORK/data" >/dev/null 2>&1; then
    signed=$((signed + 1))
  elif grep -Eq "CKR_TOKEN_NOT_PRESENT|No slot with token|not found" <<<"$out"; then
    refused=$((refused + 1))
  else
    other=$((other + 1)); [ "$other" = 1 ] && first_other=$out
  fi
done
kill "$FLIP" 2>/dev/null; wait "$FLIP" 2>/dev/null
[ "$signed" = 0 ] && ok "$TRIES tries with KEYSHARE_HOME flipping between A and B: no signature with A's key ($refused refused or no such token, $other other)" \
  || bad "the symlink race yields no signature with the victim's key" "$signed of $TRIES signed"
[ "$other" = 0 ] || bad "every try ends in a refusal or no such token" "$other others, e.g. ${first_other:-}"
[ "$(cat "$(agent_dir)/agent.pid")" = "$AAGENT" ] && ok "A's agent served throughout (pid $AAGENT)" || bad "A's agent" "$AAGENT -> $(cat "$(agent_dir)/agent.pid")"

# --- a store replaced behind its agent is refused --------------------------------------------------
D=$(mktemp -d /tmp/keyshare-itD.XXXXXX)
mv "$A" "$D/a-moved"; mkdir -m 0700 "$A"; cp "$B/keychain.db" "$A/keychain.db"
out=$("$WORK/allowed-tool" --module "$MODULE" -L 2>&1)
grep -q CKR_DEVICE_ERROR <<<"$out" && grep -q "no longer the file this agent opened" "$(agent_dir)/agent.log" \
  && ok "another keychain.db put where A was: refused (CKR_DEVICE_ERROR), the agent says why" \
  || bad "a replaced store is refused" "$out / $(tail -2 "$(agent_dir)/agent.log")"
rm -rf "$A"; mv "$D/a-moved" "$A"
check "control: A moved back, the allowed program is served again" "$WORK/allowed-tool" --module "$MODULE" --token-label victim -O

# --- defect 9a: a client in a mount namespace with a private /tmp -----------------------------------
BINDDIR=$(mktemp -d /run/keyshare-it-bind.XXXXXX)
OWN=/tmp/keyshare-it-own-store.$$.$RANDOM   # the client's own KEYSHARE_HOME: must not appear on the host
rm -rf "$OWN"
# What the namespaced client runs and writes lives outside /tmp (the private /tmp hides $WORK).
OUTDIR=$BINDDIR.out; mkdir -m 0700 "$OUTDIR"
cp "$WORK/allowed-tool" "$WORK/data" "$OUTDIR/"; copy_images "$OUTDIR"
out=$(unshare -m --propagation private sh -c '
  mount --bind "$1" "$2" && mount -t tmpfs none /tmp &&
  { [ ! -e "$3" ] && echo "store hidden"; } &&
  KEYSHARE_AGENT_SOCKET="$2/agent.sock" KEYSHARE_HOME="$6" exec "$4/allowed-tool" --module "$4/$5" \
    --token-label victim --login --pin env:PIN --sign -m ECDSA-SHA256 -i "$4/data" -o "$4/ns.sig" --signature-format openssl' \
  sh "$(agent_dir)" "$BINDDIR" "$A/keychain.db" "$OUTDIR" "$(basename "$MODULE")" "$OWN" 2>&1)
grep -q "store hidden" <<<"$out" && ok "in the namespace the store and the runtime directory are invisible (a private /tmp)" \
  || bad "the namespace hides the store" "$out"
openssl dgst -sha256 -verify "$WORK/k.pub" -signature "$OUTDIR/ns.sig" "$WORK/data" >/dev/null 2>&1 \
  && ok "a client in it signs with the user's key through the socket bound in (KEYSHARE_AGENT_SOCKET)" || bad "the namespaced client signs" "$out"
rm -rf "$OUTDIR"
[ ! -e "$OWN" ] && ok "its own KEYSHARE_HOME ($OWN) made the agent create nothing" || bad "no store created for the client's path" "$(ls -la "$OWN")"
# A sandbox of its own user namespace (unprivileged) finds no agent for its store: it starts none.
D2=$D/sandbox-store
check "D: a store with no agent running" env KEYSHARE_HOME="$D2" "$KS" token create --label d --pin-source env:PIN --so-pin-source env:SOPIN
out=$(KEYSHARE_HOME=$D2 KEYSHARE_DEBUG=1 unshare -Urm "$WORK/allowed-tool" --module "$MODULE" -L 2>&1)
grep -q CKR_DEVICE_ERROR <<<"$out" && grep -q "does not start one" <<<"$out" && [ ! -e "$(KEYSHARE_HOME=$D2 agent_dir)/agent.pid" ] \
  && ok "a process in a user namespace of its own starts no agent (one line says why)" || bad "a sandbox starts no agent" "$out"
finish
