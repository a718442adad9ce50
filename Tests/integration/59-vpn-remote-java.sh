#!/usr/bin/env bash
# More real consumers of the token: OpenVPN (--show-pkcs11-ids, and a TLS
# client/server pair whose client key is in the token, PIN over the management
# socket), p11-kit's RPC remoting (`p11-kit server` + p11-kit-client.so: raw
# signatures with pkcs11-tool, TLS 1.3 client auth and ssh-keygen -D through
# it, the socket out of other users' reach), and Java's SunPKCS11 (keytool
# -list, jarsigner sign and verify). Servers run in a private network
# namespace on 127.0.0.1, every process is stopped by PID (trap).
# Usage: 59-vpn-remote-java.sh KEYSHARE MODULE. Ends with "N passed, M failed, K xfail".
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
openssl x509 -in "$W/client-rsa.pem" -pubkey -noout > "$W/client-rsa.spki"
openssl x509 -in "$W/client-ec.pem" -pubkey -noout > "$W/client-ec.spki"

# ---- OpenVPN -------------------------------------------------------------------
# A point-to-point TLS pair over UDP on 127.0.0.1 with --dev null: the whole
# control channel (TLS with the client's token key, the server requiring and
# verifying the client certificate) and the data channel's keepalives, without
# a tun device (two tun ends in one namespace would route to each other
# locally, so a tun "tunnel" here would test nothing the token takes part in).
openvpn_tunnel() {
  local cn=$1 id=$2 name="openvpn --pkcs11-providers MODULE --pkcs11-id (client $1 in the token), PIN over the management socket"
  if ! serve "$W/ovpn-server.log" openvpn --dev null --proto udp --local 127.0.0.1 --lport @PORT@ --tls-server --dh none \
      --ca "$W/ca.pem" --cert "$W/server.pem" --key "$W/server.key" --verify-client-cert require --ping 1 --verb 3; then
    bad "$name: server starts" "$(tail -5 "$W/ovpn-server.log")"; return
  fi
  local server=$SERVER_PID
  rm -f "$W/ovpn.mgmt"
  spawn "$W/ovpn-client.log" openvpn --dev null --proto udp --nobind --remote 127.0.0.1 "$PORT" --tls-client \
    --ca "$W/ca.pem" --remote-cert-tls server --pkcs11-providers "$MODULE" --pkcs11-id "$id" \
    --management "$W/ovpn.mgmt" unix --management-query-passwords --management-hold --ping 1 --verb 3
  local client=$SPAWNED mgmt
  mgmt=$(KS_TEST_PIN=$PIN "${TO[@]}" python3 "$HERE/support/openvpn-mgmt.py" "$W/ovpn.mgmt" 15 2>&1)
  if [ $? -eq 0 ] && wait_log "$W/ovpn-server.log" "VERIFY OK: depth=0, CN=$cn" \
      && wait_log "$W/ovpn-server.log" "Initialization Sequence Completed" && wait_log "$W/ovpn-client.log" "Initialization Sequence Completed"; then
    ok "$name"
  else
    bad "$name" "$(tail -3 <<<"$mgmt"; grep -E 'VERIFY|Initialization|rror|PKCS' "$W/ovpn-server.log" "$W/ovpn-client.log" | tail -8)"
  fi
  stop "$client" "$server"
}
if need OpenVPN openvpn python3; then
  "${TO[@]}" openvpn --show-pkcs11-ids "$MODULE" > "$W/ids" 2>&1
  rsa_vpn_id=$(awk '/DN: *CN=client-rsa/{f=1} f && /Serialized id:/{print $3; exit}' "$W/ids")
  ec_vpn_id=$(awk '/DN: *CN=client-ec/{f=1} f && /Serialized id:/{print $3; exit}' "$W/ids")
  # The serialized id ends with the CKA_ID (upper-case hex).
  if [[ ${rsa_vpn_id,,} == */t/$RSA_ID && ${ec_vpn_id,,} == */t/$EC_ID ]]; then
    ok "openvpn --show-pkcs11-ids MODULE lists both identities (token T, their CKA_IDs)"
  else bad "openvpn --show-pkcs11-ids MODULE lists both identities" "$(cat "$W/ids")"; fi
  openvpn_tunnel client-rsa "$rsa_vpn_id"
  openvpn_tunnel client-ec "$ec_vpn_id"
fi

