#!/usr/bin/env bash
# The private keys are not in a signing host's core (issue 16's test, docs/agent.md
# "Tests and figures"): two hosts, pkcs11-tool (stopped under gdb at its
# C_CloseSession/C_Finalize, after --login and --sign, so still logged in) and the C
# harness agenthost (logged in, signed with both keys, waiting), each signing
# with an RSA-2048 and an EC P-256 key. A gcore of each holds none of the
# keys' bytes: the needles (support/key_needles.py) are each key's PKCS #8 DER
# whole and in 32-byte windows (those not in the public key), and every private
# component of 16 bytes or more (RSA d, p, q, dp, dq, qinv; the EC scalar)
# in both byte orders. The control: the same hosts in the in-process mode
# (KEYSHARE_IN_PROCESS=1) do hold them, so the search can fail.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
agent_work agentcore
MODULE=$(realpath "$MODULE")
export KEYSHARE_AGENT_IDLE_TIMEOUT=60 KEYSHARE_AGENT_PROGRAM=$KS
# The agent is what this script tests, whatever mode the suite runs in; the
# control sets the in-process mode per command.
unset KEYSHARE_IN_PROCESS KEYSHARE_AGENT
export PIN=1234-user SOPIN=9876-so P12PASS=keyshare-test KEYSHARE_TEST_PIN=1234-user
pids=()
agent_pid() { cat "$(agent_dir)/agent.pid" 2>/dev/null; }
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  p=$(agent_pid)
  if [ -n "$p" ] && kill "$p" 2>/dev/null; then
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
  fi
  wait 2>/dev/null
  rm -rf "$WORK" "$KEYSHARE_HOME"
}
trap cleanup EXIT
ID="$FIXTURES/identities"
RSA=device-ds-ke EC=signature-ds-email
KEYS=("$ID/$RSA.key.pem" "$ID/$EC.key.pem")

check "token create" "$KS" token create --label core --pin-source env:PIN --so-pin-source env:SOPIN
check "import an RSA-2048 identity" "$KS" import "$ID/$RSA.modern.p12" --pin-source env:PIN --password-source env:P12PASS
check "import an EC P-256 identity" "$KS" import "$ID/$EC.modern.p12" --pin-source env:PIN --password-source env:P12PASS
check "compile the signing host" cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$WORK/agenthost" \
  "$ROOT/Tests/integration/c/agenthost.c" -ldl
# CKA_ID of an imported identity: its certificate's subject key identifier.
ski() { openssl x509 -in "$ID/$1.cert.pem" -noout -ext subjectKeyIdentifier | tail -1 | tr -d ' :'; }

search() {  # CORE: key_needles.py's verdict; 0 found, 1 none, else broken
  python3 "$ROOT/Tests/integration/support/key_needles.py" "$1" "${KEYS[@]}" >"$WORK/found"
}

# harness_core NAME ENV...: the C harness logs in, signs RSA then EC on one
# session, answers; a gcore of it then; search status in $rc, message in $WORK/found.
harness_core() {
  local out="$WORK/core.$1" line r; shift
  coproc HOST { exec env "$@" "$WORK/agenthost" "$MODULE"; }
  local hp=$HOST_PID; pids+=("$hp")
  read -r -t 20 line <&"${HOST[0]}"
  echo ec >&"${HOST[1]}"; read -r -t 20 r <&"${HOST[0]}"
  if [ "${line%% *}" != ready ] || [ "$r" != 0x0 ]; then echo "host: $line, ec sign $r" >"$WORK/found"; rc=2; return; fi
  gcore -o "$out" "$hp" >/dev/null 2>&1
  exec {HOST[1]}>&-; wait "$hp" 2>/dev/null
  if [ -s "$out.$hp" ]; then search "$out.$hp"; rc=$?; else echo "no core of the host" >"$WORK/found"; rc=3; fi
  rm -f "$out.$hp"
}

# tool_core NAME ALG ARGS ENV...: pkcs11-tool --login --sign under gdb, a gcore
# at its C_CloseSession or C_Finalize, whichever comes first (the module's
# entries: kc_ in the agent client, ks_ in-process): the signature made, the
# session still logged in.
tool_core() {
  local name=$1 out="$WORK/core.$1" mech=$2 sel=$3; shift 3
  rm -f "$out"
  printf 'tool core %s\n' "$name" >"$WORK/data"
  env "$@" gdb -q -batch -ex 'set pagination off' -ex 'set breakpoint pending on' -ex 'break kc_C_CloseSession' -ex 'break kc_C_Finalize' \
    -ex 'break ks_C_CloseSession' -ex 'break ks_C_Finalize' \
    -ex run -ex "gcore $out" -ex kill --args pkcs11-tool --module "$MODULE" --login --pin env:PIN --sign -m "$mech" \
    $sel -i "$WORK/data" -o "$WORK/sig.$name" >"$WORK/gdb.$name" 2>&1
  if [ -s "$out" ] && [ -s "$WORK/sig.$name" ]; then search "$out"; rc=$?
  else echo "no core or no signature: $(grep -v "^During symbol" "$WORK/gdb.$name" | tail -4)" >"$WORK/found"; rc=3; fi
  rm -f "$out"
}

t0=$(date +%s.%N)
harness_core agent KS_IT_MODE=default
[ "$rc" = 1 ] && ok "C harness (agent, the default) logged in, signed RSA and EC: its gcore holds none of the keys' bytes ($(cat "$WORK/found"))" \
  || bad "C harness core (agent) holds no key bytes" "status $rc: $(cat "$WORK/found")"
harness_core inproc KEYSHARE_IN_PROCESS=1
[ "$rc" = 0 ] && ok "control: the in-process C harness's core holds them ($(cat "$WORK/found"))" \
  || bad "control: in-process C harness core holds the keys" "status $rc: $(cat "$WORK/found")"

for k in rsa ec; do
  if [ $k = rsa ]; then mech=SHA256-RSA-PKCS sel="--id $(ski $RSA)"; else mech=ECDSA-SHA256 sel="--id $(ski $EC)"; fi
  tool_core "tool-$k" "$mech" "$sel" KS_IT_MODE=default
  [ "$rc" = 1 ] && ok "pkcs11-tool (agent) at C_CloseSession/C_Finalize after --login --sign ($k): its gcore holds none of the keys' bytes ($(cat "$WORK/found"))" \
    || bad "pkcs11-tool core ($k, agent) holds no key bytes" "status $rc: $(cat "$WORK/found")"
  tool_core "tool-$k-inproc" "$mech" "$sel" KEYSHARE_IN_PROCESS=1
  [ "$rc" = 0 ] && ok "control: the in-process pkcs11-tool's core ($k) holds them ($(cat "$WORK/found"))" \
    || bad "control: in-process pkcs11-tool core ($k) holds the key" "status $rc: $(cat "$WORK/found")"
done
echo "# 6 cores searched in $(echo "$(date +%s.%N) - $t0" | bc) s"
finish
