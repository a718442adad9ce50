#!/usr/bin/env bash
# The agent and its clients in other namespaces (issue 26, defects 7 and 8;
# docs/agent.md "Policy" and "Namespaces"). Runs as root; uid 1000 plays an
# ordinary user where privilege matters. In sections:
# - mount namespace: a program is what it is, not the path it shows. As uid
#   1000, whose policy allows only /usr/bin/pkcs11-tool, `unshare -Urm` binds a
#   refused program over /usr/bin/pkcs11-tool and execs it: refused, and the
#   log names the program's file (its inode), not just the path it shows.
# - network namespaces: a client under `unshare -n`, `ip netns exec`, bwrap
#   --unshare-net (the socket bound in), and uid 1000's client under
#   `unshare -Urn`, sign through the agent of the host namespace (the caller
#   check asks sock_diag in the client's namespace); a TLS server in a private
#   namespace completes a handshake with its key through the agent; an agent
#   first started by a client in a private namespace serves host clients; a
#   non-root agent that cannot enter a root-made namespace still serves its
#   client and logs that the exec race was not ruled out.
# Every process is stopped by its PID; the namespace made here is deleted.
set -u
KS=${1:?keyshare binary}
MODULE=$(realpath "${2:?module path}")
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { bad "runs as root (make test does): namespaces, ip netns, uid 1000"; finish; exit 1; }
agent_work namespaces
chmod 0755 "$WORK"
export KEYSHARE_AGENT_IDLE_TIMEOUT=60 KEYSHARE_AGENT_PROGRAM=$KS
unset KEYSHARE_IN_PROCESS
export PIN=1234-user SOPIN=9876-so P12PASS=keyshare-test
NETNS=ks-it-$$
U=1000
UDIR=$WORK/u$U
RUN2=$WORK/run2
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  stop_agent "$XDG_RUNTIME_DIR"  # under $WORK: stopped before $WORK goes
  stop_agent "$UDIR/run"
  stop_agent "$RUN2"
  ip netns del "$NETNS" 2>/dev/null
  rm -rf "$WORK" "$KEYSHARE_HOME"
}
trap cleanup EXIT
LOG=$XDG_RUNTIME_DIR/keyshare/agent.log
ks() { "$KS" "$@"; }
logged() { grep -c -- "$1" "${2:-$LOG}" 2>/dev/null || true; }
printf 'signed across namespaces\n' >"$WORK/data"
chmod 0644 "$WORK/data"

# p11sign LABEL [PREFIX...]: pkcs11-tool (run under PREFIX) logs in and signs $WORK/data with
# key k of token t; openssl verifies the signature with $SIGDIR/k.pub. Output in $SIGDIR.
SIGDIR=$WORK/io
mkdir -m 0777 "$SIGDIR"
p11sign() {
  local name=$1 out; shift
  rm -f "$SIGDIR/sig"
  if out=$("$@" pkcs11-tool --module "$MODULE" --token-label t --login --pin env:PIN -s -m ECDSA-SHA256 --label k \
        -i "$WORK/data" -o "$SIGDIR/sig" --signature-format openssl 2>&1) &&
     openssl dgst -sha256 -verify "$SIGDIR/k.pub" -signature "$SIGDIR/sig" "$WORK/data" >/dev/null 2>&1; then
    ok "$name"
  else
    bad "$name" "$out"$'\n'"$(tail -2 "$LOG" 2>/dev/null)"
  fi
}

check "token t" ks token create --label t --pin-source env:PIN --so-pin-source env:SOPIN
check "EC key k" ks key generate --type ec --label k --tag k --pin-source env:PIN --token t
ks key public --tag k >"$SIGDIR/k.pub"
# The agent starts for a host client (the control): the sections below are its clients in other namespaces.
p11sign "control: a host client signs through the agent"

# ---- mount namespace: a program is what it is (defect 7) ---------------------------------------
# uid 1000's own store and agent; a policy that allows only /usr/bin/pkcs11-tool.
mkdir -m 0700 "$UDIR" "$UDIR/run" "$UDIR/home"
chown -R $U:$U "$UDIR"
cp "$(command -v pkcs11-tool)" "$UDIR/refused-tool"; printf refused >>"$UDIR/refused-tool"
chown $U:$U "$UDIR/refused-tool"
# as_user CMD...: CMD as uid 1000 with its own home, store and runtime directory (the PINs reach it
# in the exported environment, never on a command line).
AS_USER=(setpriv --reuid $U --regid $U --clear-groups env HOME="$UDIR/home" XDG_RUNTIME_DIR="$UDIR/run"
  KEYSHARE_HOME="$UDIR/home")
