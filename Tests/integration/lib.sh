# Shared helpers for the integration scripts: each check prints one line, and the
# script ends with "N passed, M failed" (the line CI reads).
PASS=0
FAIL=0
FAILED_NAMES=()

ok()   { PASS=$((PASS + 1)); echo "ok   - $1"; }
bad()  { FAIL=$((FAIL + 1)); FAILED_NAMES+=("$1"); echo "FAIL - $1"; [ -n "${2:-}" ] && echo "$2" | sed 's/^/       /' | head -20; return 0; }

# check NAME CMD...: passes when CMD exits 0.
check() {
  local name=$1; shift
  local out
  if out=$("$@" 2>&1); then ok "$name"; else bad "$name" "$out"; fi
}

# check_out NAME REGEX CMD...: passes when CMD exits 0 and its output matches REGEX.
check_out() {
  local name=$1 re=$2; shift 2
  local out
  if out=$("$@" 2>&1) && grep -Eq -- "$re" <<<"$out"; then ok "$name"; else bad "$name" "$out"; fi
}

# check_fail NAME REGEX CMD...: passes when CMD exits non-zero, prints exactly one
# line on stderr, and that line matches REGEX.
check_fail() {
  local name=$1 re=$2; shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null) && rc=0 || rc=$?
  local lines
  lines=$(printf '%s' "$err" | grep -c . || true)
  if [ "$rc" -ne 0 ] && [ "$lines" -eq 1 ] && grep -Eq -- "$re" <<<"$err"; then ok "$name"; else bad "$name" "exit $rc, stderr: $err"; fi
}

finish() {
  echo "$PASS passed, $FAIL failed"
  [ "$FAIL" -eq 0 ]
}

# A private store and a low KDF cost for speed (a documented setting, recorded
# with each wrap); real users get the default cost.
new_home() {
  export KEYSHARE_HOME
  KEYSHARE_HOME=$(mktemp -d /tmp/keyshare-it.XXXXXX)
  export KEYSHARE_KDF_LOG2N=10
}

# p12_label FILE [PASSWORD-VAR]: the label `keyshare import` gives the identity of a PKCS #12
# file: its friendlyName (the first bag's, the identity's certificate). Default variable: P12PASS.
p12_label() { openssl pkcs12 -in "$1" -nokeys -passin "env:${2:-P12PASS}" 2>/dev/null | sed -n 's/^ *friendlyName: //p' | head -1; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FIXTURES=$(cd "$HERE/../Fixtures/testdata" && pwd)

# softhsm_init_token MODULE LABEL SO_PIN_VAR USER_PIN_VAR: a SoftHSM2 token on
# the free slot, with both PINs read by pkcs11-tool from the named environment
# variables (`env:VAR`). Not softhsm2-util --init-token: it takes PINs only on
# its command line, which every local user reads in `ps`.
softhsm_init_token() {
  local module=$1 label=$2 so=$3 user=$4 slot
  slot=$(softhsm2-util --show-slots | awk '/^Slot [0-9]+/ {s = $2} /Initialized:[[:space:]]+no/ && s != "" {print s; exit}')
  [ -n "$slot" ] || { echo "softhsm_init_token: no free SoftHSM2 slot" >&2; return 1; }
  pkcs11-tool --module "$module" --slot "$slot" --init-token --label "$label" --so-pin "env:$so" >/dev/null &&
    pkcs11-tool --module "$module" --token-label "$label" --login --login-type so --so-pin "env:$so" \
      --init-pin --new-pin "env:$user" >/dev/null
}

# copyright_checks FILE KEYSHARE: the Debian copyright file as shipped (support/check_copyright.py),
# one ok/FAIL line per check; OpenSSL must be said to be linked statically when the engine next to
# KEYSHARE (libkeyshare-engine.so, what links it) needs no libcrypto, and the version named is the
# Makefile's OPENSSL_DEB_VERSION; ICU and ZIPFoundation are named exactly when the engine carries
# them (their module names survive stripping in Swift metadata).
copyright_checks() {
  local file=$1 bin version static="" linked="" line seen=0
  bin=$(dirname "$2")/libkeyshare-engine.so
  version=$(sed -n 's/^OPENSSL_DEB_VERSION *:= *//p' "$HERE/../../Makefile")
  readelf -d "$bin" | grep -q 'NEEDED.*libcrypto' || static=--static-openssl
  grep -qa FoundationInternationalization "$bin" && linked="$linked --icu"
  grep -qa ZIPFoundation "$bin" && linked="$linked --zipfoundation"
  while IFS= read -r line; do
    case $line in
      "ok   - "*) ok "copyright: ${line#ok   - }"; seen=$((seen + 1)) ;;
      "FAIL - "*) bad "copyright: ${line#FAIL - }"; seen=$((seen + 1)) ;;
      *) bad "copyright: the checker says" "$line" ;;
    esac
  done < <(python3 "$HERE/support/check_copyright.py" "$file" "$version" $static $linked 2>&1 || true)
  [ "$seen" -gt 0 ] || bad "copyright: the checker ran ($file)"
}

