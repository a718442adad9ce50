#!/usr/bin/env bash
# 89-browsers: browsers and desktop programs that just work (issue 27, section 4).
#  - names people read: an identity's default label is the PKCS #12 friendlyName, else the subject's
#    commonName, else its email, else the SHA-256; unique in the token ("Dave Example (2)");
#    `keyshare export carol` finds what `-name carol` named; ssh-keygen -D shows it;
#  - `keyshare list` prints for each object the URI that names exactly that object (p11tool finds
#    one object with it, `;type=private` the key); the chain imported with an identity is kept out
#    of the token (the token shows one certificate, as systemd-cryptenroll's "auto" and kinit want),
#    `--with-chain` puts it in marked CKA_CERTIFICATE_CATEGORY authority;
#  - `keyshare browser setup` registers the module in Chromium's ~/.pki/nssdb and Firefox profiles
#    in modutil's format, idempotent, `--remove`; `keyshare browser policy` (the package's postinst)
#    merges SecurityDevices into Firefox's policies.json and never replaces the file;
#  - Firefox ESR and Chromium (headless, each in its own PID namespace, stopped by PID) log in to a
#    127.0.0.1 site that requires a client certificate, with the module set up only by the policy
#    (Firefox) and `keyshare browser setup` (Chromium); the page names the keyshare certificate;
#  - Firefox on Xvfb with the token locked: the protected authentication path, the agent's scripted
#    pinentry on Firefox's display answers while Firefox waits (screenshots of the prompt and page).
# KEYSHARE_IT_SCREENSHOTS=DIR copies the pages' screenshots there (docs/images).
# Usage: 89-browsers.sh KEYSHARE MODULE. Ends with "N passed, M failed, K xfail".
set -uo pipefail
KEYSHARE=$(realpath "${1:?keyshare binary}")
MODULE=$(realpath "${2:?module path}")  # Firefox matches a policy's device to a profile's module by this path
. "$(dirname "$0")/lib.sh"
. "$HERE/support/consumers.sh"
# Not under strace: with strace -f tracing Firefox's process launches, about 1 run in 10 left
# Firefox waiting on a content process that never started (then every later run: strace lost its
# tracees), where untraced runs logged in 40 times out of 40. Secrets reach programs only through
# env:VAR and pipes here; 09-no-secrets-on-argv's lint reads this script.
export KEYSHARE_IT_NO_TRACE=1
enter_sandbox "$@"
# The browsers use the token the agent holds unlocked (keyshare unlock): the agent mode, in every suite run.
unset KEYSHARE_IN_PROCESS
T0=$SECONDS
FF_POLICY=/etc/firefox/policies/policies.json
CR_POLICY=/etc/chromium/policies/managed/keyshare-it-89-$$.json
FF_POLICY_SAVED=
CR_POLICY_DIRS=  # the directories of CR_POLICY this script made
XVFB_DISPLAY=
cleanup_browsers() {
  # The browsers and Xvfb first (by PID: spawn recorded them), then the system files this script wrote.
  stop "${PIDS[@]}"
  PIDS=()
  [ -z "$XVFB_DISPLAY" ] || rm -f "/tmp/.X$XVFB_DISPLAY-lock" "/tmp/.X11-unix/X$XVFB_DISPLAY"
  rm -f "$CR_POLICY"
  [ -z "$CR_POLICY_DIRS" ] || rmdir -p "$CR_POLICY_DIRS" 2>/dev/null
  if [ -n "$FF_POLICY_SAVED" ]; then
    if [ "$FF_POLICY_SAVED" = none ]; then rm -f "$FF_POLICY"; rmdir /etc/firefox/policies /etc/firefox 2>/dev/null
    else cp -p "$WORK/policies.json.saved" "$FF_POLICY"; fi
  fi
  cleanup_consumers
}
trap cleanup_browsers EXIT
need browsers firefox-esr chromium /usr/lib/chromium/chromium certutil modutil p11tool pkcs11-tool ssh-keygen unshare python3 Xvfb xauth mcookie import convert || { finish_consumers; exit 1; }

new_home
WORK=$(mktemp -d /tmp/keyshare-browsers.XXXXXX)
W=$WORK
# The browsers' and keyshare's per-user files stay in this script's directory.
export HOME=$W/home XDG_CONFIG_HOME=$W/home/.config XDG_STATE_HOME=$W/home/.local/state XDG_CACHE_HOME=$W/home/.cache
mkdir -p "$HOME"
export PIN=pin-$RANDOM$RANDOM SOPIN=so-$RANDOM$RANDOM P12PASS=p12-$RANDOM$RANDOM
ks() { "$KEYSHARE" "$@"; }

