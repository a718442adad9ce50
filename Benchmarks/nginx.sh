#!/usr/bin/env bash
# A TLS server's view of keyshare (issue 30): nginx (Debian package, 2 worker
# processes) on 127.0.0.1 with its server key either in a file or in a keyshare
# token through the libp11 engine (`ssl_certificate_key engine:pkcs11:URI`;
# pkcs11-provider is not packaged on Debian 12), for ECDSA P-256 and RSA-2048.
# Two `openssl s_time -new` clients (one per worker) make full handshakes
# (TLS 1.3, no session resumption: tickets and the cache are off) for a fixed
# time; the row is the sum of their connections per second, median of
# BENCH_NGINX_REPS runs, file and token runs interleaved.
# Usage: Benchmarks/nginx.sh KEYSHARE MODULE. BENCH_SMOKE=1: one short run each
# (asserts nothing about speed). BENCH_NGINX_TIME: seconds per run (default 4).
# The PIN goes to the engine through pin-source=file: (0600, in the run's 0700
# directory), never a command line; every process started here is stopped by
# its PID (trap).
set -euo pipefail
KEYSHARE=$(readlink -f "${1:?keyshare binary}")
MODULE=$(readlink -f "${2:?module path}")
NGINX=${NGINX:-/usr/sbin/nginx}
ENGINE=/usr/lib/x86_64-linux-gnu/engines-3/pkcs11.so
if [ ! -x "$NGINX" ] || [ ! -e "$ENGINE" ]; then
  echo "nginx.sh: needs nginx and libengine-pkcs11-openssl (apt-get install nginx libengine-pkcs11-openssl): TLS rows skipped"
  exit 0
fi
SMOKE=${BENCH_SMOKE:-0}
SECS=${BENCH_NGINX_TIME:-4}; REPS=${BENCH_NGINX_REPS:-3}
[ "$SMOKE" != 0 ] && { SECS=1; REPS=1; }

W=$(mktemp -d "${BENCH_SCRATCH_PARENT:-/tmp}/nginxbench.XXXXXX")
export XDG_RUNTIME_DIR=$W/run KEYSHARE_HOME=$W/store KEYSHARE_AGENT_PROGRAM=$KEYSHARE KEYSHARE_AGENT_IDLE_TIMEOUT=60
mkdir -m 0700 "$XDG_RUNTIME_DIR"
unset KEYSHARE_IN_PROCESS
NGINX_PID=; CLIENTS=()
agent_dir() { "$KEYSHARE" agent socket --dir 2>/dev/null || echo "$XDG_RUNTIME_DIR/keyshare"; }
stop_all() {
  local p
  for p in "${CLIENTS[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "$NGINX_PID" ]; then kill "$NGINX_PID" 2>/dev/null || true; wait "$NGINX_PID" 2>/dev/null || true; fi
  p=$(cat "$(agent_dir)/agent.pid" 2>/dev/null) || true
  if [ -n "$p" ] && tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q " agent"; then kill "$p"; fi
}
trap 'stop_all; rm -rf "$W"' EXIT

export PIN=nginx-$RANDOM$RANDOM SOPIN=so-$RANDOM$RANDOM P12PASS=p12-$RANDOM$RANDOM
( umask 077; printf '%s' "$PIN" > "$W/pin" )
"$KEYSHARE" token create --label nginx --pin-source env:PIN --so-pin-source env:SOPIN >/dev/null 2>&1
for k in ec rsa; do
  case $k in rsa) alg=(-newkey rsa:2048) ;; *) alg=(-newkey ec -pkeyopt ec_paramgen_curve:P-256) ;; esac
  openssl req -x509 "${alg[@]}" -nodes -keyout "$W/$k.key" -out "$W/$k.pem" -subj "/CN=bench-$k" -days 30 \
    -addext subjectAltName=IP:127.0.0.1 2>/dev/null
  openssl pkcs12 -export -inkey "$W/$k.key" -in "$W/$k.pem" -name "bench-$k" -passout env:P12PASS -out "$W/$k.p12"
  "$KEYSHARE" import "$W/$k.p12" --token nginx --pin-source env:PIN --password-source env:P12PASS >/dev/null
done
"$KEYSHARE" list --token nginx --private --pin-source env:PIN --json > "$W/list.json"
uri() {  # the private key's URI of identity CN=$1
  python3 - "$W/list.json" "$1" <<'EOF'
import json, sys
items = json.load(open(sys.argv[1]))
cid = next(i["id"] for i in items if i["itemClass"] == "certificate" and i.get("subject") == "CN=" + sys.argv[2])
print(next(i["uri"] for i in items if i["itemClass"] == "private-key" and i["id"] == cid))
EOF
}