# ---- p11-kit server / p11-kit-client.so ---------------------------------------
CLIENT_SO=$(pkg-config --variable=p11_module_path p11-kit-1 2>/dev/null || echo /usr/lib/x86_64-linux-gnu/pkcs11)/p11-kit-client.so
if need "p11-kit remoting" p11-kit pkcs11-tool "$CLIENT_SO"; then
  # The socket's directory is 0700 (as $XDG_RUNTIME_DIR/p11-kit is): only its owner reaches the socket.
  mkdir -m 700 "$W/p11"
  SOCK=$W/p11/server.sock
  spawn "$W/p11-kit-server.log" p11-kit server -f -p "$MODULE" -n "$SOCK" 'pkcs11:token=T'
  P11_PID=$SPAWNED
  for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
  export P11_KIT_SERVER_ADDRESS=unix:path=$SOCK
  R=("${TO[@]}" pkcs11-tool --module "$CLIENT_SO")
  check_out "pkcs11-tool -L through p11-kit-client.so shows token T" 'token label *: T$' "${R[@]}" -L
  RL=("${R[@]}" --token-label T --login --pin env:PIN)
  echo "remote data" > "$W/data"; openssl dgst -sha256 -binary "$W/data" > "$W/data.sha256"
  if "${RL[@]}" --sign -m RSA-PKCS --id "$RSA_ID" -i "$W/data" -o "$W/rpc.rsa" >/dev/null 2>&1 \
      && openssl pkeyutl -verifyrecover -pubin -inkey "$W/client-rsa.spki" -in "$W/rpc.rsa" 2>/dev/null | cmp -s - "$W/data"; then
    ok "CKM_RSA_PKCS signature through the RPC verifies"
  else bad "CKM_RSA_PKCS signature through the RPC verifies" "$("${RL[@]}" --sign -m RSA-PKCS --id "$RSA_ID" -i "$W/data" -o "$W/rpc.rsa" 2>&1)"; fi
  if "${RL[@]}" --sign -m ECDSA --id "$EC_ID" --signature-format openssl -i "$W/data.sha256" -o "$W/rpc.ec" >/dev/null 2>&1 \
      && openssl pkeyutl -verify -pubin -inkey "$W/client-ec.spki" -in "$W/data.sha256" -sigfile "$W/rpc.ec" >/dev/null 2>&1; then
    ok "CKM_ECDSA (on a SHA-256 digest) through the RPC verifies"
  else bad "CKM_ECDSA (on a SHA-256 digest) through the RPC verifies" "$("${RL[@]}" --sign -m ECDSA --id "$EC_ID" -i "$W/data.sha256" -o "$W/rpc.ec" 2>&1)"; fi
  if "${RL[@]}" --sign -m RSA-PKCS-PSS --hash-algorithm SHA256 --mgf MGF1-SHA256 --salt-len 32 --id "$RSA_ID" \
        -i "$W/data.sha256" -o "$W/rpc.pss" >/dev/null 2>&1 \
      && openssl pkeyutl -verify -pubin -inkey "$W/client-rsa.spki" -pkeyopt rsa_padding_mode:pss -pkeyopt digest:sha256 \
        -pkeyopt rsa_pss_saltlen:32 -in "$W/data.sha256" -sigfile "$W/rpc.pss" >/dev/null 2>&1; then
    ok "CKM_RSA_PKCS_PSS (parameters: SHA-256, MGF1-SHA256, salt 32) through the RPC verifies"
  else bad "CKM_RSA_PKCS_PSS through the RPC verifies" "$("${RL[@]}" --sign -m RSA-PKCS-PSS --hash-algorithm SHA256 --mgf MGF1-SHA256 --salt-len 32 --id "$RSA_ID" -i "$W/data.sha256" -o "$W/rpc.pss" 2>&1)"; fi
  # p11-kit 0.24.1's RPC serializes mechanism parameters only for the mechanisms
  # it knows; it refuses the hash-and-sign ones itself (the module never sees
  # C_SignInit). The module does them directly (first check of each pair).
  for pair in "ECDSA-SHA256:$EC_ID" "SHA256-RSA-PKCS-PSS:$RSA_ID"; do
    mech=${pair%%:*}; id=${pair#*:}
    extra=(); [ "$mech" = SHA256-RSA-PKCS-PSS ] && extra=(--mgf MGF1-SHA256 --salt-len 32)
    check "$mech directly against the module" timeout 20 pkcs11-tool --module "$MODULE" --token-label T --login --pin env:PIN \
      --sign -m "$mech" "${extra[@]}" --id "$id" -i "$W/data" -o "$W/direct.sig"
    check_xfail "$mech through p11-kit 0.24.1 RPC" "refused by p11-kit's RPC layer (CKR_MECHANISM_INVALID, 0x70), not by keyshare" \
      'C_SignInit failed: rv = CKR_MECHANISM_INVALID \(0x70\)' "${RL[@]}" --sign -m "$mech" "${extra[@]}" --id "$id" -i "$W/data" -o "$W/rpc.sig"
  done
  # TLS 1.3 client auth with the libp11 engine over the RPC.
  for who in client-rsa:"$RSA_KEY" client-ec:"$EC_KEY"; do
    cn=${who%%:*}; key=${who#*:}
    if serve "$W/s_server.log" openssl s_server -accept 127.0.0.1:@PORT@ -cert "$W/server.pem" -key "$W/server.key" \
        -CAfile "$W/ca.pem" -Verify 2 -verify_return_error -naccept 1 -www -tls1_3; then
      check_out "TLS 1.3 client auth through p11-kit-client.so (openssl engine, $cn)" "Subject: CN=$cn" bash -c '
        printf "GET / HTTP/1.0\r\n\r\n" | PKCS11_MODULE_PATH="$1" timeout 20 openssl s_client -quiet -ign_eof -connect "127.0.0.1:$2" \
          -tls1_3 -CAfile "$3" -verify_return_error -engine pkcs11 -keyform engine -key "$4;pin-source=file:/dev/fd/3" -cert "$5" \
          3< <(printf "%s" "$PIN")' _ "$CLIENT_SO" "$PORT" "$W/ca.pem" "$key" "$W/$cn.pem"
      stop "$SERVER_PID"
    else bad "s_server starts (RPC TLS)" "$(cat "$W/s_server.log")"; fi
  done
  check_out "ssh-keygen -D p11-kit-client.so lists the token's keys" '^ecdsa-sha2-nistp256 ' timeout 20 ssh-keygen -D "$CLIENT_SO"
  # Another user cannot connect: the directory is 0700, and p11-kit makes the
  # socket connectable by its owner only (-u/-g would hand it to a user/group).
  if getent passwd 1000 >/dev/null && command -v setpriv >/dev/null; then
    other=$(setpriv --reuid=1000 --regid=1000 --clear-groups env -i PATH="$PATH" P11_KIT_SERVER_ADDRESS="$P11_KIT_SERVER_ADDRESS" \
      timeout 20 pkcs11-tool --module "$CLIENT_SO" -L 2>&1)
    if grep -q 'No slots' <<<"$other" && ! grep -q 'token label' <<<"$other"; then
      ok "another user cannot reach the p11-kit server socket (0700 directory, owner-only socket)"
    else bad "another user cannot reach the p11-kit server socket" "$other"; fi
  else echo "note - no uid 1000: the other-user check of the p11-kit socket is not run"; fi
  unset P11_KIT_SERVER_ADDRESS
  stop "$P11_PID"
fi

# ---- Java SunPKCS11 -----------------------------------------------------------
if need "Java SunPKCS11" keytool jarsigner jar; then
  printf 'name = keyshare\nlibrary = %s\nslotListIndex = 0\n' "$MODULE" > "$W/sunpkcs11.cfg"
  J=(-keystore NONE -storetype PKCS11 -providerClass sun.security.pkcs11.SunPKCS11 -providerArg "$W/sunpkcs11.cfg" -storepass:env PIN)
  RSA_ALIAS=$(python3 -c 'import json,sys; print(next(i["label"] for i in json.load(open(sys.argv[1])) if i.get("subject")=="CN=client-rsa"))' "$W/list.json")
  EC_ALIAS=$(python3 -c 'import json,sys; print(next(i["label"] for i in json.load(open(sys.argv[1])) if i.get("subject")=="CN=client-ec"))' "$W/list.json")
  list=$(timeout 60 keytool -list "${J[@]}" 2>&1)
  if grep -q "^$RSA_ALIAS, PrivateKeyEntry" <<<"$list" && grep -q "^$EC_ALIAS, PrivateKeyEntry" <<<"$list"; then
    ok "keytool -list (SunPKCS11, -storepass:env) shows both identities as PrivateKeyEntry"
  else bad "keytool -list (SunPKCS11) shows both identities" "$list"; fi
  export TRUSTPASS=trust-$RANDOM$RANDOM
  keytool -importcert -noprompt -alias test-ca -file "$W/ca.pem" -keystore "$W/trust.p12" -storetype PKCS12 -storepass:env TRUSTPASS >/dev/null 2>&1
  echo "signed by the token" > "$W/hello.txt"
  for alias in "$RSA_ALIAS:client-rsa" "$EC_ALIAS:client-ec"; do
    a=${alias%%:*}; cn=${alias#*:}
    (cd "$W" && jar cf "$W/$cn.jar" hello.txt)
    # jarsigner -verify -keystore wants the signer's certificate in that keystore too.
    keytool -importcert -noprompt -alias "$cn" -file "$W/$cn.pem" -keystore "$W/trust.p12" -storetype PKCS12 -storepass:env TRUSTPASS >/dev/null 2>&1
    check "jarsigner signs a jar with the token's $cn key" timeout 60 jarsigner "${J[@]}" "$W/$cn.jar" "$a"
    # -strict: signer errors (chain, key usage, keystore) fail; the test CA is the trust anchor.
    check_out "jarsigner -verify -strict ($cn, chain to the test CA)" 'jar verified' timeout 60 jarsigner -verify -strict \
      -keystore "$W/trust.p12" -storetype PKCS12 -storepass:env TRUSTPASS "$W/$cn.jar"
  done
fi

echo "note - 59-vpn-remote-java took $((SECONDS - T0)) s${IN_NETNS:+ (private network namespace)}"
check_no_secret_argv PIN SOPIN P12PASS TRUSTPASS
finish_consumers
