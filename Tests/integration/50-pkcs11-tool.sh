#!/usr/bin/env bash
# Drives libkeyshare-pkcs11.so with OpenSC's pkcs11-tool (and OpenSSL for the
# other side of signatures). Usage: 50-pkcs11-tool.sh MODULE  (or KEYSHARE MODULE,
# the run-all.sh convention). Ends with "N passed, M failed".
set -euo pipefail
MODULE=${2:-${1:?module path}}
MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")
. "$(dirname "$0")/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-p11.XXXXXX)
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
# PINs reach pkcs11-tool through the environment (--pin env:VAR), never argv:
# `ps` shows every argument to every local user. Distinct values, so the debug
# log check below cannot miss the PIN.
export PIN=7305-user SOPIN=8817-so WRONG=9999
P=(pkcs11-tool --module "$MODULE")
U=("${P[@]}" --token-label t --login --pin env:PIN)
ID=$FIXTURES/identities

# Exports and loading.
syms=$(nm -D --defined-only "$MODULE" | awk '$2 ~ /^[A-Z]$/ {print $3}' | sort | tr '\n' ' ')
if [ "$syms" = "C_GetFunctionList C_GetInterface C_GetInterfaceList " ]; then ok "exports only the three getters"; else bad "exports only the three getters" "$syms"; fi
# The images (docs/architecture.md, "Images"): the module hosts load is plain C, the agent's client;
# the engine (libkeyshare-engine.so, next to it) holds the Swift runtime, the layers and OpenSSL.
ENGINE=$(dirname "$MODULE")/libkeyshare-engine.so
mod_ossl=$(nm -D "$MODULE" | awk '$NF ~ /^(EVP|OSSL|OPENSSL|ERR|BIO|X509|PEM|CRYPTO)_/' | wc -l)
if [ "$mod_ossl" -eq 0 ] && ! readelf -d "$MODULE" | grep -q 'NEEDED.*\(crypto\|swift\|stdc++\|sqlite\)'; then
  ok "the module links no OpenSSL, Swift runtime, C++ library or SQLite ($(readelf -d "$MODULE" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' '))"
else bad "the module links no OpenSSL, Swift runtime, C++ library or SQLite" "$mod_ossl OpenSSL symbols; $(readelf -d "$MODULE" | grep NEEDED)"; fi
# The crypto engine (issue 18): a bundled OpenSSL is linked into the engine and private (no OpenSSL
# symbol in its dynamic table, defined or imported, and no libcrypto.so NEEDED); a system one is
# imported. Either way C_GetInfo's description names the same OpenSSL as `keyshare --version`.
if [ $# -ge 2 ]; then KSBIN=$1; else KSBIN=$(dirname "$MODULE")/keyshare; fi
engine=$("$KSBIN" --version | sed -n 2p)
ossl_dyn=$(nm -D "$ENGINE" | awk '$NF ~ /^(EVP|OSSL|OPENSSL|ERR|BIO|X509|PEM|CRYPTO)_/' | wc -l)
case $engine in
  *bundled*) if [ "$ossl_dyn" -eq 0 ] && ! readelf -d "$ENGINE" | grep -q 'libcrypto'; then
               ok "bundled OpenSSL: no OpenSSL symbol in the engine's dynamic table, no libcrypto.so needed"
             else bad "bundled OpenSSL: no OpenSSL symbol in the engine's dynamic table" "$ossl_dyn symbols; $(readelf -d "$ENGINE" | grep NEEDED)"; fi ;;
  *system*)  if [ "$ossl_dyn" -gt 0 ]; then ok "system OpenSSL: imported from libcrypto.so ($ossl_dyn symbols)"
             else bad "system OpenSSL: imported from libcrypto.so" "no OpenSSL symbols"; fi ;;
  *) bad "keyshare --version names the OpenSSL in use (line 2)" "$engine" ;;
esac
# A bundled build (make build copies the bundle's legacy provider next to the binaries) must run the
# bundled engine: the run-time label alone followed a build that had linked Debian's libcrypto.so.3
# (another .pc's -L/usr/lib ahead of the bundle's -lcrypto) and called itself "system".
if [ -d "$(dirname "$MODULE")/keyshare-ossl-modules" ]; then
  case $engine in *bundled*) ok "a bundled build runs the bundled OpenSSL" ;;
    *) bad "a bundled build runs the bundled OpenSSL" "$engine; $(readelf -d "$ENGINE" | grep 'NEEDED.*crypto')" ;; esac
