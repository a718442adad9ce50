#!/usr/bin/env bash
# keyshare trust: every row of Fixtures/testdata/trust.tsv, the ssl policy's
# host check, a garbage and a forged certificate, each verdict cross-checked
# with `openssl verify -no-CApath -no-CAstore` on the same inputs; keychain
# anchors; and the trust line of a PKCS #12 import.
set -u
KS=${1:?keyshare binary}
source "$(dirname "$0")/lib.sh"
new_home
export PIN=1234-user SOPIN=9876-so P12PASS=keyshare-test
W=$(mktemp -d)
ks() { "$KS" "$@"; }
CA="$FIXTURES/ca"

# verdict_of EXPECT -> the regex keyshare's first line must match, and the one openssl's output must match.
ks_re() {
  case $1 in
    proceed) echo "^proceed$" ;;
    expired) echo "^recoverable trust failure: .*expired" ;;
    "not yet valid") echo "^recoverable trust failure: .*not yet valid" ;;
    "missing intermediate") echo "^recoverable trust failure: .*missing intermediate" ;;
    "untrusted root") echo "^recoverable trust failure: .*untrusted root" ;;
    "hostname mismatch") echo "^recoverable trust failure: .*hostname mismatch" ;;
    invalid) echo "^invalid: " ;;
    fatal) echo "^fatal trust failure: " ;;
  esac
}
ossl_re() {
  case $1 in
    proceed) echo ": OK$" ;;
    expired) echo "certificate has expired" ;;
    "not yet valid") echo "certificate is not yet valid" ;;
    "missing intermediate") echo "unable to get local issuer certificate|unable to verify the first certificate" ;;
    "untrusted root") echo "self-signed certificate in certificate chain|self signed certificate in certificate chain" ;;
    "hostname mismatch") echo "hostname mismatch" ;;
    invalid) echo "[Uu]nable to load|Could not (read|find)|could not read" ;;
    fatal) echo "signature failure" ;;
  esac
}

# case NAME EXPECT CERT CHAIN ANCHORS DATE [HOST]: keyshare's verdict, then openssl's on the same inputs.
case_row() {
  local name=$1 expect=$2 cert=$3 chain=$4 anchors=$5 date=$6 host=${7:-}
  local args=(--anchors "$anchors") oargs=(-no-CApath -no-CAstore -CAfile "$anchors")
  [ -n "$chain" ] && { args+=(--chain "$chain"); oargs+=(-untrusted "$chain"); }
  [ -n "$date" ] && { args+=(--date "$date"); oargs+=(-attime "$(date -u -d "$date" +%s)"); }
  [ -n "$host" ] && { args+=(--policy ssl --host "$host"); oargs+=(-purpose sslserver -verify_hostname "$host"); }
  local out rc
  out=$(ks trust evaluate "$cert" "${args[@]}" 2>&1) && rc=0 || rc=$?
  local want_rc=2
  case $expect in proceed) want_rc=0 ;; fatal) want_rc=4 ;; invalid) want_rc=5 ;; esac
  if [ "$rc" -eq "$want_rc" ] && head -1 <<<"$out" | grep -Eq "$(ks_re "$expect")"; then ok "$name: keyshare says $expect"
  else bad "$name: keyshare says $expect" "exit $rc: $out"; fi
  local oout
  oout=$(openssl verify "${oargs[@]}" "$cert" 2>&1)
  if grep -Eq "$(ossl_re "$expect")" <<<"$oout"; then ok "$name: openssl verify agrees"
  else bad "$name: openssl verify agrees" "$oout"; fi
}

# The fixture table (empty fields are meaningful, so split on tabs with awk).
n=0
while IFS='|' read -r cert chain anchors date expect; do
  n=$((n + 1))
  case_row "trust.tsv row $n ($expect)" "$expect" "$FIXTURES/$cert" "${chain:+$FIXTURES/$chain}" "$FIXTURES/$anchors" "$date"
done < <(awk -F'\t' 'NR > 1 && NF >= 5 { print $1 "|" $2 "|" $3 "|" $4 "|" $5 }' "$FIXTURES/trust.tsv")
[ "$n" -ge 5 ] && ok "trust.tsv has $n rows" || bad "trust.tsv has $n rows"

# --date re-evaluates: the leaf that is expired in 2041 is valid in 2030.
case_row "expired leaf, date inside validity" proceed "$FIXTURES/identities/signature-ds-nr.cert.pem" "$CA/intermediate-ca.pem" \
  "$CA/root-ca.pem" "2030-01-01T00:00:00Z"

