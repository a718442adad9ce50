#!/usr/bin/env bash
# 94-doctor: `keyshare doctor [--json]` (issue 28). On a fresh home it reports without creating the
# store or starting an agent, under a second; each problem is one line "SEVERITY: CHECK: what.
# Fix: COMMAND", and running that command makes the problem go (p11-kit registration, a
# group-writable store, a readable or writable keychain.db, Chromium's NSS database, a soft token
# not sealed to a present TPM, a card driver whose module is gone); the agent running or not;
# exit status 0 without problems and 1 with; --json parses with stable keys; no PIN in the output.
# Then `make openssl-update` (dist/openssl/update.sh) against a local signed mirror made here.
set -u
KS=${1:?keyshare binary}; MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$HERE/../.." && pwd)
new_home
W=$(mktemp -d /tmp/keyshare-94.XXXXXX)
trap 'rm -rf "$W" "$KEYSHARE_HOME"' EXIT
# A home of its own: its p11-kit user configuration, NSS databases and Firefox profiles are the test's.
export HOME=$W/home && mkdir -p "$HOME"
rmdir "$KEYSHARE_HOME"  # fresh: not even the directory
export PIN=doctor-user-2580 SOPIN=doctor-so-2580
ks() { "$KS" "$@"; }
# The fixes name `keyshare`: the binary under test.
export PATH=$(dirname "$(realpath "$KS")"):$PATH
doctor() { DOC_OUT=$(ks doctor "$@" 2>&1); DOC_RC=$?; }
# fix_of REGEX: the command after "Fix: " on the problem line matching REGEX.
fix_of() { printf '%s\n' "$DOC_OUT" | grep -E "$1" | head -1 | sed 's/.*\. Fix: //'; }
has() { printf '%s\n' "$DOC_OUT" | grep -Eq "$1"; }
expect() { # NAME REGEX [absent]
  if { has "$2" && [ "${3:-}" != absent ]; } || { ! has "$2" && [ "${3:-}" = absent ]; }; then ok "$1"
  else bad "$1" "$DOC_OUT"; fi
}

# ---- a fresh home ------------------------------------------------------------------------------
t0=$(date +%s%N)
doctor
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
if [ "$ms" -lt 1000 ]; then ok "doctor on a fresh home answers in ${ms} ms (< 1 s)"; else bad "doctor is fast" "${ms} ms"; fi
echo "$DOC_OUT" | sed 's/^/       | /'
expect "the store: not created yet, and where it would be" "^  store +ok +$KEYSHARE_HOME: not created yet"
expect "the agent: not running, with its socket" "^  agent +ok +not running \(socket .*agent\.sock\)"
expect "OpenSSL: the version in use and whether it is bundled (with its release date) or the system's" \
  "^  openssl +(note|warning|ok) +OpenSSL [0-9]+\.[0-9]+\.[0-9]+, (bundled \(linked statically; released [0-9]+ [A-Z][a-z]+ [0-9]+, [0-9]+ days ago\)|the system's)"
if [ "$(id -u)" = 0 ]; then
  expect "p11-kit, as root: not registered is a warning whose fix is a command (p11-kit's system directory: it reads no user configuration for root)" \
    "^warning: p11-kit: keyshare is not registered with p11-kit .*\. Fix: mkdir -p /etc/pkcs11/modules && printf 'module: %s\\\\n' [^ ]*libkeyshare-pkcs11\.so > /etc/pkcs11/modules/keyshare\.module$"
fi
expect "browsers, TPM and cards are reported" "^  browsers .*chromium: no NSS database yet; firefox: no profile"
expect "the TPM line" "^  tpm +(ok|note) +(no TPM|TPM at|TCTI)"
expect "the cards line" "^  cards +ok +no card drivers configured; (no pcscd socket|pcscd socket)"
if [ "$DOC_RC" = 1 ]; then ok "exit status 1 with a problem"; else bad "exit status 1 with a problem" "rc=$DOC_RC"; fi
if [ ! -e "$KEYSHARE_HOME" ]; then ok "doctor created no store directory"; else bad "doctor created no store directory" "$(ls -la "$KEYSHARE_HOME")"; fi
if ks agent status >/dev/null 2>&1; then bad "doctor started no agent" "$(ks agent status)"; else ok "doctor started no agent (agent status: none)"; fi

