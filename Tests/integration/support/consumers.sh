# Shared setup for the real-consumer workflow scripts (57-59): a private network
# namespace, servers started on a free loopback port and stopped by PID, a small
# CA whose client identities live in a throwaway keyshare token, and expected
# failures that are reported but never counted as passes.
# Source it after lib.sh. The scripts that use it must run as root (make test does).

XFAIL=0
PIDS=()
WORK=

# Re-run the calling script under strace (execve only, through seccomp-bpf so
# it stays cheap) and inside a private network namespace with only "lo" up: no
# server it starts can be reached from outside or collide with the host's
# ports, and check_no_secret_argv can prove at the end that no PIN or password
# reached any command line. Without namespaces (not root) the servers use the
# host's 127.0.0.1 (they bind 127.0.0.1 in both cases; IN_NETNS tells which).
# KEYSHARE_IT_NO_NETNS=1 forces that fallback, KEYSHARE_IT_NO_TRACE=1 skips strace.
IN_NETNS=
ARGV_TRACE=${KEYSHARE_IT_TRACE:-}
enter_sandbox() {
  if [ -z "${KEYSHARE_IT_SANDBOX:-}" ]; then
    export KEYSHARE_IT_SANDBOX=1
    local pre=() trace=
    if [ -z "${KEYSHARE_IT_NO_TRACE:-}" ] && command -v strace >/dev/null; then
      trace=$(mktemp /tmp/keyshare-argv.XXXXXX)
      pre=(strace -f --seccomp-bpf -qq -e trace=execve -s 4096 -o "$trace" env KEYSHARE_IT_TRACE="$trace")
    fi
    if [ -z "${KEYSHARE_IT_NO_NETNS:-}" ] && unshare -n true 2>/dev/null; then
      # The re-run sources lib.sh again (its own runtime directory): this one goes now.
      ks_it_isolation_exit
      exec "${pre[@]}" unshare -n -- env KEYSHARE_IT_NETNS=1 bash "$0" "$@"
    elif [ -n "$trace" ]; then
      ks_it_isolation_exit
      exec "${pre[@]}" bash "$0" "$@"
    fi
  fi
  if [ -n "${KEYSHARE_IT_NETNS:-}" ]; then
    ip link set lo up && IN_NETNS=1
  fi
}