as_user() { "${AS_USER[@]}" "$@"; }
# One agent per store (docs/agent.md "Which agent, which store"): uid 1000's store's agent directory.
ULOG=$(as_user "$KS" agent socket --dir)/agent.log
check "uid $U: token t" as_user "$KS" token create --label t --pin-source env:PIN --so-pin-source env:SOPIN
check "uid $U: EC key k" as_user "$KS" key generate --type ec --label k --tag k --pin-source env:PIN --token t
as_user "$KS" key public --tag k >"$UDIR/k.pub"
check_out "uid $U: allow only /usr/bin/pkcs11-tool" "allow /usr/bin/pkcs11-tool every token \(sha256 " \
  as_user "$KS" policy allow --exe /usr/bin/pkcs11-tool
check "uid $U: unlock the token for pkcs11-tool and the refused program (signing then needs no PIN)" \
  as_user "$KS" unlock --for 5m --program /usr/bin/pkcs11-tool --program "$UDIR/refused-tool" --pin-source env:PIN
# usign [PREFIX...]: uid 1000 signs under PREFIX (run as uid 1000, after ROOT_PREFIX run as root) without
# logging in (the token is unlocked); openssl verifies with its k.pub. The output is in USIGN_OUT.
ROOT_PREFIX=()
usign() {
  local out
  rm -f "$SIGDIR/usig"
  out=$("${ROOT_PREFIX[@]}" "${AS_USER[@]}" "$@" pkcs11-tool --module "$MODULE" --token-label t -s -m ECDSA-SHA256 --label k \
    -i "$WORK/data" -o "$SIGDIR/usig" --signature-format openssl 2>&1) &&
    openssl dgst -sha256 -verify "$UDIR/k.pub" -signature "$SIGDIR/usig" "$WORK/data" >/dev/null 2>&1
  local rc=$?
  USIGN_OUT=$out
  return $rc
}
usign && ok "uid $U: control: /usr/bin/pkcs11-tool signs from the unlocked token" || bad "uid $U: control: pkcs11-tool signs" "$USIGN_OUT"
out=$(as_user "$UDIR/refused-tool" --module "$MODULE" -L 2>&1)
grep -q CKR_TOKEN_NOT_PRESENT <<<"$out" && ok "uid $U: control: the other program is refused (not in the allow rule)" \
  || bad "uid $U: control: other program refused" "$out"
INODE=$(stat -c %i "$UDIR/refused-tool")
# The attack: no privilege, a mount namespace of its own, the refused program where the allowed one was.
NAME="uid $U: a refused program bind-mounted over /usr/bin/pkcs11-tool (unshare -Urm) is refused"
if usign unshare -Urm sh -c "mount --bind '$UDIR/refused-tool' /usr/bin/pkcs11-tool && exec \"\$0\" \"\$@\""; then
  bad "$NAME" "it signed: $(tail -2 "$ULOG")"
elif grep -q CKR_TOKEN_NOT_PRESENT <<<"$USIGN_OUT" &&
     [ "$(logged "refused pid [0-9]*:\? exe /usr/bin/pkcs11-tool (as the client names it; dev [0-9:]* ino $INODE, sha256 [0-9a-f]*…): not in an allow rule" "$ULOG")" -ge 1 ]; then
  ok "$NAME; the log names its file (ino $INODE)"
else
  bad "$NAME" "$USIGN_OUT"$'\n'"$(tail -2 "$ULOG")"
fi
# The same namespace with the real program in its place is the real program.
usign unshare -Urm sh -c "mount --bind /usr/bin/pkcs11-tool /usr/bin/pkcs11-tool && exec \"\$0\" \"\$@\"" \
  && ok "uid $U: control: pkcs11-tool itself in its own mount namespace signs" || bad "uid $U: pkcs11-tool in a mount namespace" "$USIGN_OUT"

# ---- network namespaces (defect 8) ----------------------------------------------------------------
p11sign "a client under unshare -n signs through the host's agent" unshare -n
check "ip netns add $NETNS" ip netns add "$NETNS"
p11sign "a client under ip netns exec signs through the host's agent" ip netns exec "$NETNS"
# bubblewrap as a flatpak-like sandbox: its own network namespace, /usr read-only, the agent's socket directory bound in.
BW=(bwrap --unshare-net --die-with-parent --ro-bind /usr /usr --symlink usr/lib /lib --symlink usr/lib64 /lib64
    --symlink usr/bin /bin --ro-bind /etc /etc --proc /proc --dev /dev --tmpfs /tmp --ro-bind "$MODULE" "$MODULE"
    --bind "$XDG_RUNTIME_DIR/keyshare" "$XDG_RUNTIME_DIR/keyshare" --ro-bind "$WORK/data" "$WORK/data"
    --bind "$SIGDIR" "$SIGDIR" --)
p11sign "a client in bwrap --unshare-net (the agent's socket bound in) signs through the host's agent" "${BW[@]}"
# uid 1000's agent (host namespace) and a client in a rootless namespace of its own.
usign unshare -Urn && ok "uid $U: a client under unshare -Urn signs through its agent (it enters its own user namespace to ask)" \
  || bad "uid $U: a client under unshare -Urn signs" "$USIGN_OUT"$'\n'"$(tail -2 "$ULOG")"