fi
engine_name=${engine%% (*}
check_out "C_GetInfo's description names $engine_name" "Library +keyshare, ${engine_name//./\\.}" "${P[@]}" -I
if ldd "$ENGINE" | grep -qi swift; then bad "no Swift runtime libraries linked" "$(ldd "$ENGINE")"; else ok "no Swift runtime libraries linked (the engine carries its own)"; fi
syms=$(nm -D --defined-only "$ENGINE" | awk '$2 ~ /^[A-Z]$/ {print $3}' | sort | tr '\n' ' ')
[ "$syms" = "keyshare_engine_pkcs11_v1 keyshare_main_v1 " ] && ok "the engine exports only its two entry points" \
  || bad "the engine exports only its two entry points" "$syms"

# pkcs11-tool takes the default interface, the newest: PKCS #11 3.2 (issue 18).
check_out "-I reports Cryptoki 3.2" 'Cryptoki version 3\.2' "${P[@]}" -I
check_out "-L shows the free slot" 'free slot.*' "${P[@]}" -L
check_out "-T lists the free slot's token" 'uninitialized' "${P[@]}" -T
check_out "-M lists mechanisms" 'ECDSA-SHA256' "${P[@]}" -M --slot 1

# A token through C_InitToken on the free slot, then the user PIN by the SO.
check_out "init-token on the free slot" 'successfully initialized' "${P[@]}" --init-token --label t --so-pin env:SOPIN --slot 1
check_out "new token has its own slot" 'token label +: t' "${P[@]}" -L
# Agent mode with a store: the host maps the module alone, never the engine (its Swift runtime,
# OpenSSL and store code stay in the agent). In-process mode loads it, from next to the module.
if [ "${KEYSHARE_IN_PROCESS:-0}" != 1 ]; then
  n=$(LD_DEBUG=files "${P[@]}" -L 2>&1 >/dev/null | grep -c 'file=.*libkeyshare-engine' || true)
  [ "$n" = 0 ] && ok "agent mode: pkcs11-tool loads no engine (LD_DEBUG=files)" || bad "agent mode: pkcs11-tool loads no engine" "$n loads"
else
  n=$(LD_DEBUG=files "${P[@]}" -L 2>&1 >/dev/null | grep -c 'calling init: .*libkeyshare-engine.so' || true)
  [ "$n" = 1 ] && ok "in-process mode: pkcs11-tool loads the engine once" || bad "in-process mode: pkcs11-tool loads the engine once" "$n"
fi
check_out "init-pin by the SO" 'successfully initialized' "${P[@]}" --init-pin --login --login-type so --so-pin env:SOPIN --new-pin env:PIN --token-label t
check_out "token flags show PIN initialized" 'PIN initialized' "${P[@]}" -L
check "-O with login on an empty token" "${U[@]}" -O
check_fail_any() { local name=$1; shift; if "$@" >/dev/null 2>&1; then bad "$name"; else ok "$name"; fi; }
check_fail_any "wrong PIN is refused" "${P[@]}" --token-label t --login --pin env:WRONG -O
check_out "a failed login sets count-low" 'user PIN count low' "${P[@]}" -L
check "right PIN still works" "${U[@]}" -O

# Objects written through C_CreateObject.
openssl pkey -in "$ID/device-ds-ke.key.pem" -outform DER -out "$WORK/rsa.der"
openssl pkey -in "$ID/auth-upn-new.key.pem" -outform DER -out "$WORK/ec.der"
openssl x509 -in "$ID/device-ds-ke.cert.der" -inform DER -pubkey -noout > "$WORK/rsa.pub"
openssl x509 -in "$ID/auth-upn-new.cert.der" -inform DER -pubkey -noout > "$WORK/ec.pub"
openssl pkey -pubin -in "$WORK/rsa.pub" -outform DER -out "$WORK/rsa.pub.der"
check_out "write RSA private key" 'Private Key Object; RSA' "${U[@]}" --write-object "$WORK/rsa.der" --type privkey --id 01 --label rsa
check_out "write certificate" 'Certificate Object' "${U[@]}" --write-object "$ID/device-ds-ke.cert.der" --type cert --id 01 --label rsa
check_out "write RSA public key" 'Public Key Object; RSA' "${U[@]}" --write-object "$WORK/rsa.pub.der" --type pubkey --id 01 --label rsa
check_out "write EC private key" 'Private Key Object; EC' "${U[@]}" --write-object "$WORK/ec.der" --type privkey --id 02 --label ec
check_out "-O shows unique IDs" 'Unique ID' "${U[@]}" -O
pub_only=$("${P[@]}" --token-label t -O 2>&1 || true)
if grep -q 'Private Key' <<<"$pub_only"; then bad "private keys invisible before login" "$pub_only"; else ok "private keys invisible before login"; fi

# Signatures, checked by OpenSSL.
echo "keyshare integration data" > "$WORK/data"
openssl dgst -sha256 -binary "$WORK/data" > "$WORK/data.sha256"
check "sign SHA256-RSA-PKCS" "${U[@]}" --sign --mechanism SHA256-RSA-PKCS --id 01 -i "$WORK/data" -o "$WORK/s1"
check "openssl verifies SHA256-RSA-PKCS" openssl dgst -sha256 -verify "$WORK/rsa.pub" -signature "$WORK/s1" "$WORK/data"
check "sign SHA256-RSA-PKCS-PSS" "${U[@]}" --sign --mechanism SHA256-RSA-PKCS-PSS --id 01 -i "$WORK/data" -o "$WORK/s2"
check "openssl verifies PSS" openssl dgst -sha256 -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:-1 -verify "$WORK/rsa.pub" -signature "$WORK/s2" "$WORK/data"
check "sign RSA-PKCS-PSS on a digest" "${U[@]}" --sign --mechanism RSA-PKCS-PSS --hash-algorithm SHA256 --id 01 -i "$WORK/data.sha256" -o "$WORK/s3"
check "pkcs11-tool verifies SHA256-RSA-PKCS" "${U[@]}" --verify --mechanism SHA256-RSA-PKCS --id 01 -i "$WORK/data" --signature-file "$WORK/s1"
check "sign ECDSA-SHA256" "${U[@]}" --sign --mechanism ECDSA-SHA256 --id 02 -i "$WORK/data" -o "$WORK/s4" --signature-format openssl
check "openssl verifies ECDSA-SHA256" openssl dgst -sha256 -verify "$WORK/ec.pub" -signature "$WORK/s4" "$WORK/data"
check "sign ECDSA on a digest" "${U[@]}" --sign --mechanism ECDSA --id 02 -i "$WORK/data.sha256" -o "$WORK/s5" --signature-format openssl
check "openssl verifies ECDSA" openssl pkeyutl -verify -pubin -inkey "$WORK/ec.pub" -in "$WORK/data.sha256" -sigfile "$WORK/s5"
check_out "pkcs11-tool self test (with software mechanisms)" "No errors" "${U[@]}" --test --allow-sw

# OpenSSL through the libp11 engine, when it is installed.
if [ -e /usr/lib/x86_64-linux-gnu/engines-3/pkcs11.so ]; then
  check "openssl engine signs with RSA" env PKCS11_MODULE_PATH="$MODULE" openssl dgst -sha256 -engine pkcs11 -keyform engine \
    -sign "pkcs11:token=t;object=rsa;type=private;pin-source=file:/dev/fd/3" -out "$WORK/e1" "$WORK/data" 3< <(pin_pipe PIN)
  check "engine RSA signature verifies" openssl dgst -sha256 -verify "$WORK/rsa.pub" -signature "$WORK/e1" "$WORK/data"
  check "openssl engine signs with EC" env PKCS11_MODULE_PATH="$MODULE" openssl dgst -sha256 -engine pkcs11 -keyform engine \
    -sign "pkcs11:token=t;object=ec;type=private;pin-source=file:/dev/fd/3" -out "$WORK/e2" "$WORK/data" 3< <(pin_pipe PIN)
  check "engine EC signature verifies" openssl dgst -sha256 -verify "$WORK/ec.pub" -signature "$WORK/e2" "$WORK/data"
fi

if command -v p11tool >/dev/null; then
  export GNUTLS_PIN=$PIN   # p11tool --login reads it (an environment entry, not an argument)
  check_out "GnuTLS p11tool lists the token" 'token=t' p11tool --provider "$MODULE" --list-tokens
  check_out "GnuTLS p11tool signs and verifies" 'public key in the token\.\.\. ok' \
    p11tool --provider "$MODULE" --login --test-sign 'pkcs11:token=t;object=rsa;type=private'
fi

if command -v ssh-keygen >/dev/null; then
  check_out "ssh-keygen -D lists the keys" '^ssh-rsa ' ssh-keygen -D "$MODULE"
fi

if command -v certutil >/dev/null && command -v modutil >/dev/null; then
  NSSDB=$WORK/nssdb
  mkdir -p "$NSSDB"
  certutil -N -d "sql:$NSSDB" --empty-password
  echo | modutil -force -dbdir "sql:$NSSDB" -add keyshare -libfile "$MODULE" >/dev/null 2>&1 || true
  check_out "NSS sees the token's certificate" '^t:rsa ' certutil -L -d "sql:$NSSDB" -h all
fi

# Fork: the child's C_Initialize must give a working module.
check "--test-fork" "${U[@]}" --test-fork
check_out "random bytes" '^.{32}$' bash -c "$(printf '%q ' "${P[@]}") --token-label t --generate-random 16 | od -An -tx1 | tr -d ' \n'"

# The debug log names calls and never shows the PIN.
KEYSHARE_DEBUG=1 KEYSHARE_LOG="$WORK/log" "${U[@]}" -O >/dev/null 2>&1 || true
if grep -q 'C_Login(hSession=' "$WORK/log" && ! grep -qF -f <(pin_pipe PIN; echo) "$WORK/log"; then ok "debug log without the PIN"; else bad "debug log without the PIN" "$(head "$WORK/log")"; fi

finish
