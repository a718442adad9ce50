#!/usr/bin/env bash
# 88-cli-adoption: issue 28 ("Adoption"), the parts a first-time user meets:
#  1. the licence: LICENSE is the Apache License 2.0, dist/debian/copyright is DEP-5 with a
#     paragraph per component linked in statically (OpenSSL named as static), README says so;
#  2. a self-signed CA:TRUE identity (`openssl req -x509`) imported as a PKCS #12 is an identity:
#     `keyshare export` writes it (the round trip checked with openssl) and the share tree has it;
#  3. the CLI: `list` with NOT AFTER / notAfter, --expiring, the common name, CERT TYPE words, a
#     table that fits 120 columns (--wide for all); unique token labels; ~ in file: sources and
#     errno when one cannot be read; --pin-source 1234 names the accepted forms (without echoing
#     the value); a mistyped subcommand gets a suggestion; --json on every command that prints;
#     no help text points at a source-tree path;
#  4. PIN attempts spent by accident: an empty or cancelled prompt and a PIN outside 4..255 bytes
#     are no attempt (CLI: one line; C_Login: CKR_PIN_LEN_RANGE), the counter stays at 0;
#  5. new PINs without a TPM: fewer than 6 characters refused unless --short-pin, a warning below 8.
set -u
KS=${1:?keyshare binary}; MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$HERE/../.." && pwd)
new_home
WORK=$(mktemp -d /tmp/keyshare-88.XXXXXX)
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
export PIN=1234-user SOPIN=9876-so P12PASS=keyshare-test
ID="$FIXTURES/identities"
ks() { "$KS" "$@"; }
# user_pin_state TOKEN: the token's USER PIN state as `token list --json` gives it ("ok", "N failed", ...).
user_pin_state() { ks token list --json | python3 -c 'import json,sys; print([t["userPIN"] for t in json.load(sys.stdin) if t["label"] == sys.argv[1]][0])' "$1"; }

# ---- 1. the licence ----------------------------------------------------------------------------
check_out "LICENSE is the Apache License 2.0 verbatim (SHA-256 of apache.org's LICENSE-2.0.txt)" \
  '^cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30 ' sha256sum "$ROOT/LICENSE"
if grep -q 'Runtime Library Exception' "$ROOT/LICENSE"; then bad "LICENSE has no Swift runtime exception"; else ok "LICENSE has no Swift runtime exception"; fi
copyright_checks "$ROOT/dist/debian/copyright" "$KS"
check_out "README's licence line" '^Apache License 2\.0 \(\[LICENSE\]' cat "$ROOT/README.md"

# ---- 5 (first: token create is needed by the rest). New PINs without a TPM ----------------------
export PIN4=2580 PIN5=25802 PIN6=258025 PIN8=25802580 SO8=so-25802580
check_fail "token create: a 4-digit user PIN is refused without --short-pin (the odds named)" \
  'user PIN has 4 characters: without a TPM a PIN needs at least 6 \(.*every 4-digit PIN is tried in about 16 minutes.*--short-pin' \
  ks token create --label short4 --pin-source env:PIN4 --so-pin-source env:SO8
check_fail "token create: a 5-character SO PIN too" 'SO PIN has 5 characters' \
  ks token create --label short5 --pin-source env:PIN8 --so-pin-source env:PIN5
check_out "... and nothing was created" '^no tokens' ks token list
out=$(ks token create --label short4 --pin-source env:PIN4 --so-pin-source env:SO8 --short-pin 2>&1 >/dev/null); rc=$?
if [ "$rc" -eq 0 ] && grep -q 'warning: the user PIN has 4 characters: with a copy of the store every 4-digit PIN is tried in about 16 minutes' <<<"$out"; then
  ok "token create --short-pin: accepted, with a warning that gives the arithmetic"
else bad "token create --short-pin: accepted, with a warning" "rc $rc: $out"; fi
out=$(ks token create --label six --pin-source env:PIN6 --so-pin-source env:SO8 2>&1 >/dev/null); rc=$?
if [ "$rc" -eq 0 ] && grep -q 'warning: the user PIN has 6 characters: .* about 27 hours' <<<"$out"; then
  ok "token create: a 6-digit PIN is accepted with a warning (about 27 hours)"
else bad "token create: a 6-digit PIN is accepted with a warning" "rc $rc: $out"; fi
out=$(ks token create --label adopt --pin-source env:PIN --so-pin-source env:SO8 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 0 ] && [ -z "$out" ] && ok "token create: 8 characters or more, no warning" || bad "token create: 8 characters or more, no warning" "rc $rc: $out"
check_out "token create --help gives the arithmetic (16 minutes, 27 hours, 112 days)" 'about 16 minutes.*about 27 hours.*about 112 days' \
  bash -c "'$KS' token create --help | tr -s ' \n' ' '"
