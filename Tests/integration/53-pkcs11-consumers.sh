#!/usr/bin/env bash
# The module under its real consumers, with URIs exactly as `keyshare list
# --json` prints them: OpenSSL's libp11 engine (req -x509, pkeyutl decrypt
# PKCS #1 and OAEP, public key export verifying RSA, RSA-PSS and EC
# signatures), p11-kit/GnuTLS through a user module file (run as an
# unprivileged user: p11-kit ignores user module files for root), OpenSSH's
# agent (ssh-add -s, ssh-keygen -Y sign/verify), NSS (modutil, certutil -U,
# -K, -R), the CLI import path, `make install DESTDIR`, and the same
# pkcs11-tool scenario against SoftHSM2 for the record.
# Usage: 53-pkcs11-consumers.sh KEYSHARE MODULE. Ends with "N passed, M failed".
set -euo pipefail
KEYSHARE=$(cd "$(dirname "${1:?keyshare binary}")" && pwd)/$(basename "$1")
MODULE=${2:?module path}
MODULE=$(realpath "$MODULE")  # ssh-agent matches its provider allow-list on the real path
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$HERE/../.." && pwd)
new_home
WORK=$(mktemp -d /tmp/keyshare-p11c.XXXXXX)
AGENT_PID=
cleanup() { [ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null; stop_agent "$WORK/user/run"; rm -rf "$WORK" "$KEYSHARE_HOME"; }
trap cleanup EXIT
P=(pkcs11-tool --module "$MODULE")
ID=$FIXTURES/identities
# Every PIN reaches its program through the environment (pkcs11-tool --pin
# env:VAR, GNUTLS_PIN, an askpass script that prints a variable) or a pipe
# (libp11's pin-source=file:/dev/fd/3, NSS's -f), never argv: `ps` shows every
# argument to every local user.
export PIN=0000 SOPIN=1234

# The CLI makes the token and imports an identity (key + certificate).
"$KEYSHARE" token create --label apps --pin-source env:PIN --so-pin-source env:SOPIN --short-pin >/dev/null
check "keyshare import RSA identity" "$KEYSHARE" import "$ID/device-ds-ke.key.pem" "$ID/device-ds-ke.cert.pem" --token apps --pin-source env:PIN
check "keyshare import EC identity" "$KEYSHARE" import "$ID/auth-upn-new.key.pem" "$ID/auth-upn-new.cert.pem" --token apps --pin-source env:PIN
"$KEYSHARE" list --token apps --private --pin-source env:PIN --json > "$WORK/list.json"
uri() {  # uri ITEMCLASS KEY-PREFIX: the "uri" of the first matching item
  python3 -c '
import json, sys
for i in json.load(open(sys.argv[1])):
    if i.get("itemClass") == sys.argv[2] and i.get("key", "").startswith(sys.argv[3]):
        print(i["uri"]); break' "$WORK/list.json" "$1" "$2"
}
RSA_PRIV=$(uri private-key RSA); RSA_PUB=$(uri public-key RSA); EC_PRIV=$(uri private-key EC); EC_PUB=$(uri public-key EC)
if [[ $RSA_PRIV == pkcs11:* && $EC_PRIV == pkcs11:* ]]; then ok "keyshare list --json prints pkcs11: URIs"; else bad "keyshare list --json prints pkcs11: URIs" "$(head -c 600 "$WORK/list.json")"; fi
objs=$("${P[@]}" --token-label apps --login --pin env:PIN -O 2>&1 || true)
ids=$(grep -E '^\s+ID:' <<<"$objs" | sort | uniq -c | awk '$1 >= 2' | wc -l)
if [ "$ids" -ge 2 ]; then ok "imported key and certificate share CKA_ID in pkcs11-tool -O"; else bad "imported key and certificate share CKA_ID in pkcs11-tool -O" "$objs"; fi

# OpenSSL through the libp11 engine.
ENGINE=/usr/lib/x86_64-linux-gnu/engines-3/pkcs11.so
if [ -e "$ENGINE" ]; then
  E=(env PKCS11_MODULE_PATH="$MODULE" openssl)
  echo "engine data" > "$WORK/data"
  openssl dgst -sha256 -binary "$WORK/data" > "$WORK/data.sha256"
  check "engine exports the RSA public key" "${E[@]}" pkey -engine pkcs11 -inform engine -in "$RSA_PUB" -pubin -pubout -out "$WORK/rsa.pub"
  check "engine exports the EC public key" "${E[@]}" pkey -engine pkcs11 -inform engine -in "$EC_PUB" -pubin -pubout -out "$WORK/ec.pub"
  check "engine signs RSA (imported key)" "${E[@]}" dgst -sha256 -engine pkcs11 -keyform engine -sign "$RSA_PRIV;pin-source=file:/dev/fd/3" -out "$WORK/s.rsa" "$WORK/data" 3< <(pin_pipe PIN)
  check "exported key verifies RSA" openssl dgst -sha256 -verify "$WORK/rsa.pub" -signature "$WORK/s.rsa" "$WORK/data"
  check "engine signs RSA-PSS" "${E[@]}" dgst -sha256 -engine pkcs11 -keyform engine -sign "$RSA_PRIV;pin-source=file:/dev/fd/3" \
    -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:32 -out "$WORK/s.pss" "$WORK/data" 3< <(pin_pipe PIN)
  check "exported key verifies RSA-PSS" openssl dgst -sha256 -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:32 \
    -verify "$WORK/rsa.pub" -signature "$WORK/s.pss" "$WORK/data"
  check "engine signs EC" "${E[@]}" dgst -sha256 -engine pkcs11 -keyform engine -sign "$EC_PRIV;pin-source=file:/dev/fd/3" -out "$WORK/s.ec" "$WORK/data" 3< <(pin_pipe PIN)
  check "exported key verifies EC" openssl dgst -sha256 -verify "$WORK/ec.pub" -signature "$WORK/s.ec" "$WORK/data"
  echo -n "decrypt me" > "$WORK/plain"
  openssl pkeyutl -encrypt -pubin -inkey "$WORK/rsa.pub" -in "$WORK/plain" -out "$WORK/ct1"
  check "engine pkeyutl -decrypt PKCS#1" "${E[@]}" pkeyutl -engine pkcs11 -keyform engine -decrypt \
    -inkey "$RSA_PRIV;pin-source=file:/dev/fd/3" -in "$WORK/ct1" -out "$WORK/pt1" 3< <(pin_pipe PIN)
  check "PKCS#1 plaintext matches" cmp "$WORK/plain" "$WORK/pt1"
  openssl pkeyutl -encrypt -pubin -inkey "$WORK/rsa.pub" -pkeyopt rsa_padding_mode:oaep -in "$WORK/plain" -out "$WORK/ct2"
  check "engine pkeyutl -decrypt OAEP" "${E[@]}" pkeyutl -engine pkcs11 -keyform engine -decrypt -pkeyopt rsa_padding_mode:oaep \
    -inkey "$RSA_PRIV;pin-source=file:/dev/fd/3" -in "$WORK/ct2" -out "$WORK/pt2" 3< <(pin_pipe PIN)
  check "OAEP plaintext matches" cmp "$WORK/plain" "$WORK/pt2"
  check "openssl req -x509 with the token key" "${E[@]}" req -new -x509 -engine pkcs11 -keyform engine \
    -key "$RSA_PRIV;pin-source=file:/dev/fd/3" -subj /CN=engine-self-signed -days 2 -out "$WORK/self.pem" 3< <(pin_pipe PIN)
  check "self-signed certificate verifies" openssl verify -CAfile "$WORK/self.pem" "$WORK/self.pem"
fi

# pkcs11-tool-made objects appear in the CLI.
check "pkcs11-tool keypairgen on the CLI's token" "${P[@]}" --token-label apps --login --pin env:PIN --keypairgen \
  --key-type EC:prime256v1 --id 77 --label made-by-pkcs11-tool
check_out "keyshare list shows it" 'made-by-pkcs11-tool' "$KEYSHARE" list --token apps

# NSS.
if command -v modutil >/dev/null; then
  NSSDB=sql:$WORK/nss; mkdir -p "$WORK/nss"
  # certutil -f reads the token password from a file: here a pipe, so it is on no disk.
  certutil -N -d "$NSSDB" --empty-password
  check "modutil -add" bash -c "echo | modutil -force -dbdir '$NSSDB' -add keyshare -libfile '$MODULE'"
  check_out "certutil -U shows the token" 'token: apps' certutil -U -d "$NSSDB"
  check_out "certutil -K lists the token's keys" '<[ 0-9]+> rsa' certutil -K -d "$NSSDB" -h apps -f <(pin_pipe PIN)
  # -k takes the key ID certutil -K prints (the token's CKA_ID).
  rsa_keyid=$(certutil -K -d "$NSSDB" -h apps -f <(pin_pipe PIN) 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "rsa") {print $(i + 1); exit}}')
  head -c 64 /dev/urandom > "$WORK/noise"
  check "certutil -R signs a request with the token's key" certutil -R -d "$NSSDB" -h apps -f <(pin_pipe PIN) -z "$WORK/noise" \
    -k "$rsa_keyid" -s CN=nss-request -a -o "$WORK/req.pem"
  check "the NSS request verifies" openssl req -in "$WORK/req.pem" -verify -noout
