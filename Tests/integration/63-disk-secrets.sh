#!/usr/bin/env bash
# An attacker who can read the disk (issue 8). After importing identities,
# generating keys, setting PINs and the shared password, and signing through
# the module with debug logging on: no secret (each private key's DER in
# PKCS #8 and traditional form, each big-number component >= 16 bytes, the
# PINs, the shared password; raw, hex and base64) appears in the store's
# files, the WAL, temp files (a private TMPDIR) or the logs. Then, on copies
# of the store: swapping encrypted values between rows or attributes, or
# flipping a byte of one, makes decryption fail with a clear error; and loose
# file modes are tightened to 0700/0600 at open.
# Usage: 63-disk-secrets.sh KEYSHARE MODULE.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-disk.XXXXXX)        # holds the reference secrets: never searched
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
export TMPDIR="$KEYSHARE_HOME.tmp"; mkdir -p "$TMPDIR"; trap 'rm -rf "$WORK" "$KEYSHARE_HOME" "$TMPDIR"' EXIT
export PIN=Pin-Secret-94173 SOPIN=So-Secret-55821 P12PASS=keyshare-test P384PASS='B:M>A)G[{qso0ZX,dhHD843j7?BA/!.E'
export KEYSHARE_DEBUG=1 KEYSHARE_LOG="$TMPDIR/module.log"
ID="$FIXTURES/identities"
LOG="$TMPDIR/cli.log"
ks() { "$KS" "$@" >>"$LOG" 2>&1; }

check "token create" ks token create --label disk --pin-source env:PIN --so-pin-source env:SOPIN
# A reader holding a snapshot from before the writes keeps every later frame in
# the WAL (no checkpoint can pass it), so the search sees what a crash would leave.
python3 -c 'import sqlite3,sys,time
c = sqlite3.connect(sys.argv[1], isolation_level=None); c.execute("BEGIN"); c.execute("SELECT count(*) FROM items").fetchall()
open(sys.argv[2], "w").close(); time.sleep(300)' "$KEYSHARE_HOME/keychain.db" "$WORK/holder" &
HOLDER=$!
for _ in $(seq 100); do [ -e "$WORK/holder" ] && break; sleep 0.1; done
check "import RSA, EC P-256, EC P-384 identities" eval 'ks import "$ID/device-ds-ke.modern.p12" "$ID/signature-ds-email.modern.p12" --pin-source env:PIN --password-source env:P12PASS && ks import "$ID/auth-upn-new.modern.p12" --pin-source env:PIN --password-source env:P384PASS'
check "generate EC and RSA key pairs" eval 'ks key generate --type ec --curve P-256 --label gen-ec --tag gen-ec --pin-source env:PIN && ks key generate --type rsa --bits 2048 --label gen-rsa --tag gen-rsa --pin-source env:PIN'
"$KS" password show --stdout --pin-source env:PIN >"$WORK/shared" 2>/dev/null
[ "$(wc -c <"$WORK/shared")" -ge 9 ] && ok "shared password set" || bad "shared password set"
LABEL=$(p12_label "$ID/device-ds-ke.modern.p12")  # the identity's label: its friendlyName
sign() { pkcs11-tool --module "$MODULE" --token-label disk --login --pin env:PIN --sign --mechanism SHA256-RSA-PKCS \
  --label "$LABEL" --input-file /etc/hostname --output-file "$1"; }
check "sign through the module (debug log on)" sign "$TMPDIR/sig"
[ -s "$KEYSHARE_LOG" ] && ok "module debug log written" || bad "module debug log written"

# Reference secrets, in $WORK only.
for n in device-ds-ke signature-ds-email auth-upn-new; do
  openssl pkey -in "$ID/$n.key.pem" -outform DER -out "$WORK/$n.p8"
  openssl rsa -in "$ID/$n.key.pem" -outform DER -out "$WORK/$n.trad" 2>/dev/null \
    || openssl ec -in "$ID/$n.key.pem" -outform DER -out "$WORK/$n.trad" 2>/dev/null
  openssl pkey -in "$ID/$n.key.pem" -text -noout >"$WORK/$n.txt"