check_fail "set-pin: a 5-character new PIN is refused" 'new user PIN has 5 characters.*--short-pin' \
  ks token set-pin --token six --pin-source env:PIN6 --new-pin-source env:PIN5
check_out "set-pin --short-pin: accepted" 'changed' ks token set-pin --token six --pin-source env:PIN6 --new-pin-source env:PIN5 --short-pin
check_fail "init-pin: a 4-digit new PIN is refused" 'new user PIN has 4 characters' \
  ks token init-pin --token six --so-pin-source env:SO8 --new-pin-source env:PIN4
check_out "init-pin: 8 characters, accepted" 'set' ks token init-pin --token six --so-pin-source env:SO8 --new-pin-source env:PIN8

# ---- 3. unique labels ----------------------------------------------------------------------------
check_fail "token create: a label in use is refused" 'a token labelled adopt exists already \(com\.keyshare\.soft:' \
  ks token create --label adopt --pin-source env:PIN --so-pin-source env:SO8
check_out "... so --token adopt still names one token" '^1$' bash -c "'$KS' token list --json | grep -c '\"label\" : \"adopt\"'"

# ---- 2. a self-signed CA:TRUE identity -----------------------------------------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/ss.key" -out "$WORK/ss.crt" \
  -subj "/CN=Self Signed Test" -days 20 2>/dev/null
openssl pkcs12 -export -inkey "$WORK/ss.key" -in "$WORK/ss.crt" -out "$WORK/ss.p12" -passout env:P12PASS
check_out "openssl req -x509 made a CA:TRUE certificate" 'CA:TRUE' openssl x509 -in "$WORK/ss.crt" -noout -ext basicConstraints
check_out "import it as a PKCS #12" 'imported' ks import "$WORK/ss.p12" --token adopt --label selfsigned --pin-source env:PIN --password-source env:P12PASS
check_out "export it (an identity although CA:TRUE)" 'exported selfsigned' ks export selfsigned --token adopt --out "$WORK/out.p12" --pin-source env:PIN
SHARED=$(ks password show --stdout --token adopt --pin-source env:PIN); export SHARED
der() { openssl x509 -outform DER "$@" | sha256sum | cut -d' ' -f1; }
a=$(der -in "$WORK/ss.crt"); b=$(openssl pkcs12 -in "$WORK/out.p12" -passin env:SHARED -nokeys -clcerts 2>/dev/null | der)
[ -n "$a" ] && [ "$a" = "$b" ] && ok "round trip: the exported certificate is the imported one" || bad "round trip: the certificate" "$a / $b"
a=$(openssl x509 -in "$WORK/ss.crt" -noout -pubkey | sha256sum)
b=$(openssl pkcs12 -in "$WORK/out.p12" -passin env:SHARED -nocerts -nodes 2>/dev/null | openssl pkey -pubout | sha256sum)
[ "$a" = "$b" ] && ok "round trip: the exported private key is the certificate's" || bad "round trip: the private key" "$a / $b"
# The share tree names identities by the certificate's SHA-256 (the key-sharing label, docs/browsers.md "Names").
SSFP=$(der -in "$WORK/ss.crt" | tr a-f A-F)
check_out "the share tree offers it" "$SSFP" ks share list --token adopt --pin-source env:PIN --json

# ---- 3. keyshare list -----------------------------------------------------------------------------
ks import "$ID/device-ds-ke.modern.p12" --token adopt --pin-source env:PIN --password-source env:P12PASS >/dev/null
FP="Test Device 1234567890( \(device [0-9A-F]+\))?"   # the default label: the certificate's CN, made unique
list=$(ks list --token adopt --pin-source env:PIN)
check_out "list: NOT AFTER and COMMON NAME columns" '^CLASS +LABEL +KEY +CERT TYPE +COMMON NAME +NOT AFTER +REFERENCE$' echo "$list"
check_out "list: the self-signed identity: self-signed CA, its CN, its expiry date" \
  "^certificate +selfsigned +EC P-256 +self-signed CA +Self Signed Test +$(date -u -d '+20 days' +%Y-%m-%d)" echo "$list"
check_out "list: an ordinary certificate's type from its extended key usage (TLS client)" \
  '^certificate +Test Device [0-9]*…? +RSA-2048 +TLS client +Test Device 1234567890 +2040-01-10 ' echo "$list"
