#!/usr/bin/env bash
# A real smart-card stack: pcscd with vsmartcard's vpcd reader driver, a
# virtual CAC card (libcacard, backed by an NSS database) bridged to vpcd by
# Tests/cards/vcac-bridge.c, and OpenSC's opensc-pkcs11.so reading it, mirrored
# by keyshare as an external token (`keyshare driver add --module opensc-pkcs11.so`).
#
# Insertion = starting the bridge, removal = stopping it (vpcd sees its socket
# close, as a reader sees a card pulled). Checks: the watcher reports the
# card's token ID, its certificate appears with a persistent reference, the
# module shows a slot and signs (pkcs11-tool, the OpenSSL engine, ssh-agent +
# ssh-keygen -Y); removal takes the items away (references: item not found,
# sessions: CKR_DEVICE_REMOVED / CKR_SESSION_HANDLE_INVALID); the card comes
# back with the same token ID, references and slot ID. Then CARD_CYCLES
# insert/remove cycles (default 10; `make stress` runs 50) with the module's
# blocking C_WaitForSlotEvent and again with polling: latency of each event,
# none lost or duplicated. Last, a second real module: tpm2-pkcs11 over swtpm.
#
# Isolation: everything runs in a private network namespace (vpcd listens on
# 0.0.0.0:35963) and a private mount namespace with a tmpfs on /run/pcscd
# (pcscd's socket path is fixed): the test's pcscd neither reaches the network
# nor touches a system pcscd. The clients (OpenSC, keyshare, pkcs11-tool) run in
# the same namespaces. pcscd, the card and the watcher are stopped by PID
# (trap). A machine where this cannot run fails here; it is never skipped.
# Secrets: the card PIN reaches programs through the environment (pkcs11-tool
# --pin env:, the C helpers), a pipe (libp11 pin-source=file:/dev/fd/3, NSS -f)
# or SSH_ASKPASS printing a variable; strace proves none reached a command line.
# Usage: 41-cards.sh KEYSHARE MODULE. Ends with "N passed, M failed, K xfail".
set -uo pipefail
KEYSHARE=$(realpath "${1:?keyshare binary}")
MODULE=$(realpath "${2:?module path}")
. "$(dirname "$0")/lib.sh"
. "$HERE/support/consumers.sh"
ROOT=$(cd "$HERE/../.." && pwd)
OPENSC=${OPENSC_MODULE:-/usr/lib/x86_64-linux-gnu/opensc-pkcs11.so}
VPCD=/usr/lib/pcsc/drivers/serial/libifdvpcd.so
CYCLES=${CARD_CYCLES:-10}