# As an ordinary user (uid 1000 in a user namespace, where root's files appear as its own): the fix
# is the user's own p11-kit configuration; run as printed, p11-kit lists the module and no problem is left.
asuser() { unshare --user --map-user=1000 --map-group=1000 "$@"; }
if asuser true 2>/dev/null; then
  DOC_OUT=$(asuser "$KS" doctor 2>&1)
  fix=$(fix_of '^warning: p11-kit')
  case $fix in
    "mkdir -p $HOME/.config/pkcs11/modules && printf 'module: %s\n' "*"libkeyshare-pkcs11.so > $HOME/.config/pkcs11/modules/keyshare.module")
      ok "p11-kit, as a user: the fix writes ~/.config/pkcs11/modules/keyshare.module" ;;
    *) bad "p11-kit, as a user: the fix writes ~/.config/pkcs11/modules/keyshare.module" "$DOC_OUT" ;;
  esac
  asuser bash -c "$fix"
  DOC_OUT=$(asuser "$KS" doctor 2>&1); DOC_RC=$?
  expect "the p11-kit fix, run as printed, registers the module" "^  p11-kit +ok +registered: $HOME/\.config/pkcs11/modules/keyshare\.module loads .*libkeyshare-pkcs11\.so"
  if [ "$DOC_RC" = 0 ] && has '^no problems found$'; then ok "no problem left: 'no problems found', exit status 0"
  else bad "no problem left: exit status 0" "rc=$DOC_RC
$DOC_OUT"; fi
  if asuser p11-kit list-modules 2>/dev/null | grep -q '^keyshare: .*libkeyshare-pkcs11\.so$'; then
    ok "p11-kit list-modules itself lists the module the fix registered"
  else bad "p11-kit list-modules lists the module the fix registered" "$(asuser p11-kit list-modules 2>&1 | grep -v '^ ')"; fi
  if asuser "$KS" doctor --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert sorted(r) == ["checks", "problems", "version"], sorted(r)
assert [c["check"] for c in r["checks"]] == ["store", "agent", "openssl", "p11-kit", "browsers", "tpm", "cards"]
for c in r["checks"]:
    assert sorted(c) == ["check", "facts", "status", "summary"], sorted(c)
    assert c["status"] in ("ok", "note", "warning", "error")
f = {c["check"]: c["facts"] for c in r["checks"]}
assert f["store"]["exists"] is False and f["agent"]["running"] is False and f["p11-kit"]["registered"] is True
assert f["openssl"]["linkage"] in ("bundled", "system") and isinstance(f["openssl"]["postQuantum"], bool)
assert r["problems"] == []
'; then ok "--json parses: version, checks (fixed order, keys check/facts/status/summary), problems"
  else bad "--json parses with stable keys" "$(asuser "$KS" doctor --json 2>&1 | head -30)"; fi
else bad "user namespaces (unshare --user --map-user) for the p11-kit user check"; fi
doctor
if [ "$(id -u)" = 0 ]; then
  expect "as root, a user's keyshare.module is named as ignored (p11-kit's rule)" "^warning: p11-kit: .*p11-kit reads no user configuration for root, so $HOME/\.config/pkcs11/modules is ignored"
fi
if ks doctor --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert all(sorted(p) == ["check", "fix", "problem", "severity"] and p["severity"] in ("error", "warning") for p in r["problems"])
'; then ok "--json problems: check, fix, problem, severity"; else bad "--json problems keys" "$(ks doctor --json)"; fi

