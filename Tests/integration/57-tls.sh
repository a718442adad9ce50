#!/usr/bin/env bash
# Mutual TLS with the client key in a keyshare token, as people really do it:
# OpenSSL s_server/s_client through the libp11 engine (TLS 1.3 and 1.2, RSA
# PKCS #1, RSA-PSS and ECDSA client signatures), curl with the key (and the
# certificate) from the token, GnuTLS gnutls-serv/gnutls-cli with pkcs11: URIs
# (--provider), and NSS selfserv/tstclnt after modutil -add. Each server checks
# the client certificate (it refuses a client without one) and reports the
# subject it saw. Servers run in a private network namespace on 127.0.0.1 and
# are stopped by PID. PINs: libp11 pin-source on fd 3, GNUTLS_PIN, an NSS pin
# file (0600 in the test's 0700 directory): never on a command line.
# Usage: 57-tls.sh KEYSHARE MODULE. Ends with "N passed, M failed, K xfail".
set -uo pipefail
KEYSHARE=$(realpath "${1:?keyshare binary}")
MODULE=$(realpath "${2:?module path}")
. "$(dirname "$0")/lib.sh"
. "$HERE/support/consumers.sh"
enter_sandbox "$@"
trap cleanup_consumers EXIT
T0=$SECONDS
make_pki_and_token || { finish_consumers; exit 1; }
W=$WORK
TO=(timeout 20)