# --- a CA, the site's certificate and carol's identity (friendlyName carol, the CA as its chain) --
o=(-days 400 -sha256)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/ca.key" -out "$W/ca.pem" \
  -subj "/O=keyshare test/CN=keyshare browsers test CA" "${o[@]}" -addext basicConstraints=critical,CA:true \
  -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
printf 'basicConstraints=CA:false\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n' >"$W/server.ext"
printf 'basicConstraints=CA:false\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >"$W/client.ext"
issue() {  # issue NAME SUBJECT EXT KEYALG...
  local name=$1 subj=$2 ext=$3; shift 3
  openssl req -new "$@" -nodes -keyout "$W/$name.key" -out "$W/$name.csr" -subj "$subj" 2>/dev/null &&
    openssl x509 -req -in "$W/$name.csr" -CA "$W/ca.pem" -CAkey "$W/ca.key" -CAcreateserial "${o[@]}" \
      -extfile "$W/$ext.ext" -out "$W/$name.pem" 2>/dev/null
}
issue server "/CN=127.0.0.1" server -newkey ec -pkeyopt ec_paramgen_curve:P-256
issue carol "/O=keyshare test/CN=Carol Example" client -newkey rsa:2048
issue dave1 "/O=keyshare test/CN=Dave Example" client -newkey ec -pkeyopt ec_paramgen_curve:P-256
issue dave2 "/O=keyshare test/CN=Dave Example" client -newkey ec -pkeyopt ec_paramgen_curve:P-256
issue erin "/O=keyshare test/emailAddress=erin@example.test" client -newkey ec -pkeyopt ec_paramgen_curve:P-256
openssl pkcs12 -export -inkey "$W/carol.key" -in "$W/carol.pem" -certfile "$W/ca.pem" -name carol \
  -passout env:P12PASS -out "$W/carol.p12"

# --- names people read -----------------------------------------------------------------------------
check "token browsers" ks token create --label browsers --pin-source env:PIN --so-pin-source env:SOPIN
check_out "import: the PKCS #12 friendlyName is the identity's label" '^[^ ]*carol.p12: imported identity "carol" ' \
  ks import "$W/carol.p12" --token browsers --pin-source env:PIN --password-source env:P12PASS
check_out "list shows the label carol" '^certificate +carol ' ks list --token browsers
check_out "keyshare export carol finds it" "exported" ks export carol --token browsers --out "$W/carol-out.p12" --pin-source env:PIN
check "token names" ks token create --label names --pin-source env:PIN --so-pin-source env:SOPIN
N=(--token names --pin-source env:PIN)
cat "$W/dave1.pem" "$W/dave1.key" >"$W/dave1.bundle"; cat "$W/dave2.key" "$W/dave2.pem" >"$W/dave2.bundle"
cat "$W/erin.pem" "$W/erin.key" >"$W/erin.bundle"
check_out "no friendlyName: the subject's commonName" 'imported identity "Dave Example" ' ks import "$W/dave1.bundle" "${N[@]}"
check_out "the same commonName again: made unique in the token" 'imported identity "Dave Example \(2\)" ' ks import "$W/dave2.bundle" "${N[@]}"
check_out "no commonName: the email" 'imported identity "erin@example.test" ' ks import "$W/erin.bundle" "${N[@]}"
check_out "export by the unique label" "exported" ks export "Dave Example (2)" --token names --out "$W/dave2-out.p12" --pin-source env:PIN
ssh-keygen -D "$MODULE" >"$W/ssh.pub" 2>/dev/null
grep -q ' carol$' "$W/ssh.pub" && ok "ssh-keygen -D shows the key as carol" || bad "ssh-keygen -D shows the key as carol" "$(cat "$W/ssh.pub")"

# --- every object's URI; the chain kept apart --------------------------------------------------------
# The URIs as `keyshare list --wide` prints them (the last column), given to p11tool as they are.
ks list --wide --token browsers --private --pin-source env:PIN >"$W/list.txt"
n_uri=0
while read -r cls uri; do
  case $cls in certificate) want=cert ;; private-key) want=private ;; public-key) want=public ;; *) continue ;; esac
  [ "$uri" != - ] || continue
  out=$(GNUTLS_PIN=$PIN p11tool --provider "$MODULE" --login --list-all "$uri" 2>&1)
  if [ "$(grep -c '^Object ' <<<"$out")" = 1 ] && grep -q "Label: carol" <<<"$out" && [[ $uri == *";type=$want" ]]; then
    n_uri=$((n_uri + 1))
  else bad "the $cls's URI names exactly it" "$uri: $out"; fi
