#!/usr/bin/env bash
# The module's OpenSSL never loads a configuration, provider or engine the host names (issue 29):
# a host whose OPENSSL_CONF activates a provider and an engine, as one configured for
# pkcs11-provider or libp11 with libkeyshare-pkcs11.so itself, runs the module in-process
# (KEYSHARE_IN_PROCESS=1) and through the agent. The provider is a marker
# (c/marker_provider.c): it logs which libcrypto initialised it and every use of its SHA-256,
# which the configuration makes the default context's preferred one and which fails when used;
# the engine is libp11's (engines-3/pkcs11.so, MODULE_PATH = this module, init = 0). A C host
# (c/confhost.c, system libcrypto, as openssl s_client) loads the configuration itself or not at
# all, then makes a token and digests, signs (EC, RSA-PSS), encrypts and draws random bytes
# through the module, and checks its own error queue is empty. Checked: every result right, the
# marker never initialised or used by the module or the agent (only by the host's libcrypto,
# when the host loads the configuration), and LD_DEBUG=files shows neither .so loaded by the
# module or the keyshare binary. Then openssl s_client does mutual TLS with the client key as a
# pkcs11: URI (libp11 engine) in-process with that configuration: the handshake completes, and
# s_client ends with status 0 and no error line. Run it with the bundled build and with
# `make OPENSSL=system`'s (the binaries in .build-system) to check both engines.
# Usage: 92-openssl-isolation.sh KEYSHARE MODULE. Ends with "N passed, M failed".
set -uo pipefail
KEYSHARE=$(realpath "${1:?keyshare binary}")
MODULE=$(realpath "${2:?module path}")
. "$(dirname "$0")/lib.sh"
. "$HERE/support/consumers.sh"
enter_sandbox "$@"
trap cleanup_consumers EXIT
ROOT=$(cd "$HERE/../.." && pwd)
export PATH="$(dirname "$KEYSHARE"):$PATH"
make_pki_and_token || { finish; exit 1; }
W=$WORK
# The C host's PINs: exported, never on a command line (env VAR=... would put them there).
export KS_TEST_PIN=$PIN KS_TEST_SO_PIN=$SOPIN
ENGINE=/usr/lib/x86_64-linux-gnu/engines-3/pkcs11.so

cc -O1 -Wall -Werror -shared -fPIC -o "$W/marker.so" "$ROOT/Tests/integration/c/marker_provider.c" &&
  cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$W/confhost" "$ROOT/Tests/integration/c/confhost.c" -ldl -lcrypto ||
  { bad "the marker provider and the C host compile"; finish; exit 1; }

# conf FILE PREFER: the host's configuration; PREFER=1 makes the marker's SHA-256 the default one.
conf() {
  {
    printf 'openssl_conf = conf_init\n[conf_init]\nproviders = provider_sect\n'
    [ "$2" = 1 ] && printf 'alg_section = alg_sect\n'
    [ -f "$ENGINE" ] && printf 'engines = engine_sect\n'
    printf '[provider_sect]\ndefault = default_sect\nmarker = marker_sect\n[default_sect]\nactivate = 1\n'
    printf '[marker_sect]\nmodule = %s\nactivate = 1\n' "$W/marker.so"
    [ "$2" = 1 ] && printf '[alg_sect]\ndefault_properties = ?provider=marker\n'
    [ -f "$ENGINE" ] && printf '[engine_sect]\npkcs11 = pkcs11_sect\n[pkcs11_sect]\ndynamic_path = %s\nMODULE_PATH = %s\ninit = 0\n' "$ENGINE" "$MODULE"
  } >"$1"
}
conf "$W/prefer.cnf" 1
conf "$W/plain.cnf" 0
[ -f "$ENGINE" ] || echo "note - $ENGINE missing (libengine-pkcs11-openssl): the engine part is not checked"

# loaded_by_keyshare DIR: LD_DEBUG lines where the marker or the engine was loaded by the module or
# a keyshare binary (empty when none).
loaded_by_keyshare() {
  grep -h "dynamically loaded by" "$1"/ld.* 2>/dev/null | grep -E "marker\.so|engines-3/pkcs11\.so" |
    grep -E "loaded by .*(libkeyshare-pkcs11\.so|/keyshare) " || true
}