# --- 0. the sandbox: private network and mount namespaces, traced execve ----
if [ -z "${KEYSHARE_CARDS_NS:-}" ]; then
  missing=()
  for p in unshare ip pcscd opensc-tool pkcs11-tool certutil pk12util ssh-agent ssh-add ssh-keygen "$OPENSC" "$VPCD"; do
    command -v "$p" >/dev/null 2>&1 || [ -e "$p" ] || missing+=("$p")
  done
  pkg-config --exists libcacard 2>/dev/null || missing+=(libcacard-dev)
  if [ ${#missing[@]} -gt 0 ]; then
    bad "the smart-card stack is installed" "missing: ${missing[*]} (make deps installs pcscd vsmartcard-vpcd opensc-pkcs11 libcacard-dev libnss3-tools)"
    finish_consumers; exit 1
  fi
  userns=()
  [ "$(id -u)" -eq 0 ] || userns=(--map-root-user)
  if ! unshare "${userns[@]}" --net --mount true 2>/dev/null; then
    bad "private network and mount namespaces (unshare -n -m) for pcscd" \
      "unshare refused here: pcscd's vpcd would listen on 0.0.0.0 and its socket would replace the system's; not run"
    finish_consumers; exit 1
  fi
  pre=()
  if [ -z "${KEYSHARE_IT_NO_TRACE:-}" ] && command -v strace >/dev/null; then
    trace=$(mktemp /tmp/keyshare-argv.XXXXXX)
    pre=(strace -f --seccomp-bpf -qq -e trace=execve -s 4096 -o "$trace" env KEYSHARE_IT_TRACE="$trace")
  fi
  exec "${pre[@]}" unshare "${userns[@]}" --net --mount --propagation private -- env KEYSHARE_CARDS_NS=1 bash "$0" "$@"
fi
ARGV_TRACE=${KEYSHARE_IT_TRACE:-}
ip link set lo up || { bad "loopback up in the private network namespace"; finish_consumers; exit 1; }
# pcscd's socket directory, private to this mount namespace (the directory on
# the host's /run is only a mount point: created when absent, left empty).
mkdir -p /run/pcscd && mount -t tmpfs -o mode=0755,size=1m keyshare-pcscd /run/pcscd \
  || { bad "a private /run/pcscd (tmpfs in the mount namespace)"; finish_consumers; exit 1; }

new_home
WORK=$(mktemp -d /tmp/keyshare-41.XXXXXX)
trap cleanup_consumers EXIT
T0=$SECONDS
# OpenSC: no file cache (a card's files must be read from the card), its
# cache directory and ssh's home under WORK.
export HOME=$WORK/home OPENSC_CONF=$WORK/opensc.conf
mkdir -m 700 "$HOME"
printf 'app default {\n  framework pkcs15 {\n    use_file_caching = no;\n  }\n}\n' >"$OPENSC_CONF"
export CARDPIN=24681357 P12PASS=p12-transport WRONGPIN=11112222
ks() { "$KEYSHARE" "$@"; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
ms() { date +%s%3N; }

# --- 1. the card: an RSA identity in an NSS database, the bridge built -------
BRIDGE=${VCAC_BRIDGE:-}
if [ -z "$BRIDGE" ]; then
  BRIDGE=$WORK/vcac-bridge
  cc -O2 -Wall -o "$BRIDGE" "$ROOT/Tests/cards/vcac-bridge.c" $(pkg-config --cflags --libs libcacard) \
    && ok "compile vcac-bridge.c (libcacard)" || bad "compile vcac-bridge.c (libcacard)"
fi
cc -Wall -o "$WORK/slotevent" "$HERE/c/slotevent.c" -ldl -lpthread && ok "compile slotevent.c" || bad "compile slotevent.c"
cc -Wall -o "$WORK/findmatrix" "$ROOT/Tests/cards/findmatrix.c" -ldl && ok "compile findmatrix.c" || bad "compile findmatrix.c"
mkdir "$WORK/nssdb"
certutil -N -d "sql:$WORK/nssdb" -f <(printf '%s\n' "$CARDPIN")
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/card.key" -subj "/CN=keyshare test card" -days 3 \
  -addext keyUsage=digitalSignature,keyEncipherment -out "$WORK/card.pem" 2>/dev/null
openssl pkcs12 -export -inkey "$WORK/card.key" -in "$WORK/card.pem" -name cardid -passout env:P12PASS -out "$WORK/card.p12"
check "pk12util puts the identity in the card's NSS database" pk12util -i "$WORK/card.p12" -d "sql:$WORK/nssdb" \
  -k <(printf '%s\n' "$CARDPIN") -w <(printf '%s' "$P12PASS")
openssl x509 -in "$WORK/card.pem" -pubkey -noout >"$WORK/card.spki"
echo "data signed by the card" >"$WORK/data"

# --- 2. pcscd with vpcd ------------------------------------------------------
# Not through spawn(): its 90 s bound would stop pcscd in the middle of the cycles.
pcscd --foreground --error >"$WORK/pcscd.log" 2>&1 &
PCSCD=$!
PIDS+=("$PCSCD")
for _ in $(seq 100); do [ -S /run/pcscd/pcscd.comm ] && listening 35963 && break; sleep 0.05; done
check_out "pcscd runs with the vpcd reader (private namespaces)" "Virtual PCD" opensc-tool --list-readers
check_out "vpcd listens only inside the namespace" "35963" ss -Hltn "sport = :35963"

CARD_PID=
insert() {  # start the card; returns once vpcd accepted its connection
  "$BRIDGE" --db "$WORK/nssdb" --cert cardid >"$WORK/bridge.out" 2>"$WORK/bridge.err" &
  CARD_PID=$!
  PIDS+=("$CARD_PID")
  for _ in $(seq 600); do grep -qs connected "$WORK/bridge.out" && return 0; kill -0 "$CARD_PID" 2>/dev/null || break; sleep 0.01; done
  INSERT_ERR="card process $(kill -0 "$CARD_PID" 2>/dev/null && echo running || echo exited): $(tail -3 "$WORK/bridge.err"); pcscd: $(tail -3 "$WORK/pcscd.log")"
  return 1
}
remove() {  # stop the card: the reader sees it pulled
  [ -n "$CARD_PID" ] || return 0
  kill "$CARD_PID" 2>/dev/null; wait "$CARD_PID" 2>/dev/null
  CARD_PID=
}

# --- 3. the driver and the watcher -------------------------------------------
ks token create --label soft41 --pin-source env:CARDPIN --so-pin-source env:P12PASS >/dev/null
pkcs11-tool --module "$MODULE" --token-label soft41 --login --pin env:CARDPIN --keypairgen --key-type rsa:2048 --id 0d >/dev/null 2>&1
# OPENSC_CONF is stored with the driver: the agent and every module host give OpenSC that one.
check_out "driver add --module opensc-pkcs11.so (no card yet)" "added driver opensc-pkcs11 .*0 token" \
  ks driver add --module "$OPENSC" --env "OPENSC_CONF=$OPENSC_CONF"
LOG=$WORK/watch.log
# Each step of the watcher's module child is logged (KEYSHARE_DEBUG) to driver.log, shown on a failure.
KEYSHARE_DEBUG=1 KEYSHARE_DRIVER_LOG=$WORK/driver.log "$KEYSHARE" token watch --interval 0.1 --driver-interval 0.5 >"$LOG" 2>"$WORK/watch.err" &
WATCH=$!
PIDS+=("$WATCH")
LINES=0
# expect NAME REGEX [TIMEOUT_MS [START_MS]]: the next watcher line matches REGEX in time;
# sets WAITED (ms from START_MS, default now).
WAITED=
expect() {
  local start=${4:-$(ms)} limit=${3:-15000} line=
  while :; do
    line=$(sed -n "$((LINES + 1))p" "$LOG")
    [ -n "$line" ] && break
    if [ $(( $(ms) - start )) -gt "$limit" ]; then
      bad "$1" "no watcher line within $limit ms (log: $(tail -3 "$LOG"); $(tail -3 "$WORK/watch.err"); $(tail -4 "$WORK/driver.log" 2>/dev/null))"
      WAITED=; return 1
    fi
    sleep 0.01
  done
  WAITED=$(( $(ms) - start ))
  LINES=$((LINES + 1))
  if grep -Eq -- "$2" <<<"$line"; then ok "$1 ($WAITED ms)"; else bad "$1" "got: $line"; WAITED=; return 1; fi
}
for _ in $(seq 100); do grep -qs "opensc-pkcs11:" "$WORK/watch.err" && break; sleep 0.05; done
check_out "the watcher uses OpenSC's blocking C_WaitForSlotEvent" "driver opensc-pkcs11: card events from the module" cat "$WORK/watch.err"

echo "time: setup $((SECONDS - T0)) s"
# --- 4. insertion --------------------------------------------------------------
T=$(ms); insert || bad "the card connects to vpcd" "$INSERT_ERR"
expect "watch lists the soft token first" "^inserted com\.keyshare\.soft:"
expect "insert: the watcher reports the card's token ID" "^inserted pkcs11\.opensc-pkcs11:[0-9a-f]+$" 20000 "$T"
CARDID=$(sed -n 2p "$LOG" | awk '{print $2}')
SERIAL=${CARDID#pkcs11.opensc-pkcs11:}
LABEL=$(ks token list --json | json "[t['label'] for t in d if t['tokenID']=='$CARDID'][0]")
SLOT=$(ks token list --json | json "[t['slotID'] for t in d if t['tokenID']=='$CARDID'][0]")
[ "$LABEL" = "keyshare test card" ] && ok "token label from the card: $LABEL (serial $SERIAL, slot $SLOT)" \
  || bad "token label from the card" "label '$LABEL'"
items() { ks list --json | json "sorted(i['itemClass']+' '+i['label'] for i in d if i['tokenID']=='$CARDID')"; }
check_out "keyshare list: the card's certificate, public key and private-key proxy" \
  "'certificate CAC ID Certificate', 'private-key CAC ID Certificate', 'public-key CAC ID Certificate'" items
CERTREF=$(ks list --json | json "[i['reference'] for i in d if i['tokenID']=='$CARDID' and i['itemClass']=='certificate'][0]")
REFS=$(ks list --json | json "' '.join(sorted(i['reference'] for i in d if i['tokenID']=='$CARDID'))")
check_out "the certificate has a persistent reference that resolves" "reference: $CERTREF" ks show "$CERTREF"
check_out "the mirrored certificate is the card's" "CN *= *keyshare test card" ks show "$CERTREF"
printf -v SLOTHEX '0x%x' "$SLOT"
check_out "libkeyshare-pkcs11.so shows the card in slot $SLOTHEX" "token label +: keyshare test card" \
  sh -c "pkcs11-tool --module '$MODULE' -L | grep -A1 '($SLOTHEX)'"

# --- 5. signing through keyshare with the card's key ---------------------------
check "pkcs11-tool signs (SHA256-RSA-PKCS, PKCS #1 v1.5) through keyshare on the card" \
  pkcs11-tool --module "$MODULE" --token-label "$LABEL" --login --pin env:CARDPIN --sign -m SHA256-RSA-PKCS \
  --id 0001 -i "$WORK/data" -o "$WORK/p11.sig"
check "... the signature verifies with the card's certificate" openssl dgst -sha256 -verify "$WORK/card.spki" \
  -signature "$WORK/p11.sig" "$WORK/data"
# The CAC emulator refuses a wrong PIN without a retry counter; OpenSC then says
# CKR_GENERAL_ERROR. keyshare passes on what the card's module says.
direct=$(pkcs11-tool --module "$OPENSC" --login --pin env:WRONGPIN --sign -m SHA256-RSA-PKCS --id 0001 \
  -i "$WORK/data" -o "$WORK/x.sig" 2>&1 | grep -o 'C_Login failed: rv = [A-Z_]*')
rm -f "$WORK/x.sig"
check "pkcs11-tool signs raw CKM_RSA_PKCS through keyshare on the card" pkcs11-tool --module "$MODULE" --token-label "$LABEL" \
  --login --pin env:CARDPIN --sign -m RSA-PKCS --id 0001 -i "$WORK/data" -o "$WORK/raw.sig"
check_out "... the PKCS #1 v1.5 block recovers the data with the certificate's key" "^data signed by the card$" \
  openssl pkeyutl -verifyrecover -pubin -inkey "$WORK/card.spki" -in "$WORK/raw.sig"
out=$(pkcs11-tool --module "$MODULE" --token-label "$LABEL" --login --pin env:WRONGPIN --sign -m SHA256-RSA-PKCS --id 0001 \
  -i "$WORK/data" -o "$WORK/x.sig" 2>&1) && bad "a wrong PIN is refused by the card" "$out" \
  || { [ -n "$direct" ] && grep -q "$direct" <<<"$out" && [ ! -s "$WORK/x.sig" ] \
       && ok "a wrong PIN is refused by the card, with the card module's own answer (${direct#*= })" \
       || bad "a wrong PIN is refused by the card, with the card module's own answer" "keyshare: $out; OpenSC directly: $direct"; }
check "OpenSSL engine (libp11) signs with the card's key through keyshare" env PKCS11_MODULE_PATH="$MODULE" \
  openssl dgst -sha256 -engine pkcs11 -keyform engine -out "$WORK/engine.sig" \
  -sign "pkcs11:token=keyshare%20test%20card;id=%00%01;type=private;pin-source=file:/dev/fd/3" "$WORK/data" 3< <(pin_pipe CARDPIN)
check "... the engine's signature verifies" openssl dgst -sha256 -verify "$WORK/card.spki" -signature "$WORK/engine.sig" "$WORK/data"
# OpenSSH: ssh-keygen -D lists the card's key; ssh-agent holds it (ssh-add -s,
# PIN through SSH_ASKPASS) and ssh-keygen -Y signs through the agent; -Y verify checks.
ssh-keygen -i -m PKCS8 -f "$WORK/card.spki" >"$WORK/card.pub"
ssh-keygen -D "$MODULE" >"$WORK/token.pub" 2>"$WORK/keygen.err"
grep -qF "$(cut -d' ' -f2 "$WORK/card.pub")" "$WORK/token.pub" && ok "ssh-keygen -D MODULE prints the card's RSA key" \
  || bad "ssh-keygen -D MODULE prints the card's RSA key" "$(cat "$WORK/token.pub" "$WORK/keygen.err")"
printf '#!/bin/sh\nprintf "%%s\\n" "$CARDPIN"\n' >"$WORK/askpass"; chmod 700 "$WORK/askpass"
spawn "$WORK/agent.log" ssh-agent -D -a "$WORK/agent.sock" -P "$(dirname "$MODULE")/*"
for _ in $(seq 50); do [ -S "$WORK/agent.sock" ] && break; sleep 0.05; done
AG=(env SSH_AUTH_SOCK="$WORK/agent.sock" SSH_ASKPASS="$WORK/askpass" SSH_ASKPASS_REQUIRE=force DISPLAY=none)
check "ssh-add -s MODULE (PIN through SSH_ASKPASS)" "${AG[@]}" timeout 60 ssh-add -s "$MODULE"
check "ssh-keygen -Y sign with the card's key (through the agent)" "${AG[@]}" ssh-keygen -Y sign -f "$WORK/card.pub" -n file "$WORK/data"
printf 'card %s\n' "$(cut -d' ' -f1,2 "$WORK/card.pub")" >"$WORK/allowed_signers"
check_out "ssh-keygen -Y verify accepts the signature" "Good \"file\" signature for card" \
  sh -c "ssh-keygen -Y verify -f '$WORK/allowed_signers' -I card -n file -s '$WORK/data.sig' < '$WORK/data'"
"${AG[@]}" ssh-add -e "$MODULE" >/dev/null 2>&1
# A card's key answers every find template a soft token's key does (soft41, made before the watcher started).
export KEYSHARE_TEST_PIN=$CARDPIN KEYSHARE_TEST_PIN2=$CARDPIN
check_out "find templates: the CAC key answers and matches as a soft RSA key does" "templates, 0 failures" \
  "$WORK/findmatrix" "$MODULE" "$LABEL" private 0001 soft41 0d

echo "time: through signing $((SECONDS - T0)) s"
# --- 6. removal ------------------------------------------------------------------
rm -f "$WORK/go"
"$WORK/slotevent" "$MODULE" session "$LABEL" "$WORK/go" "CAC ID Certificate" >"$WORK/session.log" 2>&1 &
SIGNER=$!
PIDS+=("$SIGNER")
for _ in $(seq 200); do grep -qs ready "$WORK/session.log" && break; sleep 0.05; done
check_out "a session logged in and signing on the card" "login=0x0 signinit=0x0" cat "$WORK/session.log"
T=$(ms); remove
expect "remove: the watcher reports it" "^removed $CARDID\$" 15000 "$T"
touch "$WORK/go"
wait "$SIGNER" 2>/dev/null
check_out "session on the removed card: C_GetSessionInfo CKR_DEVICE_REMOVED or CKR_SESSION_HANDLE_INVALID" "getsessioninfo=0x(32|b3)$" cat "$WORK/session.log"
check_out "session on the removed card: C_Sign CKR_DEVICE_REMOVED or CKR_SESSION_HANDLE_INVALID" "sign=0x(32|b3)$" cat "$WORK/session.log"
check_out "removed: none of the card's items remain" "^\[\]$" items
check_fail "removed: the certificate's reference gives item not found" "item not found.*insert" ks show "$CERTREF"
check_out "removed: the module shows no slot with a token for it" "^$" sh -c "'$WORK/slotevent' '$MODULE' slots | grep -x '$SLOT' || true"

# --- 7. reinsertion ---------------------------------------------------------------
T=$(ms); insert || bad "the card connects to vpcd again" "$INSERT_ERR"
expect "reinsert: same token ID" "^inserted $CARDID\$" 20000 "$T"
check_out "reinsert: the reference resolves again" "reference: $CERTREF" ks show "$CERTREF"
[ "$(ks list --json | json "' '.join(sorted(i['reference'] for i in d if i['tokenID']=='$CARDID'))")" = "$REFS" ] \
  && ok "reinsert: every reference is the same" || bad "reinsert: every reference is the same"
[ "$(ks token list --json | json "[t['slotID'] for t in d if t['tokenID']=='$CARDID'][0]")" = "$SLOT" ] \
  && ok "reinsert: same slot ID ($SLOT)" || bad "reinsert: same slot ID"
check "signs again after reinsertion" pkcs11-tool --module "$MODULE" --token-label "$LABEL" --login --pin env:CARDPIN \
  --sign -m SHA256-RSA-PKCS --id 0001 -i "$WORK/data" -o "$WORK/p11b.sig"
check "... and verifies" openssl dgst -sha256 -verify "$WORK/card.spki" -signature "$WORK/p11b.sig" "$WORK/data"
remove
expect "removed again" "^removed $CARDID\$" 15000

echo "time: through reinsertion $((SECONDS - T0)) s"
# --- 8. latency, events lost or duplicated: blocking events, then polling -----------
# cycles MODE: CYCLES insert/remove pairs against the running watcher; prints a
# summary line and checks the log has exactly the pairs, in order.
summary() {
  sort -n | awk '{a[NR] = $1; s += $1} END {
    if (NR == 0) exit
    p = int(NR * 0.95 + 0.5); if (p > NR) p = NR; if (p < 1) p = 1
    printf "n=%d min=%d median=%d p95=%d max=%d mean=%.0f", NR, a[1], a[int((NR + 1) / 2)], a[p], a[NR], s / NR }'
}
cycles() {
  local mode=$1 i ins=() rem=() before=$LINES
  for i in $(seq "$CYCLES"); do
    T=$(ms); insert || { bad "$mode cycle $i: the card connects" "$INSERT_ERR"; break; }
    expect "$mode cycle $i: inserted" "^inserted $CARDID\$" 20000 "$T" >/dev/null && ins+=("$WAITED")
    T=$(ms); remove
    expect "$mode cycle $i: removed" "^removed $CARDID\$" 20000 "$T" >/dev/null && rem+=("$WAITED")
  done
  sleep 1  # a late duplicate would show here
  local got want
  got=$(tail -n +$((before + 1)) "$LOG")
  want=$(for _ in $(seq "$CYCLES"); do echo "inserted $CARDID"; echo "removed $CARDID"; done)
  [ ${#ins[@]} -eq "$CYCLES" ] && [ "$got" = "$want" ] && ok "$mode: $CYCLES insert/remove cycles, $((2 * CYCLES)) events, none lost or duplicated" \
    || bad "$mode: $CYCLES insert/remove cycles, none lost or duplicated" "$(diff <(echo "$want") <(echo "$got") | head -5)"
  LINES=$(wc -l <"$LOG")
  echo "latency $mode insert->event ms: $(printf '%s\n' "${ins[@]:-}" | grep . | summary)"
  echo "latency $mode remove->event ms: $(printf '%s\n' "${rem[@]:-}" | grep . | summary)"
}
cycles "events(C_WaitForSlotEvent)"
# The watcher killed outright: its module child (blocked in OpenSC's wait) leaves on its own.
KIDS=$(pgrep -P "$WATCH" | tr '\n' ' ')
kill -KILL "$WATCH"; wait "$WATCH" 2>/dev/null
# "Exited" is state Z too: the orphan is reparented to this machine's PID 1 (or a subreaper), which may
# reap it late, and kill -0 succeeds on a zombie. A process still running in OpenSC is any other state.
running() { local st; st=$(sed -n "s/^.*) \([A-Za-z]\).*/\1/p" "/proc/$1/stat" 2>/dev/null) && [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]; }
for _ in $(seq 40); do alive=; for k in $KIDS; do running "$k" && alive=1; done; [ -z "$alive" ] && break; sleep 0.05; done
[ -n "$KIDS" ] && [ -z "$alive" ] && ok "watcher killed (SIGKILL): its module child ($KIDS) exits by itself" \
  || bad "watcher killed (SIGKILL): its module child exits by itself" "children: '$KIDS', still alive: ${alive:-no}"
for k in $KIDS; do kill -KILL "$k" 2>/dev/null; done
KEYSHARE_DEBUG=1 KEYSHARE_DRIVER_LOG=$WORK/driver.log "$KEYSHARE" token watch --interval 0.1 --driver-interval 0.5 \
  --driver-events poll >"$LOG" 2>"$WORK/watch.err" &
WATCH=$!
PIDS+=("$WATCH")
LINES=0
expect "the polling watcher lists the soft token first" "^inserted com\.keyshare\.soft:"
for _ in $(seq 100); do grep -qs "opensc-pkcs11:" "$WORK/watch.err" && break; sleep 0.05; done
check_out "--driver-events poll: the watcher polls OpenSC" "driver opensc-pkcs11: polling" cat "$WORK/watch.err"
cycles "polling(0.5 s)"
stop "$WATCH"

stop "$PCSCD"

# --- 9. a second real module: tpm2-pkcs11 over a software TPM (swtpm) -----------
# swtpm on 127.0.0.1 inside the same private network namespace. No resource
# manager here: a TPM holds 3 transient objects, so contexts are flushed after
# each tpm2_ptool step (test-hardware notes). PINs through pkcs11-tool env:.
T1=$SECONDS
TPMMOD=/usr/lib/x86_64-linux-gnu/pkcs11/libtpm2_pkcs11.so
if need "tpm2-pkcs11 over swtpm" swtpm tpm2_ptool tpm2_flushcontext "$TPMMOD"; then
  export TPMSO=20406080 TPMPIN=13579864 TPMDIR=$WORK/tpm
  mkdir -p "$TPMDIR/state" "$TPMDIR/store"
  export TPM2TOOLS_TCTI="swtpm:host=127.0.0.1,port=2321" TPM2_PKCS11_TCTI="swtpm:host=127.0.0.1,port=2321" \
    TPM2_PKCS11_STORE=$TPMDIR/store TPM2_PKCS11_LOG_LEVEL=0
  # The tpm2-pkcs11 driver is given these with `driver add --env` (docs/agent.md,
  # "Driver configuration"): the running agent, started before they existed and
  # never inheriting them, loads the module with the stored ones.
  swtpm socket --tpmstate dir="$TPMDIR/state" --tpm2 --server type=tcp,port=2321,bindaddr=127.0.0.1 \
    --ctrl type=tcp,port=2322,bindaddr=127.0.0.1 --flags not-need-init,startup-clear --daemon --pid file="$TPMDIR/pid"
  for _ in $(seq 50); do [ -s "$TPMDIR/pid" ] && listening 2321 && break; sleep 0.05; done
  SWTPM=$(cat "$TPMDIR/pid" 2>/dev/null); PIDS+=("$SWTPM")
  flush() { tpm2_flushcontext -t; tpm2_flushcontext -l; tpm2_flushcontext -s; } >/dev/null 2>&1
  tpm() { pkcs11-tool --module "$TPMMOD" "$@" >/dev/null 2>&1; }
  tpm2_ptool init --path "$TPMDIR/store" >/dev/null 2>&1; flush
  tpm2_ptool addemptytoken --pid 1 --path "$TPMDIR/store" >/dev/null 2>&1; flush
  tpm --slot-index 0 --init-token --label tpmtok --so-pin env:TPMSO
  tpm --token-label tpmtok --login --login-type so --so-pin env:TPMSO --init-pin --new-pin env:TPMPIN
  tpm --token-label tpmtok --login --pin env:TPMPIN --keypairgen --key-type rsa:2048 --id 01 --label trsa
  tpm --token-label tpmtok --login --pin env:TPMPIN --keypairgen --key-type EC:prime256v1 --id 02 --label tec
  check_out "a tpm2-pkcs11 token on swtpm ($((SECONDS - T1)) s to set up)" "token label +: tpmtok" pkcs11-tool --module "$TPMMOD" -L
  check_out "driver add --module libtpm2_pkcs11.so --env TPM2_PKCS11_*" "added driver tpm2_pkcs11 .*1 token" \
    ks driver add --module "$TPMMOD" --env "TPM2_PKCS11_TCTI=$TPM2_PKCS11_TCTI" --env "TPM2_PKCS11_STORE=$TPM2_PKCS11_STORE" \
    --env TPM2_PKCS11_LOG_LEVEL=0
  TPMID=$(ks token list --json | json "[t['tokenID'] for t in d if t['label']=='tpmtok'][0]")
  check_out "the TPM token's key pairs are mirrored ($TPMID)" "'private-key tec', 'private-key trsa', 'public-key tec', 'public-key trsa'" \
    sh -c "\"$KEYSHARE\" list --json | python3 -c \"import json,sys; print(sorted(i['itemClass']+' '+i['label'] for i in json.load(sys.stdin) if i['tokenID']=='$TPMID'))\""
  for spec in "01 SHA256-RSA-PKCS" "02 ECDSA-SHA256"; do
    set -- $spec
    if [ "$1" = 02 ]; then  # the EC key: lib.sh's ec_pubkey_der, not pkcs11-tool 0.23's --read-object
      ec_pubkey_der "$WORK/tpm$1.der" pkcs11-tool --module "$TPMMOD" --token-label tpmtok --id "$1"
    else
      tpm --token-label tpmtok --read-object --type pubkey --id "$1" -o "$WORK/tpm$1.der"
    fi
    check "the TPM signs through keyshare ($2)" pkcs11-tool --module "$MODULE" --token-label tpmtok --login --pin env:TPMPIN \
      --sign -m "$2" --signature-format openssl --id "$1" -i "$WORK/data" -o "$WORK/tpm$1.sig"
    check "... and the signature verifies with the TPM's public key ($2)" openssl dgst -sha256 \
      -verify <(openssl pkey -pubin -inform DER -in "$WORK/tpm$1.der") -signature "$WORK/tpm$1.sig" "$WORK/data"
  done
  # One watcher, two modules: OpenSC has events (pcscd is stopped now: its child
  # reports the failure), tpm2-pkcs11 has none and is polled.
  "$KEYSHARE" token watch --interval 0.1 --driver-interval 0.5 >"$WORK/watch3.log" 2>"$WORK/watch3.err" &
  W3=$!; PIDS+=("$W3")
  for _ in $(seq 100); do grep -qs "tpm2_pkcs11:" "$WORK/watch3.err" && break; sleep 0.05; done
  check_out "the watcher polls tpm2-pkcs11 (its C_WaitForSlotEvent does not block)" "driver tpm2_pkcs11: polling" cat "$WORK/watch3.err"
  for _ in $(seq 100); do grep -qs "inserted $TPMID" "$WORK/watch3.log" && break; sleep 0.05; done
  check_out "the watcher lists the TPM token" "^inserted $TPMID\$" cat "$WORK/watch3.log"
  stop "$W3" "$SWTPM"
  echo "tpm2-pkcs11 section: $((SECONDS - T1)) s"
fi

check_no_secret_argv CARDPIN WRONGPIN P12PASS TPMSO TPMPIN
echo "41-cards: $((SECONDS - T0)) s"
finish_consumers