# A root-made namespace, which uid 1000's agent cannot enter: served, known by its credentials, one log line.
n0=$(logged "exec race not ruled out" "$ULOG")
ROOT_PREFIX=(ip netns exec "$NETNS")
usign && [ "$(logged "pid [0-9]* exe /usr/bin/pkcs11-tool (as the client names it.*): exec race not ruled out: its network namespace net:\[[0-9]*\] cannot be entered (Operation not permitted); known by SO_PEERCRED" "$ULOG")" -gt "$n0" ] \
  && ok "uid $U: a client in a root-made namespace its agent cannot enter is served, logged as not checked for the exec race" \
  || bad "uid $U: client in a root-made namespace" "$USIGN_OUT"$'\n'"$(tail -2 "$ULOG")"
ROOT_PREFIX=()

# The children that made netlink sockets in those namespaces were reaped (none left, no zombie).
kids=""
A1=$(cat "$(agent_dir)/agent.pid" 2>/dev/null) AU=$(cat "$(dirname "$ULOG")/agent.pid" 2>/dev/null)
[ -n "$A1" ] && [ -n "$AU" ] || bad "both agents' pid files are there" "'$A1' '$AU'"
for a in "$A1" "$AU"; do
  kids+=$(ps --ppid "$a" -o pid=,stat=,comm= 2>/dev/null)
done
[ -z "$kids" ] && ok "both agents left no child behind (each namespace helper was reaped)" || bad "agents' children reaped" "$kids"

# ---- a TLS server in a private network namespace, its key through the agent -----------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/server.key" -out "$WORK/server.pem" \
  -subj /CN=localhost -days 30 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
openssl pkcs12 -export -inkey "$WORK/server.key" -in "$WORK/server.pem" -name server -passout env:P12PASS -out "$WORK/server.p12"
check "import the server's key into token t" ks import "$WORK/server.p12" --token t --pin-source env:PIN --password-source env:P12PASS
rm -f "$WORK/server.key"
KEY_URI=$(ks list --token t --private --pin-source env:PIN --json | python3 -c '
import json, sys
items = json.load(sys.stdin)
cid = next(i["id"] for i in items if i["itemClass"] == "certificate" and i.get("subject") == "CN=localhost")
print(next(i["uri"] for i in items if i["itemClass"] == "private-key" and i["id"] == cid))')
PORT=$((20000 + RANDOM % 40000))
ip netns exec "$NETNS" ip link set lo up
ip netns exec "$NETNS" env PKCS11_MODULE_PATH="$MODULE" timeout 60 openssl s_server -accept "127.0.0.1:$PORT" \
  -cert "$WORK/server.pem" -engine pkcs11 -keyform engine -key "$KEY_URI;pin-source=file:/dev/fd/3" \
  -naccept 1 -www -tls1_3 3< <(pin_pipe PIN) >"$WORK/s_server.log" 2>&1 &
PIDS+=($!)
SERVER=$!
for _ in $(seq 100); do [ -n "$(ip netns exec "$NETNS" ss -Hlnt "sport = :$PORT")" ] && break; kill -0 $SERVER 2>/dev/null || break; sleep 0.1; done
out=$(printf 'GET / HTTP/1.0\r\n\r\n' | ip netns exec "$NETNS" timeout 20 openssl s_client -quiet -ign_eof \
  -connect "127.0.0.1:$PORT" -tls1_3 -CAfile "$WORK/server.pem" -verify_return_error 2>&1)
grep -q "^verify return:1" <<<"$out" && grep -q "Protocol  : TLSv1.3" <<<"$out" \
  && ok "a TLS server in a private network namespace (openssl s_server, its key through the agent) completes a handshake" \
  || bad "TLS server in a private namespace" "$(head -5 <<<"$out"; cat "$WORK/s_server.log")"
kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null

# ---- which namespace started the agent does not matter ----------------------------------------------
mkdir -m 0700 "$RUN2"
out=$(XDG_RUNTIME_DIR=$RUN2 unshare -n pkcs11-tool --module "$MODULE" -L 2>&1)
grep -q "token label *: t" <<<"$out" && ok "a client in a private network namespace starts an agent (its own socket directory)" \
  || bad "agent started from a private namespace" "$out"
A2=$(cat "$(XDG_RUNTIME_DIR=$RUN2 agent_dir)/agent.pid" 2>/dev/null)
[ -n "$A2" ] && [ "$(readlink "/proc/$A2/ns/net")" != "$(readlink /proc/self/ns/net)" ] \
  && ok "that agent runs in the private namespace" || bad "agent in the private namespace" "pid '$A2'"
LOG=$RUN2/keyshare/agent.log XDG_RUNTIME_DIR=$RUN2 p11sign "a host client signs through the agent a private-namespace client started"
finish