done < <(awk 'NR > 1 {print $1, $NF}' "$W/list.txt")
[ "$n_uri" = 3 ] && ok "list: the certificate's, private key's (;type=private) and public key's URIs, as printed, each name exactly that object (p11tool)" \
  || bad "list: three URIs, one object each" "$n_uri; $(cat "$W/list.txt")"
awk 'NR > 1 && $1 == "certificate" && $NF == "-"' "$W/list.txt" | grep -q . \
  && ok "list: the CA certificate of carol's chain is in the keychain with no URI (not a token object)" \
  || bad "list: the chain certificate kept apart" "$(cat "$W/list.txt")"
certs=$(p11tool --provider "$MODULE" --list-all-certs "pkcs11:token=browsers" 2>&1 | grep -c '^Object ')
[ "$certs" = 1 ] && ok "the token shows one certificate: carol's (what systemd-cryptenroll --pkcs11-token-uri=auto takes)" \
  || bad "the token shows one certificate" "$certs: $(p11tool --provider "$MODULE" --list-all-certs "pkcs11:token=browsers" 2>&1)"
check "token chain" ks token create --label chain --pin-source env:PIN --so-pin-source env:SOPIN
check_out "import --with-chain" 'imported identity "carol"' ks import "$W/carol.p12" --with-chain --token chain --pin-source env:PIN --password-source env:P12PASS
out=$(p11tool --provider "$MODULE" --list-all-certs "pkcs11:token=chain" 2>&1)
[ "$(grep -c '^Object ' <<<"$out")" = 2 ] && grep -q 'CKA_CERTIFICATE_CATEGORY=CA' <<<"$out" \
  && ok "--with-chain: the CA certificate is a token object too, CKA_CERTIFICATE_CATEGORY authority" || bad "--with-chain: two certificates, the CA marked authority" "$out"
check "token chain deleted" ks token delete chain --so-pin-source env:SOPIN
check "token names deleted" ks token delete names --so-pin-source env:SOPIN

# --- keyshare browser setup (NSS databases) and policy (Firefox's policies.json) ------------------------
NSSDB=$HOME/.pki/nssdb
check_out "browser setup --chromium makes ~/.pki/nssdb and registers the module" "chromium sql:$NSSDB: registered $MODULE" ks browser setup --chromium --module "$MODULE"
check_out "browser setup again: already registered (idempotent)" "already registered" ks browser setup --chromium --module "$MODULE"
blocks=$(grep -c "^library=$MODULE\$" "$NSSDB/pkcs11.txt")
[ "$blocks" = 1 ] && grep -qx 'name=keyshare' "$NSSDB/pkcs11.txt" && ok "pkcs11.txt holds one keyshare block in modutil's format" \
  || bad "one keyshare block" "$(cat "$NSSDB/pkcs11.txt")"
out=$(modutil -list -dbdir "sql:$NSSDB" 2>&1)
grep -A8 '\. keyshare' <<<"$out" | grep -q 'token: browsers' && ok "modutil -list: the keyshare module loads and shows token browsers" \
  || bad "modutil -list shows the keyshare token" "$out"
check_out "browser setup --chromium --remove" "chromium sql:$NSSDB: removed" ks browser setup --chromium --remove
grep -qx 'name=keyshare' "$NSSDB/pkcs11.txt" && bad "--remove leaves no keyshare block" "$(cat "$NSSDB/pkcs11.txt")" \
  || { grep -q 'name=NSS Internal PKCS #11 Module' "$NSSDB/pkcs11.txt" && ok "--remove takes keyshare's block out and keeps NSS's own"; }
check_out "browser setup --chromium again" "registered" ks browser setup --chromium --module "$MODULE"
mkdir -p "$HOME/.mozilla/firefox/t1.default-esr"
printf '[Profile0]\nName=default-esr\nIsRelative=1\nPath=t1.default-esr\nDefault=1\n\n[General]\nStartWithLastProfile=1\n' >"$HOME/.mozilla/firefox/profiles.ini"
check_out "browser setup --firefox registers the module in each profile" "firefox sql:$HOME/.mozilla/firefox/t1.default-esr: registered" \
  ks browser setup --firefox --module "$MODULE"