# The ssl policy: a TLS server certificate issued by the fixture intermediate.
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/srv.key" -subj "/CN=server.keyshare.test" \
  -out "$W/srv.csr" 2>/dev/null
printf 'subjectAltName=DNS:server.keyshare.test\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n' >"$W/ext"
openssl x509 -req -in "$W/srv.csr" -CA "$CA/intermediate-ca.pem" -CAkey "$CA/intermediate-ca.key.pem" -set_serial 4242 \
  -days 365 -extfile "$W/ext" -out "$W/srv.pem" 2>/dev/null
case_row "ssl, right host" proceed "$W/srv.pem" "$CA/intermediate-ca.pem" "$CA/root-ca.pem" "" server.keyshare.test
case_row "ssl, wrong host" "hostname mismatch" "$W/srv.pem" "$CA/intermediate-ca.pem" "$CA/root-ca.pem" "" wrong.example.org

# Garbage and a forged signature.
head -c 700 /dev/urandom >"$W/garbage.pem"
case_row "garbage certificate" invalid "$W/garbage.pem" "" "$CA/root-ca.pem" ""
python3 - "$W/srv.pem" "$W/forged.pem" <<'EOF'
import base64, sys
text = open(sys.argv[1]).read()
b64 = "".join(l for l in text.splitlines() if not l.startswith("-----"))
der = bytearray(base64.b64decode(b64)); der[-5] ^= 0x01   # inside the signature value
out = base64.encodebytes(bytes(der)).decode()
open(sys.argv[2], "w").write("-----BEGIN CERTIFICATE-----\n" + out + "-----END CERTIFICATE-----\n")
EOF
case_row "forged signature" fatal "$W/forged.pem" "$CA/intermediate-ca.pem" "$CA/root-ca.pem" ""
check_fail "bad --date" "ISO 8601" ks trust evaluate "$W/srv.pem" --date yesterday
check_fail "missing certificate file" "cannot read" ks trust evaluate "$W/nope.pem"
any_rc() { "$@"; true; }
check_out "json verdict (exit 2 is the verdict, not an error)" '"result" : "recoverable"' any_rc ks trust evaluate "$FIXTURES/identities/device-ds-ke.cert.pem" \
  --anchors "$CA/root-ca.pem" --json

# Keychain anchors (CKA_TRUSTED) and the system bundle.
check_out "token create" "created token" ks token create --label trust --pin-source env:PIN --so-pin-source env:SOPIN
check_out "no anchors yet" "no trusted certificates" ks trust anchor list
check_out "import reports untrusted root, import succeeds" "imported identity.*trust: recoverable trust failure: untrusted root" \
  ks import "$FIXTURES/identities/device-ds-ke.modern.p12" --pin-source env:PIN --password-source env:P12PASS
check_out "anchor add" "trusted CN=Keyshare Test Root CA 1" ks trust anchor add "$CA/root-ca.pem" --so-pin-source env:SOPIN
check_out "anchor list" "Keyshare Test Root CA 1" ks trust anchor list
check_out "keychain chain + anchor: proceed" "^proceed" ks trust evaluate "$FIXTURES/identities/device-ds-ke.cert.pem"
check_out "import now reports proceed" "trust: proceed" \
  ks import "$FIXTURES/identities/signature-ds-email.modern.p12" --pin-source env:PIN --password-source env:P12PASS
check_out "anchor remove" "no longer trusted" ks trust anchor remove "$CA/root-ca.pem" --so-pin-source env:SOPIN
check_fail "anchor remove twice" "not a trusted certificate" ks trust anchor remove "$CA/root-ca.pem" --so-pin-source env:SOPIN
out=$(ks trust evaluate "$FIXTURES/identities/device-ds-ke.cert.pem" 2>&1) && rc=0 || rc=$?
[ "$rc" -eq 2 ] && grep -q "untrusted root" <<<"$out" && ok "after removal: untrusted root" || bad "after removal: untrusted root" "$out"
out=$(ks trust evaluate "$FIXTURES/identities/device-ds-ke.cert.pem" --anchors system 2>&1) && rc=0 || rc=$?
[ "$rc" -eq 2 ] && ok "system bundle does not trust the test root" || bad "system bundle does not trust the test root" "$out"
rm -rf "$W"
finish