# pin_pipe VAR: the value of VAR on a pipe, for programs that read a PIN from a
# file (libp11's pin-source=file:..., NSS's -f): use as `3< <(pin_pipe PIN)` and
# name /dev/fd/3. The value is never in an argv nor on disk.
pin_pipe() { printf '%s' "${!1}"; }

# pin_credential DIR VAR: DIR as systemd lays out $CREDENTIALS_DIRECTORY (0500),
# holding the credential "pin" (0400) with the value of the variable VAR, for
# `keyshare serve --pin-source credential:pin` (serve refuses file: and env:).
pin_credential() { mkdir -p "$1" && printf '%s' "${!2}" >"$1/pin" && chmod 0400 "$1/pin" && chmod 0500 "$1"; }

# ---- per-script agent isolation (docs/agent.md, "Tests") --------------------
# Each script gets its own XDG_RUNTIME_DIR (a 0700 temp dir), so the module's
# agent (agent mode) is the script's own: scripts never share an agent, and an
# agent never outlives its script. The agent's program is the binary under
# test (the script's $1), never an installed keyshare. At exit the agent that
# the script's runtime directory names (DIR/keyshare/agent.pid) is stopped by
# that PID, after checking the PID is a `keyshare agent` (a stale file must
# not make us signal an unrelated process); then the directory is removed.
# The agent's prompt (docs/agent.md, "The agent's prompt") is off in every
# script: a pinentry on the developer's terminal or display must not answer, or
# wait for, a test's C_Login. 86-agent-prompt.sh names its scripted pinentry.
export KEYSHARE_PINENTRY=none
KS_IT_RUNTIME_DIR=$(mktemp -d /tmp/keyshare-run.XXXXXX)
chmod 0700 "$KS_IT_RUNTIME_DIR"
export XDG_RUNTIME_DIR=$KS_IT_RUNTIME_DIR
if [ -n "${1:-}" ] && [ -x "$1" ] && [ -z "${KEYSHARE_AGENT_PROGRAM:-}" ]; then
  KEYSHARE_AGENT_PROGRAM=$(realpath "$1"); export KEYSHARE_AGENT_PROGRAM
fi

# agent_dir: the directory of the agent that serves this environment's store
# (its agent.pid, agent.log, agent.sock): one agent per store (docs/agent.md,
# "Which agent, which store"), so it depends on KEYSHARE_HOME.
agent_dir() { "${KEYSHARE_AGENT_PROGRAM:-keyshare}" agent socket --dir 2>/dev/null || echo "${XDG_RUNTIME_DIR:-/tmp/keyshare-agent-$(id -u)}/keyshare"; }  # (before 0.4: one directory)

# stop_agent DIR: stops every agent under DIR/keyshare (one per store: DIR/keyshare
# and DIR/keyshare/s.*), by its PID file, and waits for each.
stop_agent() {
  local dir=${1:-$XDG_RUNTIME_DIR} pidfile pid i
  for pidfile in "$dir"/keyshare/agent.pid "$dir"/keyshare/s.*/agent.pid; do
    pid=$(cat "$pidfile" 2>/dev/null) || continue
    case $pid in ''|*[!0-9]*) continue ;; esac
    { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -Eq '(^|/)keyshare agent( |$)' || continue
    kill "$pid" 2>/dev/null || continue
    for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
  done
  return 0
}

ks_it_isolation_exit() {
  stop_agent "$KS_IT_RUNTIME_DIR"
  [ "${XDG_RUNTIME_DIR:-}" = "$KS_IT_RUNTIME_DIR" ] || stop_agent "$XDG_RUNTIME_DIR"
  rm -rf "$KS_IT_RUNTIME_DIR"
}

# The scripts set their own EXIT trap after sourcing this file: `trap CMD EXIT`
# is wrapped so the agents under the runtime directory are stopped first (a
# script's CMD may remove the directory that holds their pid files), then the
# script's CMD runs, then the isolation's exit (other forms of trap pass
# through unchanged).
trap() {
  if [ "$#" -eq 2 ] && [ "$2" = EXIT ]; then
    builtin trap "stop_agent \"\${XDG_RUNTIME_DIR:-\$KS_IT_RUNTIME_DIR}\"
$1
ks_it_isolation_exit" EXIT
  else
    builtin trap "$@"
  fi
}
builtin trap ks_it_isolation_exit EXIT