fi

# OpenSSH: a private agent holds the token's keys.
if command -v ssh-agent >/dev/null; then
  # The askpass script holds no secret: it prints the PIN from its environment.
  printf '#!/bin/sh\nprintf "%%s\\n" "$KEYSHARE_TEST_PIN"\n' > "$WORK/askpass"; chmod 700 "$WORK/askpass"
  eval "$(ssh-agent -s -a "$WORK/agent.sock" -P "$(dirname "$MODULE")/*")" >/dev/null
  AGENT_PID=$SSH_AGENT_PID
  KEYSHARE_TEST_PIN=$PIN check "ssh-add -s MODULE" env SSH_ASKPASS="$WORK/askpass" SSH_ASKPASS_REQUIRE=force DISPLAY=none ssh-add -s "$MODULE"
  ssh-add -L 2>/dev/null | grep '^ssh-rsa' | head -1 > "$WORK/id.pub" || true
  echo "file to sign" > "$WORK/msg"
  check "ssh-keygen -Y sign through the agent" ssh-keygen -Y sign -f "$WORK/id.pub" -n file "$WORK/msg"
  echo "user@keyshare $(cat "$WORK/id.pub")" > "$WORK/allowed"
  check "ssh-keygen -Y verify" bash -c "ssh-keygen -Y verify -f '$WORK/allowed' -I user@keyshare -n file -s '$WORK/msg.sig' < '$WORK/msg'"
  kill "$AGENT_PID" 2>/dev/null || true; AGENT_PID=
fi

# p11-kit and GnuTLS through a user module file, as an unprivileged user.
if command -v p11-kit >/dev/null && command -v setpriv >/dev/null && getent passwd 1000 >/dev/null; then
  UH=$WORK/user; mkdir -p "$UH/.config/pkcs11/modules" "$UH/ks" "$UH/run"
  # The user gets its own copies: the checkout may be private to root (mktemp -d is 0700).
  copy_images "$UH"
  cp "$ID/device-ds-ke.key.pem" "$ID/device-ds-ke.cert.pem" "$UH/"
  printf 'module: %s\n' "$UH/libkeyshare-pkcs11.so" > "$UH/.config/pkcs11/modules/keyshare.module"
  chown -R 1000:1000 "$UH"; chmod 755 "$WORK"; chmod 700 "$UH/run"
  # A clean environment for the user, as `env -i` would give, but with the PINs set
  # in the shell before exec: env's NAME=VALUE arguments would be in its argv.
  asuser() (
    path=$PATH pin=$PIN sopin=$SOPIN inproc=${KEYSHARE_IN_PROCESS:-}
    for v in $(compgen -e); do unset "$v" 2>/dev/null; done
    [ -n "$inproc" ] && export KEYSHARE_IN_PROCESS=$inproc   # the mode under test
    # The user's own runtime directory: its agent (the default mode) is this
    # script's, stopped by its PID below, never a stale one in /tmp.
    export PATH=$path HOME=$UH XDG_RUNTIME_DIR=$UH/run KEYSHARE_HOME=$UH/ks KEYSHARE_KDF_LOG2N=10 PIN=$pin SOPIN=$sopin GNUTLS_PIN=$pin
    exec setpriv --reuid=1000 --regid=1000 --clear-groups "$@"
  )
  asuser "$UH/keyshare" token create --label user-tok --pin-source env:PIN --so-pin-source env:SOPIN --short-pin >/dev/null 2>&1 || true
  asuser "$UH/keyshare" import "$UH/device-ds-ke.key.pem" "$UH/device-ds-ke.cert.pem" --token user-tok --pin-source env:PIN >/dev/null 2>&1 || true
  check_out "p11-kit list-modules shows the token" 'user-tok' asuser p11-kit list-modules
  check_out "p11tool --list-all on the token" 'X.509 Certificate' asuser p11tool --list-all 'pkcs11:token=user-tok'
  key_uri=$(asuser "$UH/keyshare" list --token user-tok --private --pin-source env:PIN --json 2>/dev/null | python3 -c '
import json,sys
print(next(i["uri"] for i in json.load(sys.stdin) if i.get("itemClass")=="private-key"))' || true)
  printf 'cn = "gnutls-self-signed"\nexpiration_days = 2\nsigning_key\n' > "$UH/tmpl"; chown 1000 "$UH/tmpl"
  check_out "certtool --generate-self-signed with the token key" 'BEGIN CERTIFICATE' asuser certtool --generate-self-signed \
    --load-privkey "$key_uri" --template "$UH/tmpl"
  # One process holding OpenSSL 3.0 (openssl, the libp11 engine), p11-kit-proxy and the module with
  # its own OpenSSL (issue 18: bundled 3.5, every symbol private): no PKCS11_MODULE_PATH, so the
  # engine loads p11-kit-proxy, which loads the user's module file.
  check_out "openssl 3.0 + libp11 engine + p11-kit-proxy + the module in one process: public key" 'BEGIN PUBLIC KEY' \
    asuser openssl pkey -engine pkcs11 -inform engine -in 'pkcs11:token=user-tok;type=public' -pubin -pubout
  stop_agent "$UH/run"
fi

# make install DESTDIR: the module and its p11-kit module file land where p11-kit looks.
DEST=$WORK/dest
if make -C "$ROOT" -s -o build -o deps install DESTDIR="$DEST" KEYSHARE="$KEYSHARE" MODULE="$MODULE" >/dev/null 2>&1; then
  mp=$(pkg-config --variable=p11_module_path p11-kit-1); mc=$(pkg-config --variable=p11_module_configs p11-kit-1)
  if [ -f "$DEST$mp/libkeyshare-pkcs11.so" ] && grep -q 'libkeyshare-pkcs11.so' "$DEST$mc/keyshare.module"; then
    ok "make install DESTDIR: module and module file"; else bad "make install DESTDIR: module and module file" "$(find "$DEST")"; fi
else
  bad "make install DESTDIR runs"
fi

# The same pkcs11-tool scenario against SoftHSM2, recorded (not counted): its
# known failures are the reference our module must not share.
SOFTHSM=/usr/lib/softhsm/libsofthsm2.so
if [ -e "$SOFTHSM" ]; then
  mkdir -p "$WORK/softhsm/tokens"
  printf 'directories.tokendir = %s\nobjectstore.backend = file\n' "$WORK/softhsm/tokens" > "$WORK/softhsm/conf"
  export SOFTHSM2_CONF=$WORK/softhsm/conf
  S=(pkcs11-tool --module "$SOFTHSM")
  "${S[@]}" --init-token --slot-index 0 --label s --so-pin env:SOPIN >/dev/null 2>&1 || echo "note - SoftHSM2 init-token: fails"
  "${S[@]}" --init-pin --token-label s --login --login-type so --so-pin env:SOPIN --new-pin env:PIN >/dev/null 2>&1 || true
  SU=("${S[@]}" --token-label s --login --pin env:PIN)
  for step in "keypairgen-rsa:--keypairgen --key-type rsa:2048 --id 11" "keypairgen-ec:--keypairgen --key-type EC:prime256v1 --id 12" \
              "keypairgen-ed25519:--keypairgen --key-type EC:edwards25519 --id 14" "test:--test" \
              "test-ec:--session-rw --test-ec --id 41 --key-type EC:prime256v1" "test-fork:--test-fork"; do
    name=${step%%:*}; args=${step#*:}
    # shellcheck disable=SC2086
    if "${SU[@]}" $args >/dev/null 2>&1; then echo "note - SoftHSM2 $name: passes"; else echo "note - SoftHSM2 $name: fails"; fi
  done
  unset SOFTHSM2_CONF
fi

finish
