#!/usr/bin/env bash
# The agent under systemd socket activation (issue 16, docs/agent.md "Start,
# exit, uniqueness"): dist/systemd's keyshare-agent.socket/.service pass
# `systemd-analyze --user verify`; the real `systemd-socket-activate` listens
# on the agent's socket and starts `keyshare agent` with LISTEN_FDS on the
# first connection; the module (pkcs11-tool, auto-start disabled) lists,
# logs in and signs through it; the agent keeps its lock and pid file next to
# the socket it was handed, not where its (here empty) environment points.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
agent_work agentsd
export KEYSHARE_AGENT_PROGRAM=$KS
unset KEYSHARE_IN_PROCESS
export PIN=1234-user SOPIN=9876-so P12PASS=keyshare-test
SA=
cleanup() {
  [ -n "$SA" ] && kill "$SA" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$WORK" "$KEYSHARE_HOME"
}
trap cleanup EXIT
ID="$FIXTURES/identities"

# --- the units -----------------------------------------------------------------
mkdir "$WORK/units" "$WORK/sdrun"; chmod 0700 "$WORK/sdrun"
BINDIR=$(cd "$(dirname "$KS")" && pwd)
for u in "$ROOT"/dist/systemd/keyshare-agent.socket "$ROOT"/dist/systemd/keyshare-agent.service; do
  sed "s|@bindir@|$BINDIR|g; s|@docdir@|$ROOT/docs|g" "$u" >"$WORK/units/$(basename "$u")"
done
check "systemd-analyze --user verify keyshare-agent.socket + .service" \
  env XDG_RUNTIME_DIR="$WORK/sdrun" systemd-analyze --user verify "$WORK/units/keyshare-agent.socket" "$WORK/units/keyshare-agent.service"
grep -q '^ListenStream=%t/keyshare/agent.sock$' "$WORK/units/keyshare-agent.socket" \
  && grep -q "^ExecStart=$BINDIR/keyshare agent" "$WORK/units/keyshare-agent.service" \
  && ok "the socket unit listens where the module connects (%t/keyshare/agent.sock) and starts keyshare agent" \
  || bad "socket path and ExecStart of the units" "$(cat "$WORK"/units/*)"

# The agent unit's sandbox (issue 28): systemd's own exposure score, offline, at most 4.0.
expo=$(cd "$WORK/units" && XDG_RUNTIME_DIR="$WORK/sdrun" systemd-analyze security --user --offline=true ./keyshare-agent.service 2>&1 |
  sed -n 's/.*Overall exposure level for keyshare-agent.service: \([0-9.]*\).*/\1/p')
[ -n "$expo" ] && awk -v e="$expo" 'BEGIN { exit !(e <= 4.0) }' \
  && ok "systemd-analyze security: the agent unit's exposure is $expo (at most 4.0)" || bad "the agent unit's exposure" "${expo:-no figure}"

# --- socket activation ---------------------------------------------------------------
check "token create" "$KS" token create --label sd --pin-source env:PIN --so-pin-source env:SOPIN
check "import an RSA identity" "$KS" import "$ID/device-ds-ke.modern.p12" --pin-source env:PIN --password-source env:P12PASS
# One agent per store: this store's socket is in a directory of its own (agent_dir).
mkdir -m 0700 "$XDG_RUNTIME_DIR/keyshare" "$(agent_dir)"
# As the socket unit: the manager makes the directory and the socket, and
# starts the agent (exec'd in its place, so its PID is $SA) on the first
# connection. systemd-socket-activate passes the agent no XDG_RUNTIME_DIR; the
# store is the agent's own environment's (-E KEYSHARE_HOME, as a unit's Environment=).
systemd-socket-activate -E KEYSHARE_HOME -l "$(agent_dir)/agent.sock" "$KS" agent --idle-timeout 60 2>"$WORK/agent.err" &
SA=$!
for _ in $(seq 50); do [ -S "$(agent_dir)/agent.sock" ] && break; sleep 0.1; done
export KEYSHARE_AGENT_NO_START=1
check_out "pkcs11-tool lists the token through the activated agent" "token label +: sd" \
  pkcs11-tool --module "$MODULE" -L
grep -q "socket-activated" "$WORK/agent.err" && [ "$(tr '\0' ' ' <"/proc/$SA/cmdline")" = "$KS agent --idle-timeout 60 " ] \
  && ok "the agent was started by systemd-socket-activate with LISTEN_FDS (pid $SA, log: socket-activated)" \
  || bad "the agent took the socket from systemd-socket-activate" "$(cat "$WORK/agent.err")"
printf 'socket activation' >"$WORK/data"
check "pkcs11-tool logs in and signs (RSA) through it" pkcs11-tool --module "$MODULE" --login --pin env:PIN \
  --sign --mechanism SHA256-RSA-PKCS --input-file "$WORK/data" --output-file "$WORK/sig"
check "the signature verifies with the certificate's key" sh -c \
  "openssl pkcs12 -in '$ID/device-ds-ke.modern.p12' -nokeys -passin env:P12PASS -clcerts 2>/dev/null | openssl x509 -pubkey -noout >'$WORK/pub.pem' &&
   openssl dgst -sha256 -verify '$WORK/pub.pem' -signature '$WORK/sig' '$WORK/data'"
[ "$(cat "$(agent_dir)/agent.pid" 2>/dev/null)" = "$SA" ] && [ -e "$(agent_dir)/agent.lock" ] \
  && ok "its lock and pid file are next to the socket it was handed (one agent per socket)" \
  || bad "the activated agent's lock and pid file are next to its socket" "$(ls -la "$(agent_dir)"; cat "$WORK/agent.err")"
[ "$(stat -c %a "$(agent_dir)/agent.sock")" = 600 ] && ok "the socket is 0600" \
  || bad "the socket is 0600" "$(stat -c %a "$(agent_dir)/agent.sock")"
# With auto-start allowed, a client finds the activated agent and starts no other.
unset KEYSHARE_AGENT_NO_START
check "a client with auto-start allowed uses it" pkcs11-tool --module "$MODULE" -L
# An auto-started agent would log to DIR/agent.log and take over the pid file.
[ ! -e "$(agent_dir)/agent.log" ] && [ "$(cat "$(agent_dir)/agent.pid" 2>/dev/null)" = "$SA" ] \
  && ok "still exactly one agent (none auto-started beside it)" \
  || bad "still exactly one agent" "$(cat "$(agent_dir)/agent.log" 2>/dev/null)"
kill "$SA" 2>/dev/null; wait "$SA" 2>/dev/null; SA=
finish