# ---- a store with a token; permissions ---------------------------------------------------------
check "a token (the store is made)" ks token create --label work --pin-source env:PIN --so-pin-source env:SOPIN
doctor
expect "the store: keychain.db and its tokens" "^  store +ok +$KEYSHARE_HOME/keychain\.db \(1 token\)"
chmod 775 "$KEYSHARE_HOME"
doctor
expect "a group-writable store directory: an error line with chmod go-w" \
  "^error: store: $KEYSHARE_HOME is group-writable \(mode 0775\).*\. Fix: chmod go-w $KEYSHARE_HOME$"
if [ "$DOC_RC" = 1 ]; then ok "exit status 1 (the store refused)"; else bad "exit status 1 (the store refused)" "rc=$DOC_RC"; fi
check_fail "(the CLI itself refuses the same store)" 'group-writable' ks token list
bash -c "$(fix_of '^error: store')"
chmod 755 "$KEYSHARE_HOME"
doctor
expect "a store directory readable by others: a warning with chmod 700" "^warning: store: $KEYSHARE_HOME is readable by other users \(mode 0755\)\. Fix: chmod 700 $KEYSHARE_HOME$"
bash -c "$(fix_of '^warning: store')"
chmod 666 "$KEYSHARE_HOME/keychain.db"
doctor
expect "keychain.db writable by others: an error with chmod 600" "^error: store: $KEYSHARE_HOME/keychain\.db is writable by other users \(mode 0666\)\. Fix: chmod 600 "
bash -c "$(fix_of '^error: store')"
doctor
expect "the printed fixes, run as printed, leave no store problem" "^(error|warning): store" absent
mkdir -p "$W/shared" && chmod 777 "$W/shared"
(export KEYSHARE_HOME=$W/shared/ks; doctor
 expect "a new store under a world-writable parent: an error before anything is made" "^error: store: $W/shared is group- and world-writable \(mode 0777\)")

# ---- the agent, running and not ----------------------------------------------------------------
check "the agent started (agent restart)" ks agent restart
apid=$(cat "$(agent_dir)/agent.pid")
doctor
expect "the agent: running, its pid, version and protocol" "^  agent +ok +running, pid $apid, keyshare [0-9.]+, protocol [0-9]+, socket "
ks agent stop >/dev/null
doctor
expect "the agent stopped: reported as not running" "^  agent +ok +not running"
if ks agent status >/dev/null 2>&1; then bad "doctor did not restart it"; else ok "doctor did not restart it"; fi

# ---- browsers: Chromium's database without the module --------------------------------------------
mkdir -p "$HOME/.pki/nssdb" && printf 'library=\nname=NSS Internal PKCS #11 Module\n\n' >"$HOME/.pki/nssdb/pkcs11.txt"
doctor
expect "Chromium's database without keyshare: a warning, fix keyshare browser setup --chromium" \
  "^warning: browsers: Chromium's NSS database $HOME/\.pki/nssdb does not load keyshare .*\. Fix: keyshare browser setup --chromium$"
ks browser setup --chromium --module "$MODULE" >/dev/null
doctor
expect "after the setup: registered" "chromium: registered"

# A Firefox profile without the module: a warning (unless Firefox's policy adds it at the profile's start).
FF=$HOME/.mozilla/firefox
mkdir -p "$FF/abcd.default" && printf '[Profile0]\nName=default\nIsRelative=1\nPath=abcd.default\n' >"$FF/profiles.ini"
printf 'library=\nname=NSS Internal PKCS #11 Module\n\n' >"$FF/abcd.default/pkcs11.txt"
doctor
if grep -qs '"keyshare"' /etc/firefox/policies/policies.json; then
  expect "a Firefox profile without the module, Firefox's policy present: the policy adds it (no problem)" "firefox: 0 of 1 profile registered, policy registers the rest"
