#!/usr/bin/env bash
# Replays the module fuzzer's kept corpus and crash reproducers (Tests/fuzz,
# issue 8) against the release module with a plain C build of the harness, so
# make test catches a regression without a sanitizer build; then those of the
# agent protocol's C targets (protocol, shm, hello, gate), each with its own
# invariants (an abort is a failure); then the control requests' through the
# release CLI. (The other Swift targets' corpora are replayed by
# Tests/KeySharingTests/FuzzCorpusTests.swift.)
# Usage: 62-fuzz-replay.sh KEYSHARE MODULE.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")
source "$(dirname "$0")/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-replay.XXXXXX)
FAKE=
trap '[ -n "$FAKE" ] && kill "$FAKE" 2>/dev/null; rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PIN=1234-user SOPIN=9876-so P12PASS=keyshare-test
"$KS" token create --label fuzz --pin-source env:PIN --so-pin-source env:SOPIN >/dev/null
for n in device-ds-ke signature-ds-email; do
  "$KS" import "$FIXTURES/identities/$n.modern.p12" --pin-source env:PIN --password-source env:P12PASS >/dev/null
done
check "compile replay host" cc -O1 -Wall -Werror -DFUZZ_MAIN_REPLAY -I "$ROOT/pkcs11/types" \
  -o "$WORK/replay" "$ROOT/Tests/fuzz/module_fuzz.c" -ldl