# ---- OpenSSL s_server / s_client, libp11 engine -----------------------------
# openssl_mtls PROTO SIGALG CN KEY: s_server asks for a client certificate
# signed by the test CA (-Verify, -verify_return_error) and only accepts
# SIGALG for the client's CertificateVerify; its -www page names the client
# certificate and the signature it checked.
openssl_mtls() {
  local proto=$1 sigalg=$2 cn=$3 key=$4 name="openssl s_client $1 client key $3 in the token ($2)"
  local type=${sigalg%%+*}; [ "$type" = RSA ] && type='RSA$'
  if ! serve "$W/s_server.log" openssl s_server -accept 127.0.0.1:@PORT@ -cert "$W/server.pem" -key "$W/server.key" \
      -CAfile "$W/ca.pem" -Verify 2 -verify_return_error -naccept 1 -www -"$proto" -client_sigalgs "$sigalg"; then
    bad "$name: s_server starts" "$(cat "$W/s_server.log")"; return
  fi
  local out
  out=$(printf 'GET / HTTP/1.0\r\n\r\n' | with_pin env PKCS11_MODULE_PATH="$MODULE" "${TO[@]}" openssl s_client -quiet -ign_eof \
      -connect "127.0.0.1:$PORT" -"$proto" -CAfile "$W/ca.pem" -verify_return_error \
      -engine pkcs11 -keyform engine -key "$key;pin-source=file:/dev/fd/3" -cert "$W/$cn.pem" 2>&1)
  local v=${proto#tls}; v=TLSv${v/_/.}
  if grep -q "Subject: CN=$cn" <<<"$out" && grep -q "Protocol  : $v" <<<"$out" && grep -Eq "Peer signature type: $type" <<<"$out" \
      && wait_log "$W/s_server.log" "depth=0 CN = $cn" && grep -q '^verify return:1' "$W/s_server.log"; then
    ok "$name"
  else
    bad "$name" "$(grep -E 'Subject:|Protocol|Peer sig|error|rror' <<<"$out" | head -8; cat "$W/s_server.log")"
  fi
  stop "$SERVER_PID"
}
if need "openssl engine" openssl /usr/lib/x86_64-linux-gnu/engines-3/pkcs11.so; then
  openssl_mtls tls1_3 RSA-PSS+SHA256 client-rsa "$RSA_KEY"
  openssl_mtls tls1_3 ECDSA+SHA256 client-ec "$EC_KEY"
  openssl_mtls tls1_2 RSA+SHA256 client-rsa "$RSA_KEY"
  openssl_mtls tls1_2 RSA-PSS+SHA384 client-rsa "$RSA_KEY"
  openssl_mtls tls1_2 ECDSA+SHA384 client-ec "$EC_KEY"
  # The server really requires the certificate: without the token key the handshake fails.
  if serve "$W/s_server.log" openssl s_server -accept 127.0.0.1:@PORT@ -cert "$W/server.pem" -key "$W/server.key" \
      -CAfile "$W/ca.pem" -Verify 2 -verify_return_error -naccept 1 -www -tls1_3; then
    printf 'GET / HTTP/1.0\r\n\r\n' | "${TO[@]}" openssl s_client -quiet -ign_eof -connect "127.0.0.1:$PORT" -tls1_3 \
      -CAfile "$W/ca.pem" >"$W/nocert.out" 2>&1
    if ! grep -q "Subject: CN=client" "$W/nocert.out" && wait_log "$W/s_server.log" "did not return a certificate|certificate required"; then
      ok "s_server refuses a client without a certificate (the checks above can fail)"
    else bad "s_server refuses a client without a certificate" "$(cat "$W/nocert.out" "$W/s_server.log" | tail -8)"; fi
    stop "$SERVER_PID"
  else bad "s_server starts (no-certificate case)" "$(cat "$W/s_server.log")"; fi
fi

# ---- curl ------------------------------------------------------------------
# curl_mtls CN KEY CERT-ARGS...: curl 7.88 (OpenSSL) loads the key through the engine.
curl_mtls() {
  local cn=$1 key=$2 what=$3; shift 3
  if ! serve "$W/s_server.log" openssl s_server -accept 127.0.0.1:@PORT@ -cert "$W/server.pem" -key "$W/server.key" \
      -CAfile "$W/ca.pem" -Verify 2 -verify_return_error -naccept 1 -www; then
    bad "curl: s_server starts" "$(cat "$W/s_server.log")"; return
  fi
  check_out "curl --engine pkcs11 --key-type ENG, client key $cn in the token, certificate $what" "Subject: CN=$cn" \
    with_pin env PKCS11_MODULE_PATH="$MODULE" "${TO[@]}" curl -sS --cacert "$W/ca.pem" \
      --engine pkcs11 --key-type ENG --key "$key;pin-source=file:/dev/fd/3" "$@" "https://127.0.0.1:$PORT/"
  stop "$SERVER_PID"
}
if need curl curl; then
  curl_mtls client-ec "$EC_KEY" "from a file" --cert "$W/client-ec.pem"
  curl_mtls client-rsa "$RSA_KEY" "from the token (--cert-type ENG)" --cert-type ENG --cert "$RSA_CERT"
fi

# ---- GnuTLS ------------------------------------------------------------------
# gnutls-serv binds every address, so it runs only in the private namespace;
# outside one the same client is checked against s_server on 127.0.0.1.
gnutls_mtls() {
  local prio=$1 cn=$2 key=$3 cert=$4 sig=$5 name="gnutls-cli $1 --provider MODULE, key and certificate of $2 as pkcs11: URIs"
  if [ -n "$IN_NETNS" ]; then
    serve "$W/gserv.log" gnutls-serv --port @PORT@ --x509certfile "$W/server.pem" --x509keyfile "$W/server.key" \
      --x509cafile "$W/ca.pem" --require-client-cert --verify-client-cert --http
  else
    serve "$W/gserv.log" openssl s_server -accept 127.0.0.1:@PORT@ -cert "$W/server.pem" -key "$W/server.key" \
      -CAfile "$W/ca.pem" -Verify 2 -verify_return_error -naccept 1 -www
  fi || { bad "$name: server starts" "$(cat "$W/gserv.log")"; return; }
  local v=${prio##*+VERS-} out
  out=$(printf 'GET / HTTP/1.0\r\n\r\n' | GNUTLS_PIN=$PIN "${TO[@]}" gnutls-cli --provider "$MODULE" --priority "$prio" \
        --x509cafile "$W/ca.pem" --x509keyfile "$key" --x509certfile "$cert" -p "$PORT" 127.0.0.1 2>&1)
  # The page names the protocol and the client certificate; gnutls-serv logs the client's signature.
  if grep -Eq "Protocol version:(</TD><TD>|\s*)$v|Protocol  : ${v/TLS/TLSv}" <<<"$out" && grep -q "Subject: CN=$cn" <<<"$out" \
      && { [ -z "$IN_NETNS" ] || wait_log "$W/gserv.log" "Client Signature: $sig\$"; }; then
    ok "$name"
  else
    bad "$name" "$(grep -E 'Protocol|Subject: CN|rror|\*\*\*' <<<"$out" | head -10; grep -E 'Signature|rror' "$W/gserv.log" | head -4)"
  fi
  stop "$SERVER_PID"
}
if need gnutls gnutls-cli gnutls-serv; then
  gnutls_mtls "NORMAL:-VERS-ALL:+VERS-TLS1.3" client-rsa "$RSA_KEY" "$RSA_CERT" RSA-PSS-RSAE-SHA256
  gnutls_mtls "NORMAL:-VERS-ALL:+VERS-TLS1.3" client-ec "$EC_KEY" "$EC_CERT" ECDSA-SECP256R1-SHA256
  gnutls_mtls "NORMAL:-VERS-ALL:+VERS-TLS1.2" client-rsa "$RSA_KEY" "$RSA_CERT" RSA-SHA256
  gnutls_mtls "NORMAL:-VERS-ALL:+VERS-TLS1.2" client-ec "$EC_KEY" "$EC_CERT" ECDSA-SHA256
fi

# ---- NSS -----------------------------------------------------------------------
# The client's NSS database loads the module with modutil; tstclnt presents the
# token's certificate by nickname "T:<label>" (the pin file is 0600 in $WORK,
# which is 0700 and removed by the trap). selfserv binds every address, so it
# runs only in the private namespace; outside one tstclnt talks to s_server.
nss_mtls() {
  local v=$1 cn=$2 nick=$3 name="NSS tstclnt $1 -n 'T:<label of $2>' after modutil -add"
  if [ -n "$IN_NETNS" ]; then
    serve "$W/selfserv.log" selfserv -d "sql:$W/nss-server" -p @PORT@ -n server -rr -V "$v:$v" -v
  else
    serve "$W/selfserv.log" openssl s_server -accept 127.0.0.1:@PORT@ -cert "$W/server.pem" -key "$W/server.key" \
      -CAfile "$W/ca.pem" -Verify 2 -verify_return_error -naccept 1 -www
  fi || { bad "$name: server starts" "$(cat "$W/selfserv.log")"; return; }
  local out seen
  out=$(printf 'GET / HTTP/1.0\r\n\r\n' | "${TO[@]}" tstclnt -h 127.0.0.1 -p "$PORT" -d "sql:$W/nss-client" -n "T:$nick" \
        -W "$W/nss-pin" -V "$v:$v" -Q -v 2>&1)
  local sslv=3.4; [ "$v" = tls1.2 ] && sslv=3.3
  if [ -n "$IN_NETNS" ]; then seen="subject DN: CN=$cn"; else seen="depth=0 CN = $cn"; fi
  if grep -q "SSL version $sslv" <<<"$out" && wait_log "$W/selfserv.log" "$seen"; then
    ok "$name"
  else
    bad "$name" "$(grep -E 'SSL version|rror|Failed' <<<"$out" | head -6; grep -Ei 'subject|error|valid' "$W/selfserv.log" | head -6)"
  fi
  stop "$SERVER_PID"
}
if need NSS certutil modutil pk12util selfserv tstclnt; then
  mkdir -m 700 "$W/nss-client" "$W/nss-server"
  ( umask 077; printf '%s\n' "$PIN" > "$W/nss-pin"; printf '\n' > "$W/nss-empty"; printf '%s' "$P12PASS" > "$W/nss-p12pass" )
  certutil -N -d "sql:$W/nss-client" --empty-password && certutil -N -d "sql:$W/nss-server" --empty-password
  openssl pkcs12 -export -inkey "$W/server.key" -in "$W/server.pem" -name server -passout env:P12PASS -out "$W/server.p12"
  pk12util -i "$W/server.p12" -d "sql:$W/nss-server" -w "$W/nss-p12pass" -k "$W/nss-empty" >/dev/null
  certutil -A -d "sql:$W/nss-server" -n ca -t CT,, -a -i "$W/ca.pem"
  certutil -A -d "sql:$W/nss-client" -n ca -t CT,, -a -i "$W/ca.pem"
  check "modutil -add keyshare -libfile MODULE" bash -c "echo | modutil -force -dbdir 'sql:$W/nss-client' -add keyshare -libfile '$MODULE'"
  RSA_NICK=$(python3 -c 'import json,sys; print(next(i["label"] for i in json.load(open(sys.argv[1])) if i.get("subject")=="CN=client-rsa"))' "$W/list.json")
  EC_NICK=$(python3 -c 'import json,sys; print(next(i["label"] for i in json.load(open(sys.argv[1])) if i.get("subject")=="CN=client-ec"))' "$W/list.json")
  check_out "certutil -L -h T lists the token's certificates" "T:$RSA_NICK" certutil -L -d "sql:$W/nss-client" -h T -f "$W/nss-pin"
  nss_mtls tls1.3 client-rsa "$RSA_NICK"
  nss_mtls tls1.3 client-ec "$EC_NICK"
  nss_mtls tls1.2 client-rsa "$RSA_NICK"
  nss_mtls tls1.2 client-ec "$EC_NICK"
fi

echo "note - 57-tls took $((SECONDS - T0)) s${IN_NETNS:+ (private network namespace)}"
check_no_secret_argv PIN SOPIN P12PASS
finish_consumers