else
  expect "a Firefox profile without the module: a warning, fix keyshare browser setup --firefox" \
    "^warning: browsers: 1 Firefox profile does not load keyshare \($FF/abcd\.default\)\. Fix: keyshare browser setup --firefox$"
  bash -c "$(fix_of '^warning: browsers')" >/dev/null
  doctor
  expect "the fix run as printed: the profile registered" "firefox: 1 of 1 profile registered"
fi

# ---- TPM: a device at the TCTI, a soft token not sealed to it ------------------------------------
: >"$W/tpm-device" && chmod 600 "$W/tpm-device"
(export KEYSHARE_TCTI=device:$W/tpm-device; doctor
 expect "a TPM present and a soft token not bound: a warning with keyshare token bind --tpm" \
   "^warning: tpm: soft token work is not sealed to this machine's TPM .*\. Fix: keyshare token bind --tpm --token work$"
 ks doctor --json | python3 -c 'import json,sys; f={c["check"]: c["facts"] for c in json.load(sys.stdin)["checks"]}["tpm"]; assert f["present"] and f["unboundSoftTokens"] == ["work"], f' \
   && ok "--json: tpm present, unboundSoftTokens [work]" || bad "--json tpm facts")
# A label that needs quoting: the fix, read back by a shell, names the token exactly.
check "a second token, labelled \"Bob's work\"" ks token create --label "Bob's work" --pin-source env:PIN --so-pin-source env:SOPIN
(export KEYSHARE_TCTI=device:$W/tpm-device; doctor
 fix=$(fix_of "^warning: tpm: soft token Bob's work ")
 args=$(bash -c "keyshare() { printf '%s\n' \"\$@\"; }; $fix")
 if [ "$(printf '%s\n' "$args" | tail -1)" = "Bob's work" ] && [ "$(printf '%s\n' "$args" | wc -l)" = 5 ]; then
   ok "the fix quotes the label for the shell: $fix"
 else bad "the fix quotes the label for the shell" "$fix -> $args"; fi)
ks token delete "Bob's work" --so-pin-source env:SOPIN >/dev/null 2>&1
(export KEYSHARE_TCTI=device:$W/no-tpm; doctor
 expect "no TPM at the TCTI: not a problem for soft tokens" "^  tpm +ok +no TPM \($W/no-tpm absent\); 0 TPM tokens, 0 soft tokens bound, 1 not bound")

# ---- cards: a driver whose module is gone --------------------------------------------------------
SOFTHSM=/usr/lib/softhsm/libsofthsm2.so
if [ -r "$SOFTHSM" ]; then
  cp "$SOFTHSM" "$W/libsofthsm2.so"
  mkdir -p "$W/softhsm" && printf 'directories.tokendir = %s\nobjectstore.backend = file\n' "$W/softhsm" >"$W/softhsm2.conf"
  check "a card driver (a copy of SoftHSM2)" ks driver add --module "$W/libsofthsm2.so" --name gone --env "SOFTHSM2_CONF=$W/softhsm2.conf"
  doctor
  expect "the driver is listed" "^  cards +ok +drivers: gone; "
  rm "$W/libsofthsm2.so"
  doctor
  expect "its module removed: an error, fix keyshare driver remove" "^error: cards: driver gone: its module $W/libsofthsm2\.so does not exist\. Fix: keyshare driver remove gone$"
  bash -c "$(fix_of '^error: cards')" >/dev/null
  doctor
  expect "after the fix: no drivers" "^  cards +ok +no card drivers configured"
else bad "SoftHSM2 installed (softhsm2)" "$SOFTHSM missing"; fi

# ---- no secret in the output -------------------------------------------------------------------
out=$(ks doctor 2>&1; ks doctor --json 2>&1)
if printf '%s' "$out" | grep -qF -f <(printf '%s\n' "$PIN" "$SOPIN"); then bad "no PIN in doctor's output"; else ok "no PIN in doctor's output"; fi

# ---- make openssl-update against a local signed mirror -------------------------------------------
source "$HERE/support/openssl-update-check.sh"

finish