files=("$ROOT"/Tests/fuzz/corpus/module/* "$ROOT"/Tests/fuzz/crashes/module-*)
existing=(); for f in "${files[@]}"; do [ -f "$f" ] && existing+=("$f"); done
check_out "replay ${#existing[@]} module inputs (corpus + crash reproducers)" "replayed [0-9]+ inputs" \
  env KEYSHARE_FUZZ_MODULE="$MODULE" "$WORK/replay" "${existing[@]}"
# The agent protocol's codecs (Tests/fuzz/protocol_fuzz.c): its corpus and
# crash reproducers, replayed by a plain build (no sanitizer, no libFuzzer).
AP="$ROOT/Sources/AgentProtocol"
# frame.c's deadlines use spin.c's clock (ksa_mono_ns).
AP_ALL=("$AP/codec.c" "$AP/kdf_params.c" "$AP/struct_params.c" "$AP/breadth_params.c" "$AP/template_params.c" "$AP/v32_params.c" "$AP/pq_params.c" "$AP/frame.c" "$AP/serve.c" "$AP/epoch.c" "$AP/spin.c")
check "compile protocol replay host" cc -O1 -Wall -Werror -DFUZZ_MAIN_REPLAY -I "$ROOT/pkcs11/types" -I "$AP/include" \
  -o "$WORK/protocol_replay" "$ROOT/Tests/fuzz/protocol_fuzz.c" "${AP_ALL[@]}"
files=("$ROOT"/Tests/fuzz/corpus/protocol/* "$ROOT"/Tests/fuzz/crashes/protocol-*)
existing=(); for f in "${files[@]}"; do [ -f "$f" ] && existing+=("$f"); done
[ ${#existing[@]} -ge 10 ] && ok "the protocol corpus is there (${#existing[@]} inputs)" \
  || bad "the protocol corpus is there" "${#existing[@]} inputs"
check_out "replay ${#existing[@]} protocol inputs (corpus + crash reproducers)" "replayed [0-9]+ inputs" \
  "$WORK/protocol_replay" "${existing[@]}"
# The agent's side of the shared region (Tests/fuzz/shm_fuzz.c): hostile
# regions and sockets from its corpus and crash reproducers. Single-threaded: the rest
# of a partial frame never comes, so no 10 s wait for it (KSA_FRAME_TIMEOUT_MS=0).
check "compile shm replay host" cc -O1 -Wall -Werror -DFUZZ_MAIN_REPLAY -DKSA_FRAME_TIMEOUT_MS=0 -I "$ROOT/pkcs11/types" -I "$AP/include" \
  -o "$WORK/shm_replay" "$ROOT/Tests/fuzz/shm_fuzz.c" "$AP/shm.c" "${AP_ALL[@]}"
files=("$ROOT"/Tests/fuzz/corpus/shm/* "$ROOT"/Tests/fuzz/crashes/shm-*)
existing=(); for f in "${files[@]}"; do [ -f "$f" ] && existing+=("$f"); done
[ ${#existing[@]} -ge 10 ] && ok "the shm corpus is there (${#existing[@]} inputs)" \
  || bad "the shm corpus is there" "${#existing[@]} inputs"
check_out "replay ${#existing[@]} shm inputs (corpus + crash reproducers)" "replayed [0-9]+ inputs" \
  "$WORK/shm_replay" "${existing[@]}"
# The hello and its reply (Tests/fuzz/hello_fuzz.c: hello.c), and the agent's
# gate before a first frame (Tests/fuzz/gate_fuzz.c: gate.c, real socketpairs).
for t in hello gate; do
  check "compile $t replay host" cc -O1 -Wall -Werror -DFUZZ_MAIN_REPLAY -I "$ROOT/pkcs11/types" -I "$AP/include" \
    -o "$WORK/${t}_replay" "$ROOT/Tests/fuzz/${t}_fuzz.c" "$AP/hello.c" "$AP/gate.c" "${AP_ALL[@]}"
  files=("$ROOT"/Tests/fuzz/corpus/$t/* "$ROOT"/Tests/fuzz/crashes/$t-*)
  existing=(); for f in "${files[@]}"; do [ -f "$f" ] && existing+=("$f"); done
  [ ${#existing[@]} -ge 10 ] && ok "the $t corpus is there (${#existing[@]} inputs)" \
    || bad "the $t corpus is there" "${#existing[@]} inputs"
  check_out "replay ${#existing[@]} $t inputs (corpus + crash reproducers)" "replayed [0-9]+ inputs" \
    "$WORK/${t}_replay" "${existing[@]}"
done
# The control requests (Sources/KeyshareAgent/ControlProtocol.swift, fuzzed as
# target control): their one decoder reads the agent's requests and the CLI's
# replies. Each corpus input and crash reproducer is a fake agent's reply to
# `keyshare agent status --json` (KEYSHARE_AGENT_SOCKET), so the release CLI
# decodes it: the fields (exit 0) or one line (exit 1: the reply's error, or
# "malformed" for what does not decode), never a trap. (The
# agent's test bundle would link the agent, whose constructors change every
# unit test's process: hence the CLI, not a unit test.)
files=("$ROOT"/Tests/fuzz/corpus/control/* "$ROOT"/Tests/fuzz/crashes/control-*)
existing=(); for f in "${files[@]}"; do [ -f "$f" ] && existing+=("$f"); done
[ ${#existing[@]} -ge 10 ] && ok "the control corpus is there (${#existing[@]} inputs)" \
  || bad "the control corpus is there" "${#existing[@]} inputs"
mkdir -m 0700 "$WORK/fake"
cat >"$WORK/fake_agent.py" <<'PY'
# A fake agent: for each file named, accepts one connection, reads its request
# frame, answers with the file's bytes as the reply frame. Every wait bounded.
import socket, struct, sys
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(sys.argv[1])
srv.listen(4)
srv.settimeout(30)
def exact(c, n):
    b = b""
    while len(b) < n:
        got = c.recv(n - len(b))
        if not got:
            raise EOFError
        b += got
    return b
for path in sys.argv[2:]:
    c, _ = srv.accept()
    c.settimeout(30)
    exact(c, struct.unpack("<I", exact(c, 4))[0])
    data = open(path, "rb").read()
    c.sendall(struct.pack("<I", len(data)) + data)
    c.close()
PY
python3 "$WORK/fake_agent.py" "$WORK/fake/agent.sock" "${existing[@]}" & FAKE=$!
for _ in $(seq 100); do [ -S "$WORK/fake/agent.sock" ] && break; sleep 0.05; done
decoded=0 malformed=0 broken=()
for f in "${existing[@]}"; do
  KEYSHARE_AGENT_SOCKET="$WORK/fake/agent.sock" KEYSHARE_AGENT_NO_START=1 timeout 60 "$KS" agent status --json \
    >"$WORK/status.out" 2>&1
  rc=$?
  if [ $rc = 0 ]; then decoded=$((decoded + 1))
  elif [ $rc = 1 ] && [ "$(wc -l <"$WORK/status.out")" = 1 ]; then
    grep -q "sent a malformed answer" "$WORK/status.out" && malformed=$((malformed + 1)) || decoded=$((decoded + 1))
  else broken+=("$(basename "$f") (exit $rc): $(head -3 "$WORK/status.out")"); fi
done
wait "$FAKE"; fake_rc=$?; FAKE=
[ ${#broken[@]} -eq 0 ] && [ "$fake_rc" = 0 ] && [ "$decoded" -gt 0 ] && [ "$malformed" -gt 0 ] \
  && ok "replay ${#existing[@]} control inputs through the CLI's decoder ($decoded decoded, $malformed malformed)" \
  || bad "replay ${#existing[@]} control inputs through the CLI's decoder" \
    "fake agent exit $fake_rc, $decoded decoded, $malformed malformed; ${broken[*]:0:3}"
finish