done
out=$(python3 - "$WORK" "$KEYSHARE_HOME" "$TMPDIR" <<'EOF'
import base64, glob, os, re, sys
work, home, tmp = sys.argv[1:4]
secrets = {}
for f in glob.glob(work + "/*.p8") + glob.glob(work + "/*.trad"):
    secrets[os.path.basename(f)] = open(f, "rb").read()
for f in glob.glob(work + "/*.txt"):
    # openssl -text: "name:" then hex lines; public parts (modulus, pub, exponent) are not secret.
    name = None; parts = {}
    for line in open(f):
        m = re.match(r"^(\w[\w ]*):\s*$", line)
        if m: name = m.group(1); parts[name] = ""; continue
        if name and re.match(r"^\s+[0-9a-f:]+$", line): parts[name] += line.strip()
        else: name = None
    for k, v in parts.items():
        if k in ("modulus", "pub"): continue
        b = bytes.fromhex(v.replace(":", "")).lstrip(b"\0")
        if len(b) >= 16: secrets[f"{os.path.basename(f)}:{k}"] = b
for k in ("PIN", "SOPIN"): secrets[k] = os.environ[k].encode()
secrets["shared password"] = open(work + "/shared", "rb").read().strip()
forms = {}
for k, v in secrets.items():
    forms[k] = v; forms[k + " (hex)"] = v.hex().encode(); forms[k + " (HEX)"] = v.hex().upper().encode()
    if len(v) > 24: forms[k + " (b64)"] = base64.b64encode(v)[8:40]
files = [p for d in (home, tmp) for p in glob.glob(d + "/**", recursive=True) if os.path.isfile(p)]
found = []
for p in files:
    data = open(p, "rb").read()
    found += [f"{k} in {os.path.basename(p)}" for k, v in forms.items() if v in data]
print(f"{len(secrets)} secrets x {len(forms)//len(secrets)} forms searched in {len(files)} files: " +
      (", ".join(sorted(set(os.path.basename(p) for p in files)))))
print("FOUND: " + "; ".join(found) if found else "none found")
EOF
)
kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null
echo "  $(head -1 <<<"$out")"
grep -q "none found" <<<"$out" && ok "no secret in store, WAL, temp files or logs" || bad "secrets on disk" "$(tail -1 <<<"$out")"
grep -q "keychain.db-wal" <<<"$out" && ok "the WAL was searched" || bad "the WAL was searched" "$out"
unset KEYSHARE_DEBUG KEYSHARE_LOG

# Tampering, each on a fresh copy of the store. MODE: swap-rows, swap-attrs, flip.
tamper() {
  local mode=$1 pos=${2:-0} copy="$WORK/copy-$1-$2"
  cp -a "$KEYSHARE_HOME" "$copy"
  python3 - "$copy/keychain.db" "$mode" "$pos" <<'EOF' || return 1
import sqlite3, sys
db = sqlite3.connect(sys.argv[1]); mode, pos = sys.argv[2], int(sys.argv[3]); P8 = 0x80004B53
rows = db.execute("SELECT item, value FROM attributes WHERE type = ? ORDER BY item", (P8,)).fetchall()
if mode == "swap-rows":      # two private keys trade their sealed PKCS #8
    (a, va), (b, vb) = rows[0], rows[1]
    db.execute("UPDATE attributes SET value = ? WHERE item = ? AND type = ?", (vb, a, P8))
    db.execute("UPDATE attributes SET value = ? WHERE item = ? AND type = ?", (va, b, P8))
elif mode == "swap-attrs":   # within every private key: the PKCS #8 and the (sealed) label trade places
    for item, v in rows:
        lab = db.execute("SELECT value FROM attributes WHERE item = ? AND type = 3 AND encrypted = 1", (item,)).fetchone()
        db.execute("UPDATE attributes SET value = ? WHERE item = ? AND type = ?", (lab[0], item, P8))
        db.execute("UPDATE attributes SET value = ? WHERE item = ? AND type = 3", (v, item))
else:                        # flip one byte of every sealed PKCS #8 at relative position pos/100
    for item, v in rows:
        v = bytearray(v); i = min(len(v) - 1, len(v) * pos // 100); v[i] ^= 0x01
        db.execute("UPDATE attributes SET value = ? WHERE item = ? AND type = ?", (bytes(v), item, P8))
db.commit()
EOF
  local err rc
  err=$(KEYSHARE_HOME="$copy" "$KS" export "$LABEL" --out "$copy/out.p12" --pin-source env:PIN 2>&1 >/dev/null) && rc=0 || rc=$?
  if [ "$rc" -ne 0 ] && [ ! -s "$copy/out.p12" ] && grep -qiE "decrypt|tamper|authentic|integrity|corrupt" <<<"$err"; then
    ok "$mode $pos: export fails clearly ($(head -c 90 <<<"$err"))"
  else bad "$mode $pos: export fails clearly" "exit $rc: $err"; fi
  local sig rc2
  sig=$(KEYSHARE_HOME="$copy" sign "$copy/sig" 2>&1) && rc2=0 || rc2=$?
  [ "$rc2" -ne 0 ] && ok "$mode $pos: module refuses to sign" || bad "$mode $pos: module refuses to sign" "$sig"
}
for t in "swap-rows 0" "swap-attrs 0" "flip 0" "flip 50" "flip 99"; do tamper $t; done

# File modes: loosened by hand, tightened at the next open.
chmod 0755 "$KEYSHARE_HOME"; chmod 0644 "$KEYSHARE_HOME/keychain.db"
"$KS" token list >/dev/null 2>&1
[ "$(stat -c %a "$KEYSHARE_HOME")" = 700 ] && ok "loose home 0755 tightened to 0700 at open" || bad "home mode" "$(stat -c %a "$KEYSHARE_HOME")"
[ "$(stat -c %a "$KEYSHARE_HOME/keychain.db")" = 600 ] && ok "loose db 0644 tightened to 0600 at open" || bad "db mode" "$(stat -c %a "$KEYSHARE_HOME/keychain.db")"
modes=$(stat -c '%a %n' "$KEYSHARE_HOME"/* | grep -v '^600 ' || true)
[ -z "$modes" ] && ok "every file in the store dir is 0600" || bad "every file in the store dir is 0600" "$modes"
finish