out=$(modutil -list -dbdir "sql:$HOME/.mozilla/firefox/t1.default-esr" 2>&1)
grep -A8 '\. keyshare' <<<"$out" | grep -q 'token: browsers' && ok "the Firefox profile's database loads the module" || bad "profile database loads the module" "$out"

P=$W/policies.json
printf '{"policies": {"DisableAppUpdate": true, "Certificates": {"Install": ["/x/ca.pem"]}, "SecurityDevices": {"opensc": "/usr/lib/x86_64-linux-gnu/opensc-pkcs11.so"}}}\n' >"$P"
check_out "browser policy merges SecurityDevices.Add.keyshare" "registers $MODULE" ks browser policy --file "$P" --module "$MODULE"
python3 - "$P" "$MODULE" <<'EOF' && ok "the policy file keeps every other policy and device" || bad "policy merge" "$(cat "$P")"
import json, sys
p = json.load(open(sys.argv[1]))["policies"]
assert p["DisableAppUpdate"] is True and p["Certificates"] == {"Install": ["/x/ca.pem"]}, p
assert p["SecurityDevices"]["Add"] == {"opensc": "/usr/lib/x86_64-linux-gnu/opensc-pkcs11.so", "keyshare": sys.argv[2]}, p
EOF
check_out "browser policy again: unchanged" "already registers" ks browser policy --file "$P" --module "$MODULE"
check_out "browser policy --remove: SecurityDevices.Delete drops it from profiles" "no longer registers" ks browser policy --file "$P" --remove
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["policies"]["SecurityDevices"]; assert "keyshare" not in d["Add"] and d["Delete"]==["keyshare"] and "opensc" in d["Add"]' "$P" \
  && ok "--remove: keyshare in Delete, out of Add, opensc kept" || bad "--remove" "$(cat "$P")"
check_out "browser policy --purge" "no longer names keyshare" ks browser policy --file "$P" --purge
printf 'not { json\n' >"$W/broken.json"; cp "$W/broken.json" "$W/broken.orig"
check_fail "a policy file that is not JSON is refused with one line" "is not a JSON object; it was left as it is" ks browser policy --file "$W/broken.json" --module "$MODULE"
cmp -s "$W/broken.json" "$W/broken.orig" && ok "... and left byte for byte as it was" || bad "broken policy file untouched"

# --- the site, the token unlocked, Firefox with only the package's policy --------------------------------
# The token unlocked for the two browsers only (the programs that load the module: Firefox's
# parent process, Chromium's browser process behind its /usr/bin wrapper).
FIREFOX_EXE=$(realpath "$(command -v firefox-esr)"); CHROMIUM_EXE=/usr/lib/chromium/chromium
check_out "unlock the token for Firefox and Chromium only" "unlocked token browsers" \
  ks unlock --for 10m --token browsers --program "$FIREFOX_EXE" --program "$CHROMIUM_EXE" --pin-source env:PIN
out=$(pkcs11-tool --module "$MODULE" --token-label browsers -O --type privkey 2>&1)
grep -q 'Private Key Object' <<<"$out" && bad "the unlock does not reach another program (pkcs11-tool sees no private key)" "$out" \
  || ok "the unlock does not reach another program (pkcs11-tool sees no private key)"
REQ=$W/requests.log
: >"$REQ"
if ! serve "$W/site.log" python3 "$HERE/support/client_cert_site.py" "$W/server.pem" "$W/server.key" "$W/ca.pem" @PORT@ "$REQ"; then
  bad "the client-certificate site listens on 127.0.0.1" "$(cat "$W/site.log")"; finish_consumers; exit 1
fi
URL=https://127.0.0.1:$PORT/
out=$(curl -sk --max-time 10 "$URL" 2>&1) && bad "the site refuses a client without a certificate" "$out" || ok "the site refuses a client without a certificate"