# check_no_secret_argv VAR...: no value of these variables appears in any
# command line the script (and everything it started) ran.
check_no_secret_argv() {
  if [ -z "$ARGV_TRACE" ]; then echo "note - not traced: the no-secret-on-argv check is not run"; return; fi
  local execs name leaks=()
  execs=$(grep -c 'execve(' "$ARGV_TRACE" || true)
  # The patterns reach grep on a pipe (printf is a builtin): this check's own
  # greps, traced too, carry no secret on their argv.
  for name in "$@"; do
    [ -n "${!name:-}" ] && grep -qFf <(printf '%s\n' "${!name}") "$ARGV_TRACE" && leaks+=("$name")
  done
  if [ "$execs" -ge 20 ] && [ ${#leaks[@]} -eq 0 ]; then
    ok "no PIN or password on any of the $execs command lines (strace execve)"
  else
    bad "no PIN or password on any command line" "$execs execve calls traced; on argv: ${leaks[*]:-none}$(
      for name in "${leaks[@]}"; do echo; grep -Ff <(printf '%s\n' "${!name}") "$ARGV_TRACE" | head -2 | sed -f <(printf 's/%s/<%s>/g\n' "${!name}" "$name"); done)"
  fi
}

# xfail NAME WHY: a known defect, printed on its own "xfail" line; not a pass.
xfail() { XFAIL=$((XFAIL + 1)); echo "xfail - $1: $2"; }

# check_xfail NAME WHY ERROR-REGEX CMD...: CMD is expected to fail with output
# matching ERROR-REGEX (the exact CK_RV or message). Fails the script when CMD
# now passes (the defect is fixed: turn this into a check) or fails differently.
check_xfail() {
  local name=$1 why=$2 re=$3; shift 3
  local out
  if out=$("$@" 2>&1); then
    bad "$name (expected failure now passes: make it a check)" "$out"
  elif grep -Eq -- "$re" <<<"$out"; then
    xfail "$name" "$why"
  else
    bad "$name (fails differently from the known failure /$re/)" "$out"
  fi
}

# need NAME PROGRAM...: the programs a section uses are installed (make deps);
# a missing one is a failure, not a silent skip.
need() {
  local name=$1 p missing=(); shift
  for p in "$@"; do command -v "$p" >/dev/null 2>&1 || [ -e "$p" ] || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  bad "$name: programs installed" "missing: ${missing[*]} (run make deps)"; return 1
}

finish_consumers() {
  echo "$PASS passed, $FAIL failed, $XFAIL xfail"
  [ "$FAIL" -eq 0 ]
}

# spawn LOG CMD...: start CMD in the background (bounded to 90 s by timeout),
# output to LOG; its PID is recorded for stop/cleanup. Sets SPAWNED.
SPAWNED=
spawn() {
  local log=$1; shift
  timeout 90 "$@" >"$log" 2>&1 &
  SPAWNED=$!
  PIDS+=("$SPAWNED")
}

# stop PID...: TERM, up to 3 s to exit, then KILL (timeout forwards the signal to
# its command; the KILL goes to timeout's own process group, which is the command's).
stop() {
  local pid i
  for pid in "$@"; do
    [ -n "$pid" ] || continue
    kill "$pid" 2>/dev/null || continue
    for i in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}

cleanup_consumers() {
  stop "${PIDS[@]}"
  [ -n "$WORK" ] && rm -rf "$WORK"
  [ -n "$ARGV_TRACE" ] && rm -f "$ARGV_TRACE"
  [ -n "${KEYSHARE_HOME:-}" ] && rm -rf "$KEYSHARE_HOME"
}

# listening PORT: something listens on 127.0.0.1:PORT (TCP) or is bound to it (UDP).
listening() { [ -n "$(ss -Hlntu "sport = :$1" 2>/dev/null)" ]; }

# serve LOG CMD...: start a server whose arguments contain @PORT@, on a random
# free high port; retries with another port when the bind fails. Waits (at most
# 10 s) until the port is bound. Sets PORT and SERVER_PID; returns 1 on failure
# (the log is kept in LOG).
PORT=
SERVER_PID=
serve() {
  local log=$1 try a i; shift
  for try in 1 2 3 4 5; do
    PORT=$((20000 + RANDOM % 40000))
    listening "$PORT" && continue
    local args=()
    for a in "$@"; do args+=("${a//@PORT@/$PORT}"); done
    spawn "$log" "${args[@]}"
    SERVER_PID=$SPAWNED
    for i in $(seq 100); do
      listening "$PORT" && return 0
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.1
    done
    stop "$SERVER_PID"
    grep -qiE 'in use|EADDRINUSE|bind' "$log" || return 1
  done
  return 1
}

# wait_log FILE REGEX [SECONDS]: FILE gets a line matching REGEX (servers log
# after the client has already exited).
wait_log() {
  local i
  for i in $(seq $((${3:-5} * 10))); do grep -Eq -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}

# with_pin CMD...: CMD with the PIN readable on fd 3 (libp11's
# pin-source=file:/dev/fd/3), never on argv or in a file.
with_pin() { "$@" 3< <(printf '%s' "$PIN"); }

# make_pki_and_token: a private 0700 work dir ($WORK), a throwaway store, a
# P-256 CA, a server identity (files: server.pem/server.key, SAN 127.0.0.1 and
# localhost) and two client identities, client-rsa (RSA-2048) and client-ec
# (P-256), imported as PKCS #12 into token T. EKUs: clientAuth and codeSigning.
# Sets PIN, SOPIN, the files $WORK/ca.pem, $WORK/client-{rsa,ec}.pem and the
# URIs RSA_KEY, RSA_CERT, RSA_PUB, EC_KEY, EC_CERT, EC_PUB, and the hex CKA_IDs
# RSA_ID, EC_ID.
make_pki_and_token() {
  new_home
  WORK=$(mktemp -d /tmp/keyshare-consumers.XXXXXX)  # 0700
  # Distinctive values, so that check_no_secret_argv cannot match anything else.
  export PIN=pin-$RANDOM$RANDOM SOPIN=so-$RANDOM$RANDOM P12PASS=p12-$RANDOM$RANDOM
  local w=$WORK o=(-days 400 -sha256)
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$w/ca.key" -out "$w/ca.pem" \
    -subj /CN=keyshare-test-ca "${o[@]}" -addext basicConstraints=critical,CA:true \
    -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
  printf 'basicConstraints=CA:false\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n' > "$w/server.ext"
  printf 'basicConstraints=CA:false\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth,codeSigning\n' > "$w/client.ext"
  local name alg
  for name in server client-rsa client-ec; do
    case $name in client-rsa) alg=(-newkey rsa:2048) ;; *) alg=(-newkey ec -pkeyopt ec_paramgen_curve:P-256) ;; esac
    openssl req -new "${alg[@]}" -nodes -keyout "$w/$name.key" -out "$w/$name.csr" -subj "/CN=$name" 2>/dev/null
    openssl x509 -req -in "$w/$name.csr" -CA "$w/ca.pem" -CAkey "$w/ca.key" -CAcreateserial "${o[@]}" \
      -extfile "$w/${name%%-*}.ext" -out "$w/$name.pem" 2>/dev/null
  done
  "$KEYSHARE" token create --label T --pin-source env:PIN --so-pin-source env:SOPIN >/dev/null
  for name in client-rsa client-ec; do
    openssl pkcs12 -export -inkey "$w/$name.key" -in "$w/$name.pem" -name "$name" -passout env:P12PASS -out "$w/$name.p12"
    "$KEYSHARE" import "$w/$name.p12" --token T --pin-source env:PIN --password-source env:P12PASS >/dev/null
    rm -f "$w/$name.key"  # the key now exists only in the token
  done
  "$KEYSHARE" list --token T --private --pin-source env:PIN --json > "$w/list.json"
  RSA_KEY=$(item_uri client-rsa private-key); RSA_CERT=$(item_uri client-rsa certificate); RSA_PUB=$(item_uri client-rsa public-key)
  EC_KEY=$(item_uri client-ec private-key); EC_CERT=$(item_uri client-ec certificate); EC_PUB=$(item_uri client-ec public-key)
  RSA_ID=$(item_id client-rsa); EC_ID=$(item_id client-ec)
  if [[ $RSA_KEY == pkcs11:* && $EC_KEY == pkcs11:* && $RSA_CERT == pkcs11:* && $EC_CERT == pkcs11:* ]]; then
    ok "token T holds client-rsa and client-ec (keys, certificates, URIs from keyshare list --json)"
  else
    bad "token T holds client-rsa and client-ec" "$(head -c 800 "$w/list.json")"; return 1
  fi
}

# item_uri CN CLASS: the URI of the CLASS item sharing CKA_ID with the certificate of subject CN=CN.
item_uri() {
  python3 - "$WORK/list.json" "$1" "$2" <<'EOF'
import json, sys
items = json.load(open(sys.argv[1]))
cid = next(i["id"] for i in items if i["itemClass"] == "certificate" and i.get("subject") == "CN=" + sys.argv[2])
print(next(i["uri"] for i in items if i["itemClass"] == sys.argv[3] and i["id"] == cid))
EOF
}
item_id() {
  python3 - "$WORK/list.json" "$1" <<'EOF'
import json, sys
items = json.load(open(sys.argv[1]))
print(next(i["id"] for i in items if i["itemClass"] == "certificate" and i.get("subject") == "CN=" + sys.argv[2]).lower())
EOF
}