wmax=$(wc -L <<<"$list")
[ "$wmax" -le 120 ] && ok "list: every line fits 120 columns (longest $wmax, with a 64-character label)" || bad "list: every line fits 120 columns" "$list"
check_out "list --wide: the full label, NOT BEFORE, the token and the URI" "^certificate +$FP .*2025-01-10T08:00:00Z +2040-01-10T08:00:00Z +adopt +[A-Za-z0-9_-]+ +pkcs11:token=adopt" \
  ks list --token adopt --wide
check_out "list --json: notAfter, commonName and certificatePurpose" '"certificatePurpose" : "TLS client",.*"commonName" : "Test Device 1234567890",.*"notAfter" : "2040-01-10T08:00:00Z"' \
  bash -c "'$KS' list --token adopt --json | tr -d '\n'"
check_out "list --expiring 30d: the certificate that expires in 20 days, not the 2040 one" '^certificate +selfsigned ' ks list --expiring 30d
if ks list --expiring 30d | grep -q 'Test Device'; then bad "list --expiring 30d leaves out the 2040 certificate"; else ok "list --expiring 30d leaves out the 2040 certificate"; fi
check_out "list --expiring 10d: nothing" '^no certificate expires within 10d$' ks list --expiring 10d
check_fail "list --expiring: a bad duration is one line" 'expiring takes N followed by d, w, h or m' ks list --expiring soon

# ---- 3. secret sources ----------------------------------------------------------------------------
mkdir -p "$WORK/home"; printf '%s\n' "$P12PASS" > "$WORK/home/p12.pass"
check_out "file:~/p12.pass: ~ is the home directory, as a shell expands it" 'imported|already' \
  env HOME="$WORK/home" "$KS" import "$ID/signature-ds-email.legacy.p12" --token adopt --pin-source env:PIN --password-source 'file:~/p12.pass'
check_fail "a source file that is not there: errno named" 'user PIN: cannot read /nonexistent/pin: No such file or directory' \
  ks list --token adopt --pin-source file:/nonexistent/pin
check_fail "a source that is a directory: errno named" "cannot read $WORK: Is a directory" ks list --token adopt --pin-source "file:$WORK"
err=$(ks list --token adopt --pin-source 13579 2>&1 >/dev/null)
if grep -q '^keyshare: --pin-source takes env:VAR (an environment variable), file:PATH' <<<"$err" && ! grep -q 13579 <<<"$err"; then
  ok "--pin-source 13579: the accepted forms, and the value is not repeated"
else bad "--pin-source 13579: the accepted forms, and the value is not repeated" "$err"; fi
check_fail "--so-pin-source too" '^keyshare: --so-pin-source takes env:VAR' ks token delete six --so-pin-source 13579

# ---- 3. a mistyped subcommand -------------------------------------------------------------------
check_fail "keyshare tokn list: did you mean token" "^keyshare: 'tokn' is not a keyshare command; did you mean 'keyshare token'\?" ks tokn list
check_fail "keyshare token lsit: did you mean token list" "did you mean 'keyshare token list'\?" ks token lsit
check_fail "keyshare lst: did you mean list" "did you mean 'keyshare list'\?" ks lst
check_fail "keyshare frobnicate: the commands listed" "'frobnicate' is not a keyshare command; the commands are: token, " ks frobnicate