# run_host MODE HOSTMODE: confhost with the preferring configuration and LD_DEBUG=files.
run_host() {
  local mode=$1 hm=$2 d="$W/$1-$2" out marks ld
  mkdir -p "$d"
  local env_mode=()
  [ "$mode" = in-process ] && env_mode=(KEYSHARE_IN_PROCESS=1)
  out=$(env "${env_mode[@]}" KS_MARKER_LOG="$d/marker.log" \
        OPENSSL_CONF="$W/prefer.cnf" LD_DEBUG=files LD_DEBUG_OUTPUT="$d/ld" timeout 180 "$W/confhost" "$MODULE" "$hm" 2>&1)
  echo "$out" | grep -E '^(ok|FAIL)' | sed "s/ - / - $mode, host $hm: /"
  PASS=$((PASS + $(echo "$out" | grep -c '^ok'))); FAIL=$((FAIL + $(echo "$out" | grep -c '^FAIL')))
  echo "$out" | tail -1 | grep -Eq '^[0-9]+ passed, 0 failed$' || bad "$mode, host $hm: the C host ran to its end" "$(echo "$out" | tail -3)"
  marks=$(grep -Ev "^init /(usr/)?lib/x86_64-linux-gnu/libcrypto\.so\.3$" "$d/marker.log" 2>/dev/null || true)
  if [ -z "$marks" ]; then
    ok "$mode, host $hm: the configured provider was never initialised or used by the module or the agent$(
      [ "$hm" = host ] && echo ' (only by the host'"'"'s libcrypto)')"
  else bad "$mode, host $hm: the configured provider stayed the host's" "$marks"; fi
  ld=$(loaded_by_keyshare "$d")
  if [ -z "$ld" ] && ls "$d"/ld.* >/dev/null 2>&1; then
    ok "$mode, host $hm: LD_DEBUG: neither the provider nor the engine was loaded by the module or keyshare"
  else bad "$mode, host $hm: LD_DEBUG: nothing loaded by the module or keyshare" "${ld:-no LD_DEBUG output}"; fi
}

for mode in in-process agent; do
  for hm in host quiet; do run_host "$mode" "$hm"; done
  [ "$mode" = agent ] && stop_agent "$XDG_RUNTIME_DIR"
done

# ---- openssl s_client, mutual TLS with the key as a pkcs11: URI, in-process, with the configuration
if need "openssl engine" openssl "$ENGINE"; then
  if serve "$W/s_server.log" openssl s_server -accept 127.0.0.1:@PORT@ -cert "$W/server.pem" -key "$W/server.key" \
      -CAfile "$W/ca.pem" -Verify 2 -verify_return_error -naccept 1 -www -tls1_3; then
    mkdir -p "$W/tls"
    : >"$W/tls/marker.log"
    rc=0
    out=$(printf 'GET / HTTP/1.0\r\n\r\n' | with_pin env KEYSHARE_IN_PROCESS=1 OPENSSL_CONF="$W/plain.cnf" \
          KS_MARKER_LOG="$W/tls/marker.log" LD_DEBUG=files LD_DEBUG_OUTPUT="$W/tls/ld" PKCS11_MODULE_PATH="$MODULE" \
          timeout 60 openssl s_client -quiet -ign_eof -connect "127.0.0.1:$PORT" -tls1_3 -CAfile "$W/ca.pem" \
          -verify_return_error -engine pkcs11 -keyform engine -key "$EC_KEY;pin-source=file:/dev/fd/3" \
          -cert "$W/client-ec.pem" 2>&1) || rc=$?
    if grep -q "Subject: CN=client-ec" <<<"$out" && wait_log "$W/s_server.log" "depth=0 CN = client-ec"; then
      ok "s_client in-process with OPENSSL_CONF naming a provider and the engine: mutual TLS with the token's key"
    else bad "s_client in-process with OPENSSL_CONF: mutual TLS with the token's key" "$(tail -8 <<<"$out"; cat "$W/s_server.log")"; fi
    errs=$(grep -Ei '(^|:)error|errno|failed' <<<"$out" | grep -v '^verify return' || true)
    if [ "$rc" -eq 0 ] && [ -z "$errs" ]; then ok "s_client ends with status 0 and reports no error"
    else bad "s_client ends with status 0 and reports no error" "status $rc; $errs"; fi
    ld=$(loaded_by_keyshare "$W/tls")
    marks=$(grep -Ev "^init /(usr/)?lib/x86_64-linux-gnu/libcrypto\.so\.3$" "$W/tls/marker.log" || true)
    if [ -z "$ld" ] && [ -z "$marks" ]; then ok "s_client: the module loaded neither the provider nor the engine (LD_DEBUG, marker)"
    else bad "s_client: the module loaded neither the provider nor the engine" "$ld $marks"; fi
    stop "$SERVER_PID"
  else bad "s_server starts" "$(cat "$W/s_server.log")"; fi
fi

check_no_secret_argv PIN SOPIN P12PASS
finish