if [ -e "$FF_POLICY" ]; then cp -p "$FF_POLICY" "$W/policies.json.saved"; FF_POLICY_SAVED=saved; else FF_POLICY_SAVED=none; fi
check_out "the package's policy (keyshare browser policy, as postinst runs it)" "$FF_POLICY: registers $MODULE" ks browser policy --module "$MODULE"
FF=$W/firefox-profile
mkdir -p "$FF"
certutil -N -d "sql:$FF" --empty-password && certutil -A -d "sql:$FF" -n "keyshare browsers test CA" -t C,, -i "$W/ca.pem"
# A person would pick the certificate in Firefox's chooser; headless, the preference picks it.
cat >"$FF/user.js" <<'EOF'
user_pref("security.default_personal_cert", "Select Automatically");
user_pref("browser.shell.checkDefaultBrowser", false);
user_pref("datareporting.policy.dataSubmissionEnabled", false);
user_pref("toolkit.telemetry.reportingpolicy.firstRun", false);
EOF
grep -qx 'name=keyshare' "$FF/pkcs11.txt" && bad "the Firefox profile starts without the module" || ok "the Firefox profile starts without the module"
t=$SECONDS
spawn "$W/firefox.log" timeout 45 env MOZ_CRASHREPORTER_DISABLE=1 unshare -p -f --kill-child --mount-proc \
  firefox-esr --headless --no-remote --profile "$FF" --window-size 900,330 --screenshot "$W/firefox.png" "$URL"
FIREFOX_PID=$SPAWNED
wait "$FIREFOX_PID"; rc=$?
if wait_log "$REQ" 'subject=.*CN=Carol Example.*agent=.*Firefox/' 1 && [ -s "$W/firefox.png" ]; then
  ok "Firefox ESR logs in with carol's keyshare certificate (exit $rc, $((SECONDS - t)) s; screenshot)"
else bad "Firefox ESR logs in with the keyshare certificate" "exit $rc; site: $(cat "$REQ"); firefox: $(tail -5 "$W/firefox.log")"; fi
grep -qx "library=$MODULE" "$FF/pkcs11.txt" && ok "Firefox added the module to the profile from the policy alone" \
  || bad "the policy registered the module in the profile" "$(cat "$FF/pkcs11.txt")"

# --- Chromium, set up by keyshare browser setup --------------------------------------------------------
certutil -A -d "sql:$NSSDB" -n "keyshare browsers test CA" -t C,, -i "$W/ca.pem"
[ -d /etc/chromium/policies/managed ] || CR_POLICY_DIRS=/etc/chromium/policies/managed
mkdir -p "$(dirname "$CR_POLICY")"
printf '{"AutoSelectCertificateForUrls": ["{\\"pattern\\":\\"https://127.0.0.1:%s\\",\\"filter\\":{\\"ISSUER\\":{\\"CN\\":\\"keyshare browsers test CA\\"}}}"]}\n' "$PORT" >"$CR_POLICY"
CR=(chromium --headless=new --no-sandbox --disable-gpu --no-first-run --disable-dev-shm-usage --user-data-dir="$W/chromium")
t=$SECONDS
spawn "$W/chromium-dom.log" timeout 45 unshare -p -f --kill-child --mount-proc "${CR[@]}" --dump-dom "$URL"
wait "$SPAWNED"; rc=$?
if grep -q 'Subject: <b>.*CN=Carol Example' "$W/chromium-dom.log" && wait_log "$REQ" 'subject=.*CN=Carol Example.*agent=.*Chrome/' 1; then
  ok "Chromium logs in with carol's keyshare certificate: the page names it (--dump-dom, $((SECONDS - t)) s)"
else bad "Chromium logs in with the keyshare certificate" "exit $rc; site: $(cat "$REQ"); chromium: $(grep -v '^\[' "$W/chromium-dom.log" | tail -5; grep '^\[' "$W/chromium-dom.log" | tail -5)"; fi
spawn "$W/chromium-shot.log" timeout 45 unshare -p -f --kill-child --mount-proc "${CR[@]}" --window-size=900,330 --screenshot="$W/chromium.png" "$URL"
wait "$SPAWNED"
[ -s "$W/chromium.png" ] && ok "Chromium's screenshot of the logged-in page" || bad "Chromium's screenshot" "$(tail -5 "$W/chromium-shot.log")"