# ---- 3. --json on every command that prints, and help texts -------------------------------------
ks --experimental-dump-help > "$WORK/help.json"
# Commands whose output is data (a PEM, a signature, a file) or a server's log, not a report.
NOJSON="keyshare help|keyshare agent run|keyshare serve|keyshare driver snapshot|keyshare driver events|keyshare key encrypt|keyshare key decrypt|keyshare key sign|keyshare key public|keyshare key decapsulate"
missing=$(python3 - "$WORK/help.json" "$NOJSON" <<'EOF'
import json, sys
exempt = set(sys.argv[2].split("|"))
def walk(c, path):
    subs = c.get("subcommands") or []
    if not subs:
        names = {n["name"] for a in c.get("arguments", []) or [] for n in (a.get("names") or [])}
        if " ".join(path) not in exempt and "json" not in names:
            print(" ".join(path))
    for s in subs:
        walk(s, path + [s["commandName"]])
walk(json.load(open(sys.argv[1]))["command"], ["keyshare"])
EOF
)
[ -z "$missing" ] && ok "--json on every command that prints a report" || bad "--json on every command that prints a report" "$missing"
check_out "unlock --status --json" '"unlocked" : \[' ks unlock --status --json
check_out "token insert --json" '"alreadyPresent" : true' ks token insert adopt --json
check_out "token tpm-config --json" '"tcti" : ' ks token tpm-config --json
check_out "agent socket --json" '"socket" : "/' ks agent socket --json
docrefs=$(grep -o '[a-z/]*docs/[A-Za-z0-9_.-]*' "$WORK/help.json" | sort -u)
[ -z "$docrefs" ] && ok "no help text points at a source-tree path (docs/...)" || bad "no help text points at a source-tree path" "$docrefs"
pages=$(python3 - "$WORK/help.json" <<'EOF'
import json, sys
def walk(c, path):
    yield "-".join(path)
    for s in c.get("subcommands") or []:
        yield from walk(s, path + [s["commandName"]])
print("\n".join(walk(json.load(open(sys.argv[1]))["command"], ["keyshare"])))
EOF
)
unknown=""
for ref in $(grep -o 'keyshare[a-z-]*([0-9])' "$WORK/help.json" | sort -u); do
  name=${ref%(*}; sec=${ref#*(}; sec=${sec%)}
  if [ "$sec" = 1 ] && grep -qx "$name" <<<"$pages"; then continue; fi
  [ "$ref" = "keyshare-pkcs11(7)" ] && continue
  unknown="$unknown $ref"
done
[ -z "$unknown" ] && ok "every man page a help text names exists" || bad "every man page a help text names exists" "$unknown"

# ---- 4. PIN attempts spent by accident ------------------------------------------------------------
check_out "the user PIN of adopt: no failure yet" '^ok$' user_pin_state adopt
printf '13' > "$WORK/short.pin"
check_fail "--pin-source with a 2-byte PIN: one line, not tried" 'the user PIN given has 2 bytes; PINs are 4 to 255 bytes, so it was not tried and no attempt was counted' \
  ks list --token adopt --pin-source "file:$WORK/short.pin"
check_out "... no attempt counted" '^ok$' user_pin_state adopt
for answer in enter 'keys:\x04'; do
  what=$([ "$answer" = enter ] && echo "an empty Enter" || echo "Ctrl-D")
  out=$(python3 "$HERE/support/pty_answer.py" "User PIN for adopt: =$answer" -- "$KS" list --token adopt --private 2>&1); rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q 'keyshare: no user PIN entered: nothing was tried' <<<"$out"; then
    ok "$what at the PIN prompt: one line, nothing tried"
  else bad "$what at the PIN prompt: one line, nothing tried" "rc $rc: $out"; fi
  check_out "... no attempt counted ($what)" '^ok$' user_pin_state adopt
done
export SHORTPIN=13 LONGPIN=$(head -c 256 /dev/zero | tr '\0' 'p')
# says NAME REGEX CMD...: CMD fails and its output matches REGEX (pkcs11-tool prints the CK_RV and exits 1).
says() { local name=$1 re=$2 out; shift 2; if out=$("$@" 2>&1); then bad "$name" "$out"; elif grep -Eq -- "$re" <<<"$out"; then ok "$name"; else bad "$name" "$out"; fi; }
says "C_Login with a 2-byte user PIN: CKR_PIN_LEN_RANGE" 'C_Login failed: rv = CKR_PIN_LEN_RANGE' \
  pkcs11-tool --module "$MODULE" --token-label adopt --login --pin env:SHORTPIN -O
says "C_Login with a 256-byte user PIN: CKR_PIN_LEN_RANGE" 'C_Login failed: rv = CKR_PIN_LEN_RANGE' \
  pkcs11-tool --module "$MODULE" --token-label adopt --login --pin env:LONGPIN -O
says "C_Login as SO with a 2-byte PIN: CKR_PIN_LEN_RANGE" 'C_Login failed: rv = CKR_PIN_LEN_RANGE' \
  pkcs11-tool --module "$MODULE" --token-label adopt --login --login-type so --so-pin env:SHORTPIN --init-pin --new-pin env:PIN
check_out "... no attempt counted (user)" '^ok$' user_pin_state adopt
check_out "... no attempt counted (SO: the SO PIN still opens at the first try)" 'set' \
  ks token init-pin --token adopt --so-pin-source env:SO8 --new-pin-source env:PIN
export WRONG=9999-bad
check_fail "a wrong PIN of a valid length still counts" 'incorrect user PIN for token adopt \(9 attempts left' \
  ks list --token adopt --pin-source env:WRONG
check_out "... 1 failed" '^1 failed$' user_pin_state adopt
finish
