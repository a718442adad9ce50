#!/usr/bin/env bash
# Key sharing 2025 end to end: the share tree against expected-tree.json, the
# files it serves (openssl, unzip), the password service and its access control,
# and the consumer side: a second store imports a shared zip with the password
# fetched over the socket and signs with the imported key through the module.
set -u
KS=${1:?keyshare binary}
MOD=${2:-}
source "$(dirname "$0")/lib.sh"
new_home
PROVIDER=$KEYSHARE_HOME
export PIN=1234-user SOPIN=9876-so WRONG=nope
T=$(mktemp -d /tmp/keyshare-share.XXXXXX)
chmod 755 "$T"
# A copy the other uid below can read: the checkout itself may be private (mktemp -d is 0700).
CLIENT="$T/share_client.py"
cp "$HERE/share_client.py" "$CLIENT"; chmod 644 "$CLIENT"
ks() { "$KS" "$@"; }
SERVE_PID=
cleanup() { [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null; chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT

check_out "provider token" "created token" ks token create --label provider --pin-source env:PIN --so-pin-source env:SOPIN
n=0
while IFS=$'\t' read -r kind path pw _ share _; do
  [ "$kind" = p12 ] && [ "$share" = share ] || continue
  P12PW=$pw ks import "$FIXTURES/$path" --pin-source env:PIN --password-source env:P12PW >/dev/null && n=$((n + 1))
done < <(grep -v '^#' "$FIXTURES/manifest.tsv")
[ "$n" = 11 ] && ok "imported the 11 share identities" || bad "imported the 11 share identities" "$n"

# The tree, default and per selector, against expected-tree.json.
ks share list --pin-source env:PIN --json >"$T/list.json" 2>"$T/err" && ok "share list --json" || bad "share list --json" "$(cat "$T/err")"
tree_check() {  # tree_check NAME PYTHON-EXPR-OVER-l-AND-e
  if python3 - "$T/list.json" "$FIXTURES/expected-tree.json" "$2" <<'PY'
import json, sys
l = json.load(open(sys.argv[1])); e = json.load(open(sys.argv[2]))
sys.exit(0 if eval(sys.argv[3]) else 1)
PY
  then ok "$1"; else bad "$1"; fi
}
tree_check "root matches expected-tree.json" "[i['fileName'] for i in l['root']] == e['root']"
tree_check "seven folders match" "{f['fileName']: [i['fileName'] for i in f['items']] for f in l['folders']} == e['folders']"
tree_check "seven zips match" "{z['fileName']: z['entries'] for z in l['zips']} == e['zips']"
tree_check "root identifiers are labels, type pkcs-12" "all(len(i['identifier']) == 64 and i['type'] == 'purebred2025.rsa.pkcs-12' for i in l['root'])"
tree_check "folder item identifiers and -p12 types" "all(i['identifier'] == f['fileName'] + '.' + i['identifier'].split('.', 1)[1] and i['type'] == f['type'] + '-p12' for f in l['folders'] for i in f['items'])"
tree_check "leading-zero serial 8E2F55A1 (DER 00 8E..)" "any(i['serial'] == '8E2F55A1' and i['fileName'] == 'piv_8E2F55A1.p12' for i in l['root'])"
tree_check "p12 dates are notBefore in UTC" "[i['date'] for i in l['root'] if i['fileName'] == 'signature_01.p12'] == ['2025-02-03T12:00:00Z']"
tree_check "every file has a size" "all(i['size'] > 1000 for i in l['root'] + l['zips']) and all(i['size'] > 1000 for f in l['folders'] for i in f['items'])"
tree_check "unknown and old generations only in Unfiltered" "'unknown_1234567890ABCDEF.p12' not in e['folders']['All'] and [i['fileName'] for f in l['folders'] for i in f['items'] if i['fileName'] in ('unknown_1234567890ABCDEF.p12', 'signature_38AF.p12')] == ['signature_38AF.p12', 'unknown_1234567890ABCDEF.p12']"
for sel in purebred2025.select.all_user purebred.select.all-user; do
  ks share list --pin-source env:PIN --json --selector "$sel" >"$T/list.json"
  tree_check "selector $sel greys out the rest" "[i['fileName'] for i in l['root'] if i['selectable']] == e['folders']['All User'] and [f['fileName'] for f in l['folders'] if f['selectable']] == ['All User'] and not any(z['selectable'] for z in l['zips'])"
done
ks share list --pin-source env:PIN --json --selector purebred2025.zip.authentication >"$T/list.json"
tree_check "zip selector: only PIV.zip selectable" "[z['fileName'] for z in l['zips'] if z['selectable']] == ['PIV.zip']"
check_out "text listing" "Unfiltered\.zip" ks share list --pin-source env:PIN
check_fail "unknown selector" "selector" ks share list --pin-source env:PIN --selector purebred2025.select.piv

# Files: share get and export-tree.
check_out "get a root p12 by path" "wrote piv_8E2F55A1.p12" ks share get piv_8E2F55A1.p12 --out "$T/piv.p12" --pin-source env:PIN
check_out "get a zip" "wrote All.zip \(7 PKCS" ks share get All.zip --out "$T/All.zip" --pin-source env:PIN
check_out "get legacy" "legacy profile" ks share get PIV/piv_8E2F55A1.p12 --out "$T/piv-legacy.p12" --profile legacy --pin-source env:PIN
RSAL=$(openssl dgst -sha256 -r "$FIXTURES/identities/device-ds-ke.cert.der" | awk '{print toupper($1)}')
check_out "get legacy RSA by identifier" "wrote" ks share get "Device.$RSAL" --out "$T/rsa-legacy.p12" --profile legacy --pin-source env:PIN
[ "$(stat -c %a "$T/All.zip")" = 600 ] && ok "shared files are 0600" || bad "shared files are 0600"
check_fail "greyed-out item refused" "not accepted" ks share get All.zip --out "$T/x.zip" --selector purebred2025.zip.device --pin-source env:PIN
check_fail "folder is not a file" "folder" ks share get PIV --out "$T/x" --pin-source env:PIN
check_fail "no such item" "no item" ks share get nope.p12 --out "$T/x" --pin-source env:PIN
check_out "export-tree (7 root + 30 in folders + 7 zips)" "wrote 44 files" ks share export-tree "$T/tree" --pin-source env:PIN
dirs=$(find "$T/tree" -mindepth 1 -type d | wc -l); zips=$(ls "$T/tree"/*.zip | wc -l)
[ "$dirs" = 7 ] && [ "$zips" = 7 ] && ok "tree has 7 folders and 7 zips" || bad "tree has 7 folders and 7 zips" "$dirs $zips"
[ "$(ls "$T/tree/Unfiltered" | wc -l)" = 11 ] && ok "Unfiltered holds 11" || bad "Unfiltered holds 11"

# The password service.
mkdir -m 700 "$T/run"; SOCK=$T/run/password.sock
pin_credential "$T/creds" PIN
CREDENTIALS_DIRECTORY=$T/creds "$KS" serve --socket "$SOCK" --pin-source credential:pin 2>"$T/serve.log" &
SERVE_PID=$!
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ "$(stat -c %a "$SOCK")" = 600 ] && ok "socket is 0600" || bad "socket is 0600"
check_fail "no policy: not-enabled" "refused: not-enabled" ks password fetch --socket "$SOCK" --stdout
check_out "share allow keyshare" "allowed exe" ks share allow --exe "$KS"
# Checked without printing it: a failing check_out would echo the password into the log.
pw=$(ks password fetch --socket "$SOCK" --stdout 2>/dev/null)
[ "${#pw}" -eq 32 ] && ok "allowed executable gets the password" || bad "allowed executable gets the password" "got ${#pw} characters"
unset pw
check_out "other program: blocked" "^blocked" python3 "$CLIENT" fetch "$SOCK"
check_out "refusals are logged with their state" "exe .*python.*: blocked" cat "$T/serve.log"
# grep -f reads the pattern from a pipe: the password never reaches grep's argv.
grep -qFf <(ks password fetch --socket "$SOCK" --stdout) "$T/serve.log" && bad "password never logged" || ok "password never logged"
check_fail "fetch refuses a pipe" "refusing" ks password fetch --socket "$SOCK"
check_out "policy shows members" "allow: exe .*keyshare" ks share policy
[ "$(stat -c %a "$PROVIDER/share-policy.json")" = 600 ] && ok "policy file is 0600" || bad "policy file is 0600"
check_fail "another uid cannot be allowed" "another user" ks share allow --uid 4242
SPW=$(ks password fetch --socket "$SOCK" --stdout); export SPW KEYSHARE_SHARE_PASSWORD="$SPW"
[ "$SPW" = "$(ks password --stdout --pin-source env:PIN)" ] && ok "service answers the stored password" || bad "service answers the stored password"

# Every produced file opens with the password the service returned.
check_out "openssl opens the modern p12" "MAC: sha256" openssl pkcs12 -info -noout -in "$T/piv.p12" -passin env:SPW
info=$(openssl pkcs12 -info -noout -legacy -in "$T/rsa-legacy.p12" -passin env:SPW 2>&1)
for want in "MAC: sha1, Iteration 2048" "Shrouded Keybag: pbeWithSHA1And3-KeyTripleDES-CBC, Iteration 2048" "Certificate bag"; do
  grep -qF "$want" <<<"$info" && ok "legacy RSA: $want" || bad "legacy RSA: $want" "$info"
done
grep -q "Encrypted data" <<<"$info" && bad "legacy: certificate bag not encrypted" || ok "legacy: certificate bag not encrypted"
[ "$(openssl pkcs12 -in "$T/rsa-legacy.p12" -passin env:SPW -nokeys -legacy 2>/dev/null | grep -c 'BEGIN CERT')" = 1 ] && ok "legacy: no chain" || bad "legacy: no chain"
[ "$(openssl pkcs12 -in "$T/rsa-legacy.p12" -passin env:SPW -nodes -legacy 2>/dev/null | grep -c "friendlyName: $RSAL")" = 2 ] && ok "legacy: friendlyName on both bags" || bad "legacy: friendlyName on both bags"
check_out "legacy EC opens" "MAC: sha1, Iteration 2048" openssl pkcs12 -info -noout -legacy -in "$T/piv-legacy.p12" -passin env:SPW
check_out "unzip -l lists the entries" "device_048F.p12" unzip -l "$T/All.zip"
all_ok=1
while IFS= read -r f; do openssl pkcs12 -in "$f" -passin env:SPW -noout 2>/dev/null || all_ok=0; done < <(find "$T/tree" -name '*.p12')
for z in "$T/tree"/*.zip; do
  while IFS= read -r e; do unzip -p "$z" "$e" | openssl pkcs12 -passin env:SPW -noout 2>/dev/null || all_ok=0; done < <(unzip -Z1 "$z")
  [ "$(unzip -Z1 "$z" | grep -vc '\.p12$')" = 0 ] || all_ok=0
done
[ "$all_ok" = 1 ] && ok "every exported p12 and zip entry opens with the service's password" || bad "every exported p12 and zip entry opens"

# Another user's process is refused: by the socket's permissions, and by the
# service itself when the permissions are opened up.
if id -u 1000 >/dev/null 2>&1 || true; then
  out=$(setpriv --reuid 1000 --regid 1000 --clear-groups /usr/bin/python3 "$CLIENT" fetch "$SOCK" 2>&1)
  # The client must have run and been refused at the socket, not failed to open its own script.
  if grep -q "Permission denied" <<<"$out" && ! grep -q "can't open file" <<<"$out"; then
    ok "other uid: socket permissions refuse"
  else
    bad "other uid: socket permissions refuse" "$out"
  fi
  chmod 711 "$T/run"; chmod 666 "$SOCK"
  check_out "other uid: the service refuses (blocked)" "^blocked .*another user" setpriv --reuid 1000 --regid 1000 --clear-groups /usr/bin/python3 "$CLIENT" fetch "$SOCK"
  chmod 700 "$T/run"; chmod 600 "$SOCK"
fi

# 1,000 concurrent clients, good and bad: every good one is answered.
check_out "allow python3" "allowed" ks share allow --exe "$(python3 -c 'import os,sys; print(os.path.realpath(sys.executable))')"
start=$(date +%s.%N)
out=$(python3 "$CLIENT" fanout "$SOCK" 1000 2>&1)
secs=$(echo "$(date +%s.%N) - $start" | bc)
grep -q "^good 200/200 bad-handled 800/800" <<<"$out" && ok "1000 concurrent clients: $out (${secs}s)" || bad "1000 concurrent clients" "$out"
kill -0 "$SERVE_PID" 2>/dev/null && ok "service survived" || bad "service survived"

# The consumer: a second store imports the shared zip with the fetched password.
export KEYSHARE_HOME=$T/consumer
check_out "consumer token" "created" ks token create --label consumer --pin-source env:PIN --so-pin-source env:SOPIN
count() { ks list --json | grep -c '"reference"'; }
before=$(count)
check_fail "wrong password: clear error" "wrong password.*nothing was imported" ks import "$T/All.zip" --pin-source env:PIN --password-source env:WRONG
check_fail "service absent" "cannot reach the password service" ks import "$T/All.zip" --pin-source env:PIN --password-from-service --socket "$T/run/none.sock"
KEYSHARE_HOME=$PROVIDER ks share deny --exe "$KS" >/dev/null
check_fail "service refused: state named" "refused: blocked" ks import "$T/All.zip" --pin-source env:PIN --password-from-service --socket "$SOCK"
KEYSHARE_HOME=$PROVIDER ks share allow --exe "$KS" >/dev/null
cp "$T/tree/All/device_048F.p12" "$T/mixed-ok.p12"; head -c 3000 /dev/urandom >"$T/junk.p12"
(cd "$T" && zip -q mixed.zip mixed-ok.p12 junk.p12)
check_fail "zip with a bad entry imports nothing" "junk.p12: .*nothing was imported" ks import "$T/mixed.zip" --pin-source env:PIN --password-from-service --socket "$SOCK"
check_fail "not a p12 nor a zip" "not a PKCS #12" ks import "$FIXTURES/broken/random-bytes.p12" --pin-source env:PIN --password-from-service --socket "$SOCK"
[ "$(count)" = "$before" ] && ok "failed imports left the consumer store unchanged" || bad "failed imports left the consumer store unchanged"
check_out "import the zip with the service's password" "All.zip: device_048F.p12: imported identity" ks import "$T/All.zip" --pin-source env:PIN --password-from-service --socket "$SOCK"
[ "$(ks list --json | grep -c '"certificateType"')" -ge 7 ] && ok "7 identities in the consumer" || bad "7 identities in the consumer"
check_out "importing again: duplicates are not errors" "already in the keychain" ks import "$T/All.zip" --pin-source env:PIN --password-from-service --socket "$SOCK"
cp "$T/tree/PIV.zip" "$T/piv-as.p12"
check_out "a zip named .p12 still imports" "already|imported" ks import "$T/piv-as.p12" --pin-source env:PIN --password-from-service --socket "$SOCK"
check_out "a single shared p12 imports" "already|imported" ks import "$T/piv.p12" --pin-source env:PIN --password-from-service --socket "$SOCK"

# The imported key signs through the PKCS #11 module; the original certificate verifies.
echo "signed through the module" >"$T/data"
openssl x509 -in "$FIXTURES/identities/device-ds-ke.cert.pem" -pubkey -noout >"$T/rsa.pub"
if [ -n "$MOD" ] && [ -f "$MOD" ]; then
  if pkcs11-tool --module "$MOD" --token-label consumer --login --pin env:PIN --sign -m SHA256-RSA-PKCS \
       --label "$RSAL" -i "$T/data" -o "$T/sig" >/dev/null 2>&1 \
     && openssl dgst -sha256 -verify "$T/rsa.pub" -signature "$T/sig" "$T/data" >/dev/null 2>&1; then
    ok "imported RSA key signs via the module, original cert verifies"
  else bad "imported RSA key signs via the module"; fi
  ECL=$(openssl dgst -sha256 -r "$FIXTURES/identities/signature-ds-email.cert.der" | awk '{print toupper($1)}')
  openssl x509 -in "$FIXTURES/identities/signature-ds-email.cert.pem" -pubkey -noout >"$T/ec.pub"
  if out=$(pkcs11-tool --module "$MOD" --token-label consumer --login --pin env:PIN --sign -m ECDSA-SHA256 --signature-format openssl \
       --label "$ECL" -i "$T/data" -o "$T/ecsig" 2>&1) \
     && openssl dgst -sha256 -verify "$T/ec.pub" -signature "$T/ecsig" "$T/data" >/dev/null 2>&1; then
    ok "imported EC key signs via the module, original cert verifies"
  elif grep -q CKR_KEY_TYPE_INCONSISTENT <<<"$out"; then
    # MARKED: the module (not this feature) refuses ECDSA on imported EC keys at the time
    # of writing; the key itself is checked below by signing with what the consumer holds.
    echo "SKIP - EC signing via the module: C_SignInit gives CKR_KEY_TYPE_INCONSISTENT (PKCS #11 module issue)"
  else bad "imported EC key signs via the module" "$out"; fi
  ks export "$ECL" --out "$T/ec-back.p12" --pin-source env:PIN >/dev/null
  CPW=$(ks password --stdout --pin-source env:PIN); export CPW
  openssl pkcs12 -in "$T/ec-back.p12" -passin env:CPW -nocerts -nodes 2>/dev/null >"$T/ec.key"
  if openssl dgst -sha256 -sign "$T/ec.key" -out "$T/ecsig2" "$T/data" 2>/dev/null \
     && openssl dgst -sha256 -verify "$T/ec.pub" -signature "$T/ecsig2" "$T/data" >/dev/null 2>&1; then
    ok "imported EC key (consumer store) signs, original cert verifies"
  else bad "imported EC key (consumer store) signs"; fi
  rm -f "$T/ec.key"
else
  bad "PKCS #11 module not given (arg 2): round-trip signing not checked"
fi

# Clean shutdown; rotation.
kill -TERM "$SERVE_PID"; wait "$SERVE_PID"; rc=$?; SERVE_PID=
[ "$rc" = 0 ] && [ ! -e "$SOCK" ] && ok "SIGTERM: clean exit, socket removed" || bad "SIGTERM: clean exit, socket removed" "rc $rc"
export KEYSHARE_HOME=$PROVIDER
check_out "rotate" "replaced" ks password rotate --pin-source env:PIN
[ "$(ks password --stdout --pin-source env:PIN)" != "$SPW" ] && ok "rotation gives a new password" || bad "rotation gives a new password"

# 22 shareable identities (11 more, P-256 device certificates): the agent's
# reply once took 3 fields per identity, and a control message holds at most
# 64 fields, so share list failed from 22 on ("closed the connection without
# an answer"); the lists are now packed into 3 fields.
files=()
for i in $(seq 11); do
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$T/many$i.key" -subj "/CN=many-$i" -days 2 \
    -addext keyUsage=critical,digitalSignature -addext basicConstraints=critical,CA:FALSE -out "$T/many$i.pem" 2>/dev/null
  files+=("$T/many$i.key" "$T/many$i.pem")
done
check "import 11 more identities (22 shareable)" ks import "${files[@]}" --pin-source env:PIN
rm -f "$T"/many*.key
out=$(ks share list --json --pin-source env:PIN 2>&1)
n=$(python3 -c 'import json, sys; t = json.loads(sys.argv[1]); print(len(next(f for f in t["folders"] if f["identifier"] == "Unfiltered")["items"]))' "$out" 2>/dev/null)
[ "$n" = 22 ] && ok "share list with 22 shareable identities: all 22 in Unfiltered" || bad "share list with 22 shareable identities" "$(head -c 300 <<<"$out")"
finish