# ec_pubkey_der OUT PKCS11-TOOL-ARGS...: the EC public key that `pkcs11-tool ARGS -O --type
# pubkey` lists first, as a DER SubjectPublicKeyInfo in OUT, built from its CKA_EC_PARAMS and
# CKA_EC_POINT. Not `pkcs11-tool --read-object --type pubkey`: OpenSC 0.23's read_object frees
# the OSSL_PARAMs of EVP_PKEY_export and then hands them to EVP_PKEY_fromdata (valgrind: an
# invalid read inside a freed 256-byte block, all in pkcs11-tool and libcrypto), so it fails
# with "cannot create EVP_PKEY" whenever that block was reused, with any module (OpenSC issue
# 3200, fixed after 0.23). Non-zero when no EC key was listed.
ec_pubkey_der() {
  local out=$1 listing params point
  shift
  listing=$("$@" -O --type pubkey 2>/dev/null) || return 1
  params=$(awk '/EC_PARAMS:/ {print $2; exit}' <<<"$listing")
  point=$(awk '/EC_POINT:/ {print $2; exit}' <<<"$listing")
  [ -n "$params" ] && [ -n "$point" ] || return 1
  # CKA_EC_POINT is a DER OCTET STRING: drop its tag and length (short or long form).
  case ${point:2:2} in 81) point=${point:6} ;; 82) point=${point:8} ;; *) point=${point:4} ;; esac
  der_len() { local n=$(($1 / 2)); if [ "$n" -lt 128 ]; then printf '%02x' "$n"; elif [ "$n" -lt 256 ]; then printf '81%02x' "$n"; else printf '82%04x' "$n"; fi; }
  local alg="06072a8648ce3d0201$params" bits="00$point"
  alg="30$(der_len ${#alg})$alg"
  bits="03$(der_len ${#bits})$bits"
  local body="$alg$bits"
  printf "$(sed 's/../\\x&/g' <<<"30$(der_len ${#body})$body")" >"$out"
}

# agent_work NAME: what every agent script starts with: its own store (new_home), ROOT, a work
# directory /tmp/keyshare-NAME.XXXXXX and a runtime directory $WORK/run (0700) as
# XDG_RUNTIME_DIR, so the agent it starts has a socket of its own and no other run's agent
# answers it.
agent_work() {
  new_home
  ROOT=$(cd "$HERE/../.." && pwd)
  WORK=$(mktemp -d "/tmp/keyshare-$1.XXXXXX")
  export XDG_RUNTIME_DIR=$WORK/run
  mkdir -m 0700 "$XDG_RUNTIME_DIR"
}

# copy_images DIR: the module, the engine it loads in in-process mode (and with no store), the
# launcher and, with the bundled OpenSSL, its legacy provider, copied into DIR and readable by
# all: for a user who cannot read the build directory, or a namespace that hides it. The module
# finds the engine next to itself and so does the launcher (docs/architecture.md, "Images").
copy_images() {
  local dir=$1 src
  src=$(dirname "$MODULE")
  cp "$MODULE" "$dir/libkeyshare-pkcs11.so" && cp "$src/libkeyshare-engine.so" "$dir/" &&
    install -m 0755 "$src/keyshare" "$dir/keyshare" || return 1
  [ ! -d "$src/keyshare-ossl-modules" ] || cp -r "$src/keyshare-ossl-modules" "$dir/" || return 1
  chmod -R a+rX "$dir/libkeyshare-pkcs11.so" "$dir/libkeyshare-engine.so" "$dir/keyshare" \
    $([ -d "$dir/keyshare-ossl-modules" ] && echo "$dir/keyshare-ossl-modules")
}

# c_host NAME WHAT [CC-ARGS...] [-- HOST-ARGS...]: compiles Tests/integration/c/NAME.c (with CC-ARGS
# and -ldl), runs it as `NAME MODULE HOST-ARGS...`, passes its check lines through and adds its
# closing "N passed, M failed" to the tally. A host that does not compile, or does not reach that
# line, is one failure ("WHAT compiles", "WHAT ran to its end"). Needs ROOT, WORK and MODULE.
c_host() {
  local name=$1 what=$2 cc_args=() out n_pass n_fail
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do cc_args+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  if ! cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$WORK/$name" "$ROOT/Tests/integration/c/$name.c" "${cc_args[@]}" -ldl; then
    bad "$what compiles"
    return 0
  fi
  out=$("$WORK/$name" "$MODULE" "$@" 2>&1) || true
  echo "$out" | grep -E '^(ok|FAIL|  )' || true
  n_pass=$(echo "$out" | tail -1 | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p')
  n_fail=$(echo "$out" | tail -1 | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p')
  if [ -z "$n_pass" ]; then bad "$what ran to its end" "$(echo "$out" | tail -5)"; else
    PASS=$((PASS + n_pass)); FAIL=$((FAIL + n_fail)); fi
}