# nginx loads the key with ENGINE_load_private_key and never initialises the
# engine itself: an OpenSSL configuration does (init = 1), with the module's path.
cat > "$W/openssl.cnf" <<EOF
openssl_conf = openssl_init
[openssl_init]
engines = engine_section
[engine_section]
pkcs11 = pkcs11_section
[pkcs11_section]
engine_id = pkcs11
dynamic_path = $ENGINE
MODULE_PATH = $MODULE
init = 1
EOF

PORT=$((20000 + RANDOM % 20000))
# start_nginx CERT KEY-DIRECTIVE-VALUE: nginx in the foreground (master + 2 workers), its PID in NGINX_PID.
start_nginx() {
  mkdir -p "$W/tmp"
  local user=""; [ "$(id -u)" = 0 ] && user="user root;"
  cat > "$W/nginx.conf" <<EOF
$user
worker_processes 2;
daemon off;
pid $W/nginx.pid;
error_log $W/error.log warn;
env KEYSHARE_HOME; env XDG_RUNTIME_DIR; env KEYSHARE_AGENT_PROGRAM; env KEYSHARE_AGENT_IDLE_TIMEOUT; env PKCS11_MODULE_PATH; env OPENSSL_CONF;
events { worker_connections 512; }
http {
  access_log off;
  client_body_temp_path $W/tmp/body; proxy_temp_path $W/tmp/proxy; fastcgi_temp_path $W/tmp/fcgi;
  uwsgi_temp_path $W/tmp/uwsgi; scgi_temp_path $W/tmp/scgi;
  server {
    listen 127.0.0.1:$PORT ssl;
    ssl_certificate $1;
    ssl_certificate_key "$2";
    ssl_protocols TLSv1.3;
    ssl_session_cache off;
    ssl_session_tickets off;
    location / { return 200 "ok\n"; }
  }
}
EOF
  : > "$W/error.log"
  OPENSSL_CONF=$W/openssl.cnf PKCS11_MODULE_PATH=$MODULE "$NGINX" -e "$W/error.log" -c "$W/nginx.conf" &
  NGINX_PID=$!
  for _ in $(seq 100); do
    if openssl s_client -connect "127.0.0.1:$PORT" </dev/null >/dev/null 2>&1; then return 0; fi
    kill -0 "$NGINX_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "nginx.sh: nginx did not come up: $(tail -3 "$W/error.log")" >&2
  return 1
}
stop_nginx() { kill "$NGINX_PID" 2>/dev/null || true; wait "$NGINX_PID" 2>/dev/null || true; NGINX_PID=; }

# One run: two s_time clients for SECS seconds; prints the summed connections/s.
run_once() {
  local i outs=()
  CLIENTS=()
  for i in 1 2; do
    openssl s_time -connect "127.0.0.1:$PORT" -new -time "$SECS" > "$W/stime.$i" 2>&1 &
    CLIENTS+=($!)
  done
  for i in "${CLIENTS[@]}"; do wait "$i" || true; done
  CLIENTS=()
  python3 - "$W/stime.1" "$W/stime.2" <<'EOF'
import re, sys
total = 0.0
for f in sys.argv[1:]:
    m = re.search(r"([0-9.]+) connections/user sec", open(f).read())
    n = re.search(r"(\d+) connections in (\d+) real seconds", open(f).read())
    if n: total += int(n.group(1)) / max(int(n.group(2)), 1)
print(f"{total:.1f}")
EOF
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "TLS server: nginx $("$NGINX" -v 2>&1 | sed 's|.*/||'), 2 workers, TLS 1.3 full handshakes (2 × openssl s_time -new, $SECS s, median of $REPS)"
echo "| server key | file (handshakes/s) | keyshare token via libp11 (handshakes/s) | keyshare ÷ file |"
echo "|---|---:|---:|---:|"
for k in ec rsa; do
  name=$([ $k = ec ] && echo "ECDSA P-256" || echo "RSA-2048")
  key_uri="$(uri "bench-$k");pin-source=file:$W/pin"
  f=(); t=()
  for _ in $(seq "$REPS"); do
    start_nginx "$W/$k.pem" "$W/$k.key" || exit 1
    f+=("$(run_once)"); stop_nginx
    start_nginx "$W/$k.pem" "engine:pkcs11:$key_uri" || exit 1
    t+=("$(run_once)"); stop_nginx
  done
  fm=$(median "${f[@]}"); tm=$(median "${t[@]}")
  ratio=$(python3 -c "print(f'{$tm/$fm:.2f}' if $fm > 0 else 'n/a')")
  echo "| nginx TLS 1.3 handshakes, $name | $fm | $tm | $ratio |"
done
grep -q "through the agent\|client pid" "$(agent_dir)/agent.log" 2>/dev/null && echo "keyshare ran through its agent"