# --- Firefox on a display (Xvfb) with the protected authentication path ------------------------------
# The token locked again; the agent restarted with a scripted pinentry (support/fake-pinentry.py,
# "gated": it answers once the test has looked at the screen). Firefox finds the token's
# CKF_PROTECTED_AUTHENTICATION_PATH, shows its "authenticate by the token's own means" dialog and
# calls C_Login(NULL); the agent asks the pinentry on Firefox's display, which answers the PIN.
PE=$W/pinentry.d
mkdir -p "$PE" && chmod 700 "$PE"
printf '%s\n' "$PIN" >"$PE/pin" && echo gated >"$PE/mode"
printf '#!/bin/sh\nexec %s %s %s "$@"\n' "$(command -v python3)" "$HERE/support/fake-pinentry.py" "$PE" >"$W/pinentry"
chmod 755 "$W/pinentry"
export KEYSHARE_PINENTRY=$W/pinentry KEYSHARE_AGENT_PROMPT_TIMEOUT=30
check "the agent restarted with the scripted pinentry (every unlock ends)" ks agent restart
n=90
while [ -e "/tmp/.X11-unix/X$n" ] || [ -e "/tmp/.X$n-lock" ]; do n=$((n + 1)); done
export XAUTHORITY=$W/xauthority
xauth -f "$XAUTHORITY" add ":$n" . "$(mcookie)" 2>/dev/null
XVFB_DISPLAY=$n  # its lock and socket go at exit, also when Xvfb could not remove them
# SIGTERM for Xvfb (it removes its lock and socket), not --kill-child's default SIGKILL.
spawn "$W/xvfb.log" unshare -p -f --kill-child=SIGTERM --mount-proc Xvfb ":$n" -screen 0 1000x640x24 -nolisten tcp -auth "$XAUTHORITY"
XVFB_PID=$SPAWNED
for _ in $(seq 100); do [ -S "/tmp/.X11-unix/X$n" ] && break; sleep 0.1; done
: >"$REQ"
t=$SECONDS
spawn "$W/firefox-x.log" timeout 60 env DISPLAY=":$n" MOZ_CRASHREPORTER_DISABLE=1 unshare -p -f --kill-child --mount-proc \
  firefox-esr --no-remote --profile "$FF" --width 1000 --height 640 "$URL"
FIREFOX_X_PID=$SPAWNED
if wait_log "$PE/log" '^GETPIN gated' 40; then
  sleep 2  # Firefox draws its dialog while C_Login(NULL) waits
  import -display ":$n" -window root "$W/firefox-prompt.png" 2>/dev/null
  ok "Firefox on Xvfb waits in C_Login(NULL) while the agent's pinentry asks ($((SECONDS - t)) s)"
else bad "Firefox on Xvfb logs in through the protected authentication path" "$(cat "$PE/log" 2>/dev/null | grep -v '^ENV'; tail -5 "$W/firefox-x.log")"; fi
touch "$PE/go"
if wait_log "$REQ" 'subject=.*CN=Carol Example.*agent=.*Firefox/' 20; then
  sleep 2
  import -display ":$n" -window root "$W/firefox-x.png" 2>/dev/null
  ok "... the pinentry answered and Firefox logged in with carol's certificate ($((SECONDS - t)) s)"
else bad "... Firefox logged in after the pinentry answered" "site: $(cat "$REQ"); firefox: $(tail -5 "$W/firefox-x.log")"; fi
grep -q '^SETDESC .*firefox-esr.*browsers' "$PE/log" && ok "the agent's prompt names the program (firefox-esr) and the token (browsers)" \
  || bad "the prompt names Firefox and the token" "$(grep '^SET' "$PE/log")"
grep -q "^ENV DISPLAY=:$n\$" "$PE/log" && ok "the pinentry ran on Firefox's display (:$n)" || bad "the pinentry on Firefox's display" "$(grep '^ENV DISPLAY' "$PE/log")"
stop "$FIREFOX_X_PID" "$XVFB_PID"
[ -s "$W/firefox-prompt.png" ] && [ -s "$W/firefox-x.png" ] && ok "screenshots of the prompt and the logged-in page" || bad "Xvfb screenshots"

if [ -n "${KEYSHARE_IT_SCREENSHOTS:-}" ]; then
  mkdir -p "$KEYSHARE_IT_SCREENSHOTS"
  for b in firefox chromium; do
    [ -s "$W/$b.png" ] && convert "$W/$b.png" -strip -colors 64 "PNG8:$KEYSHARE_IT_SCREENSHOTS/browser-$b-client-certificate.png"
  done
  [ -s "$W/firefox-prompt.png" ] && convert "$W/firefox-prompt.png" -strip -colors 64 "PNG8:$KEYSHARE_IT_SCREENSHOTS/browser-firefox-protected-path-prompt.png"
  [ -s "$W/firefox-x.png" ] && convert "$W/firefox-x.png" -strip -colors 64 "PNG8:$KEYSHARE_IT_SCREENSHOTS/browser-firefox-xvfb-signed-in.png"
  echo "# screenshots: $KEYSHARE_IT_SCREENSHOTS/browser-*.png"
fi
ks lock --token browsers >/dev/null 2>&1
check_no_secret_argv PIN SOPIN P12PASS
echo "# $((SECONDS - T0)) s"
finish_consumers
