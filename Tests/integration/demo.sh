#!/usr/bin/env bash
# `make demo`: the main job end to end on a throwaway store (./demo unless
# KEYSHARE_HOME is set): create a token, import an identity, list it through the
# PKCS #11 module with pkcs11-tool, sign with OpenSSL through the module, and
# export it as a PKCS #12 under the shared password.
set -euo pipefail
KS=${1:?keyshare binary}
MODULE=${2:?module path}
ROOT=$(pwd)
if [ -z "${KEYSHARE_HOME:-}" ]; then
  export KEYSHARE_HOME="$ROOT/demo/store"
  rm -rf "$ROOT/demo"
  WORK="$ROOT/demo/work"
else
  WORK=${DEMO_WORK:-$(mktemp -d /tmp/keyshare-demo.XXXXXX)}
fi
mkdir -p "$WORK"
# Demo secrets come from the environment (never the command line); a real user
# would be prompted without echo.
export DEMO_USER_PIN=${DEMO_USER_PIN:-demo-1234} DEMO_SO_PIN=${DEMO_SO_PIN:-demo-so-5678} DEMO_P12_PASSWORD=${DEMO_P12_PASSWORD:-demo-p12}
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# Commands are echoed with the PIN masked: secrets stay out of output.
run() { local shown="$*"; printf '$ %s\n' "${shown//$DEMO_USER_PIN/****}"; "$@"; }

step "1. A sample identity (a small CA and a user certificate, made here with openssl)"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=keyshare demo CA" \
  -keyout "$WORK/ca.key" -out "$WORK/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=Demo User/O=keyshare" -keyout "$WORK/user.key" -out "$WORK/user.csr" 2>/dev/null
printf 'keyUsage=critical,digitalSignature,nonRepudiation\nsubjectAltName=email:demo.user@example.org\n' > "$WORK/ext.cnf"
openssl x509 -req -in "$WORK/user.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -set_serial 0x4B53 -days 30 \
  -extfile "$WORK/ext.cnf" -out "$WORK/user.pem" 2>/dev/null
openssl pkcs12 -export -inkey "$WORK/user.key" -in "$WORK/user.pem" -certfile "$WORK/ca.pem" \
  -passout env:DEMO_P12_PASSWORD -out "$WORK/user.p12"
rm -f "$WORK/user.key" "$WORK/ca.key"
echo "made $WORK/user.p12"

step "2. Create a token (store: $KEYSHARE_HOME)"
run "$KS" token create --label demo --pin-source env:DEMO_USER_PIN --so-pin-source env:DEMO_SO_PIN
run "$KS" token list

step "3. Import the identity"
run "$KS" import "$WORK/user.p12" --pin-source env:DEMO_USER_PIN --password-source env:DEMO_P12_PASSWORD
run "$KS" list

step "4. List it through the PKCS #11 module with pkcs11-tool"
run pkcs11-tool --module "$MODULE" -L
# pkcs11-tool reads the PIN from the environment with `--pin env:VAR`: the PIN is never in argv.
run pkcs11-tool --module "$MODULE" --token-label demo --login --pin env:DEMO_USER_PIN -O 2>&1 | sed 's/^/    /'

step "5. Sign with OpenSSL through the module (the key never leaves the keychain)"
URI=$("$KS" list --json | python3 -c 'import json,sys; print([r["uri"] for r in json.load(sys.stdin) if r["itemClass"]=="certificate" and "Demo User" in (r.get("subject") or "")][0])')
KEYURI="${URI%;type=cert};type=private"
echo "key URI: $KEYURI"
echo "hello from keyshare" > "$WORK/message.txt"
# RFC 7512's pin-source: libp11 reads the PIN from a file, here a pipe on fd 3, so it is
# never in argv (`ps` shows every argument to every local user) and never on disk.
run env PKCS11_MODULE_PATH="$MODULE" openssl dgst -sha256 -engine pkcs11 -keyform engine \
  -sign "$KEYURI;pin-source=file:/dev/fd/3" -out "$WORK/message.sig" "$WORK/message.txt" \
  3< <(printf '%s' "$DEMO_USER_PIN") 2>&1 | grep -v '^Engine "pkcs11" set' || true
openssl x509 -in "$WORK/user.pem" -pubkey -noout > "$WORK/user.pub"
run openssl dgst -sha256 -verify "$WORK/user.pub" -signature "$WORK/message.sig" "$WORK/message.txt"

step "6. Export the identity as PKCS #12 (the key-sharing fallback)"
LABEL=$(openssl x509 -in "$WORK/user.pem" -outform DER | openssl dgst -sha256 -r | awk '{print toupper($1)}')
run "$KS" export "$LABEL" --out "$WORK/shared.p12" --pin-source env:DEMO_USER_PIN
# The shared export password stays in the keychain (`keyshare password` shows it on a
# terminal); here it goes from keyshare to openssl through the environment only.
echo "the shared export password is kept in the keychain: \`keyshare password\` shows it"
SHARED=$("$KS" password --stdout --pin-source env:DEMO_USER_PIN)
SHARED="$SHARED" run openssl pkcs12 -info -noout -in "$WORK/shared.p12" -passin env:SHARED 2>&1 | sed 's/^/    /'

printf '\n\033[1mdemo complete\033[0m: store %s, files in %s\n' "$KEYSHARE_HOME" "$WORK"
