#!/usr/bin/env bash
# keyshare backup / keyshare restore (issue 28, docs/backup.md): a store with an
# imported identity and a generated key is backed up while its agent runs,
# restored into a fresh KEYSHARE_HOME with a fresh XDG_RUNTIME_DIR ("another
# machine"), and both keys sign there through the module with the original PIN
# (openssl verifies with the original certificate and public key). A byte
# changed anywhere (header, middle, last byte), a truncated or extended
# archive, a wrong passphrase: refused whole, one line, the target home not
# even created. Existing output, a short passphrase, a passphrase on argv, a
# home with a store or an agent: refused. The archive holds no plaintext key
# (support/key_needles.py), no certificate, no SQLite page. With swtpm: a TPM
# token and a TPM-bound token are reported as not movable and left out.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/support/swtpm.sh"
new_home
HOME1=$KEYSHARE_HOME
WORK=$(mktemp -d /tmp/keyshare-backup.XXXXXX)
export PIN=1234-user SOPIN=9876-so-pin P12PASS=p12-pass BP='correct horse battery staple' WRONGBP='incorrect horse battery' SHORTBP=short
export KEYSHARE_AGENT_PROGRAM=$KS
unset KEYSHARE_IN_PROCESS
RUNS=()
WRITER=
cleanup() {
  [ -n "$WRITER" ] && kill "$WRITER" 2>/dev/null && wait "$WRITER" 2>/dev/null
  for r in "${RUNS[@]}"; do stop_agent "$r"; done
  tpm_stop "$WORK/tpm"
  rm -rf "$WORK" "$HOME1"
}
trap cleanup EXIT
ks() { "$KS" "$@"; }
# machine NAME: a new home (not created) and a new runtime directory; `on NAME CMD...` runs CMD there.
machine() {
  local run
  run=$(mktemp -d /tmp/keyshare-run.XXXXXX) && chmod 0700 "$run"
  RUNS+=("$run")
  eval "RUN_$1=$run HOME_$1=$WORK/$1/home"
}
on() { local n=$1; shift; local h="HOME_$n" r="RUN_$n"; KEYSHARE_HOME=${!h} XDG_RUNTIME_DIR=${!r} "$@"; }
P11=(pkcs11-tool --module "$MODULE")
printf 'signed after a restore\n' >"$WORK/data"

# --- the store: an identity from openssl, a key generated in the token ----------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/id.key" -out "$WORK/id.crt" \
  -subj /CN=backup-test -days 30 2>/dev/null
openssl pkcs12 -export -inkey "$WORK/id.key" -in "$WORK/id.crt" -out "$WORK/id.p12" -passout env:P12PASS -name backup-id
check "token work" ks token create --label work --pin-source env:PIN --so-pin-source env:SOPIN
check_out "import the identity" "imported identity" ks import "$WORK/id.p12" --password-source env:P12PASS --pin-source env:PIN
check "generate an EC key" ks key generate --type ec --label gk --tag gk --pin-source env:PIN
ks key public --tag gk >"$WORK/gk.pub"
openssl x509 -in "$WORK/id.crt" -outform DER -out "$WORK/id.der"
"${P11[@]}" --token-label work -O >/dev/null 2>&1  # the agent serves the store while it is backed up

# --- backup ----------------------------------------------------------------------------------------
A=$WORK/store.ksb
check_out "backup: 1 token, 5 items" "backed up 1 token \(5 items\) to $A" ks backup --out "$A" --passphrase-source env:BP
[ "$(stat -c %a "$A" 2>/dev/null)" = 600 ] && ok "the archive is mode 0600" || bad "archive mode" "$(stat -c %a "$A")"
check_fail "an existing output is refused" "already exists; add --force" ks backup --out "$A" --passphrase-source env:BP
before=$(sha256sum <"$A")
check_fail "a short passphrase is refused" "at least 10" ks backup --out "$WORK/short.ksb" --passphrase-source env:SHORTBP
[ ! -e "$WORK/short.ksb" ] && ok "a refused backup leaves no file" || bad "a refused backup leaves no file"
check_fail "a passphrase on the command line is refused" "env:VAR" ks backup --out "$WORK/argv.ksb" --passphrase-source not-a-source-form
check_fail "no passphrase source and no terminal: refused" "source option" setsid -w "$KS" backup --out "$WORK/tty.ksb" </dev/null
ln -s "$WORK/elsewhere" "$WORK/link.ksb"
check_fail "a symbolic link at the output is refused, even with --force" "symbolic link" \
  ks backup --out "$WORK/link.ksb" --force --passphrase-source env:BP
[ ! -e "$WORK/elsewhere" ] && ok "nothing was written through the link" || bad "written through the link"
check_out "--force replaces a regular file" "backed up" ks backup --out "$A" --force --passphrase-source env:BP
[ "$(sha256sum <"$A")" != "$before" ] && ok "--force wrote a new archive (fresh salt and nonce)" || bad "--force wrote a new archive"
json=$(ks backup --out "$WORK/j.ksb" --passphrase-source env:BP --json)
python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["items"]==5 and d["tokens"][0]["label"]=="work" and d["leftOut"]==[]' <<<"$json" \
  && ok "backup --json: tokens, items, nothing left out" || bad "backup --json" "$json"

# At a terminal (support/pty_answer.py types the passphrases, from the environment): asked twice.
PTY=(python3 "$HERE/support/pty_answer.py")
check_out "backup at a terminal: the passphrase asked twice" "backed up 1 token" \
  "${PTY[@]}" "Passphrase for the backup=env:BP" "Repeat passphrase for the backup=env:BP" -- "$KS" backup --out "$WORK/tty1.ksb"
out=$("${PTY[@]}" "Passphrase for the backup=env:BP" "Repeat passphrase for the backup=env:WRONGBP" -- "$KS" backup --out "$WORK/tty2.ksb"); rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "the two entries differ" <<<"$out" \
  && ok "two different entries at the terminal: refused" || bad "two different entries at the terminal: refused" "rc $rc: $out"
[ ! -e "$WORK/tty2.ksb" ] && ok "and no archive was written" || bad "no archive after differing entries"

# --- what the archive does not show -----------------------------------------------------------------
if python3 "$HERE/support/key_needles.py" "$A" "$WORK/id.key" >"$WORK/needles.out" 2>&1; then
  bad "the archive holds no byte run of the identity's private key" "$(cat "$WORK/needles.out")"
else
  [ $? -eq 1 ] && ok "the archive holds no byte run of the identity's private key ($(head -c 60 "$WORK/needles.out"))" \
    || bad "key_needles ran" "$(cat "$WORK/needles.out")"
fi
python3 - "$A" "$WORK/id.der" <<'EOF' && ok "the archive shows no certificate, label or SQLite page" || bad "the archive shows plaintext"
import sys
a = open(sys.argv[1], "rb").read()
assert a.startswith(b"KSBACKUP")
for needle in (open(sys.argv[2], "rb").read()[40:80], b"SQLite format 3", b"backup-id", b"com.keyshare.soft"):
    assert needle not in a, needle
EOF

# --- refused whole: nothing written, the home not even created -------------------------------------
machine t
size=$(stat -c %s "$A")
flip() {  # flip ARCHIVE OFFSET OUT: a copy with one bit changed at OFFSET (negative: from the end)
  python3 -c 'import sys; b=bytearray(open(sys.argv[1],"rb").read()); o=int(sys.argv[2]); b[o]^=0x01; open(sys.argv[3],"wb").write(b)' "$@"
}
REFUSED="not a keyshare backup|wrong passphrase for this backup|changed after it was written|truncated|cannot read this backup"
for spec in "0:magic" "8:version" "10:scrypt cost" "20:salt" "35:nonce" "50:passphrase check" "64:length" \
            "66:first ciphertext byte" "$((size / 2)):middle" "$((size - 17)):last ciphertext byte" "-1:last byte (tag)"; do
  off=${spec%%:*} what=${spec#*:}
  flip "$A" "$off" "$WORK/bad.ksb"
  check_fail "a byte changed at $off ($what): refused" "$REFUSED" on t ks restore "$WORK/bad.ksb" --passphrase-source env:BP
  [ ! -e "$HOME_t" ] || { bad "after a byte changed at $off the home stays absent" "$(ls -la "$HOME_t")"; rm -rf "$HOME_t"; }
done
[ ! -e "$HOME_t" ] && ok "after every refusal the target home does not exist" || bad "target home absent"
flip "$A" $((size / 2)) "$WORK/bad.ksb"
check_fail "the middle byte changed: the integrity check names it" "changed after it was written" \
  on t ks restore "$WORK/bad.ksb" --passphrase-source env:BP
head -c $((size - 1)) "$A" >"$WORK/short-archive.ksb"
check_fail "a truncated archive is refused" "truncated" on t ks restore "$WORK/short-archive.ksb" --passphrase-source env:BP
{ cat "$A"; printf x; } >"$WORK/long-archive.ksb"
check_fail "an archive with a byte appended is refused" "truncated or has bytes appended" on t ks restore "$WORK/long-archive.ksb" --passphrase-source env:BP
check_fail "a wrong passphrase is refused" "wrong passphrase" on t ks restore "$A" --passphrase-source env:WRONGBP
check_fail "a file that is no backup is refused" "not a keyshare backup" on t ks restore "$WORK/id.p12" --passphrase-source env:BP
mkdir -m 0700 -p "$HOME_t"
flip "$A" 100 "$WORK/bad.ksb"
check_fail "a tampered archive into an existing empty home: refused" "changed after it was written" \
  on t ks restore "$WORK/bad.ksb" --passphrase-source env:BP
[ -z "$(ls -A "$HOME_t")" ] && ok "the existing empty home stays empty" || bad "the empty home stays empty" "$(ls -A "$HOME_t")"
check_fail "restore into a home with a store is refused" "already holds a store" ks restore "$A" --passphrase-source env:BP
check_fail "a passphrase on the command line is refused (restore)" "env:VAR" on t ks restore "$A" --passphrase-source not-a-source-form

# An agent already serving the (empty) home would keep its empty view: refused.
machine g
mkdir -m 0700 -p "$HOME_g"
on g ks agent restart >/dev/null 2>&1
check_fail "restore into a home an agent serves is refused" "agent \(pid [0-9]+\) serves" on g ks restore "$A" --passphrase-source env:BP
[ ! -e "$HOME_g/keychain.db" ] && ok "with an agent there nothing was written" || bad "nothing written with an agent"

# --- another machine: restore, unlock with the original PIN, sign -----------------------------------
machine m
machine k
check_out "restore at a terminal: the passphrase asked once" "restored 1 token \(5 items\)" \
  on k "${PTY[@]}" "Passphrase of the backup=env:BP" -- "$KS" restore "$WORK/tty1.ksb"
check_out "restore into a fresh home" "restored 1 token \(5 items\) into $HOME_m" on m ks restore "$A" --passphrase-source env:BP
[ "$(stat -c %a "$HOME_m/keychain.db")" = 600 ] && [ "$(stat -c %a "$HOME_m")" = 700 ] \
  && ok "the restored store is 0600 in a 0700 home" || bad "restored modes" "$(stat -c '%a %n' "$HOME_m" "$HOME_m/keychain.db")"
[ -z "$(find "$HOME_m" -name '.keychain.db.*')" ] && ok "no temporary file is left in the home" || bad "temporary files left" "$(ls -A "$HOME_m")"
check_out "the restored store lists the token" "work" on m ks token list
check_fail "restoring twice is refused" "already holds a store" on m ks restore "$A" --passphrase-source env:BP
# pkcs11-tool picks the key to sign with by --id (not by --label).
id_of() { on m "${P11[@]}" --token-label work -O --type pubkey 2>/dev/null | awk -v l="$1" '$1=="label:"{cur=$2} $1=="ID:" && cur==l {print $2; exit}'; }
ID_ID=$(id_of backup-id) ID_GK=$(id_of gk)
[ -n "$ID_ID" ] && [ -n "$ID_GK" ] && [ "$ID_ID" != "$ID_GK" ] && ok "the restored token lists both keys (pkcs11-tool -O)" || bad "both keys listed" "$ID_ID $ID_GK"
on m "${P11[@]}" --token-label work --login --pin env:PIN -s -m ECDSA-SHA256 --id "$ID_ID" -i "$WORK/data" \
  -o "$WORK/sig-id" --signature-format openssl >"$WORK/p11.out" 2>&1 || bad "pkcs11-tool signs with backup-id" "$(cat "$WORK/p11.out")"
openssl x509 -in "$WORK/id.crt" -pubkey -noout >"$WORK/id.pub"
check_out "the restored identity signs through the module; the original certificate verifies it" "Verified OK" \
  openssl dgst -sha256 -verify "$WORK/id.pub" -signature "$WORK/sig-id" "$WORK/data"
on m "${P11[@]}" --token-label work --login --pin env:PIN -s -m ECDSA-SHA256 --id "$ID_GK" -i "$WORK/data" \
  -o "$WORK/sig-gk" --signature-format openssl >"$WORK/p11.out" 2>&1 || bad "pkcs11-tool signs with gk" "$(cat "$WORK/p11.out")"
check_out "the restored generated key signs; its original public key verifies it" "Verified OK" \
  openssl dgst -sha256 -verify "$WORK/gk.pub" -signature "$WORK/sig-gk" "$WORK/data"
check_out "the new machine's agent serves the restored store" "store: $HOME_m\$" on m ks agent status
check "keyshare key sign there too (the CLI through the agent)" on m ks key sign --tag gk --pin-source env:PIN "$WORK/data" "$WORK/sig-cli"
check_out "its signature verifies with the original public key" "Verified OK" \
  openssl dgst -sha256 -verify "$WORK/gk.pub" -signature "$WORK/sig-cli" "$WORK/data"
json=$(on m ks backup --out "$WORK/m.ksb" --passphrase-source env:BP --json)
machine n
json2=$(on n ks restore "$WORK/m.ksb" --passphrase-source env:BP --json)
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["items"]==5 and d["home"] and d["tokens"][0]["kind"]=="soft"' "$json2" \
  && ok "a backup of the restored store restores again (--json report)" || bad "second generation restore" "$json $json2"

# --- consistent while the agent writes -----------------------------------------------------------
# Key pairs are generated (in the agent, one transaction per pair) while three
# backups are taken: each restores, and holds whole pairs only (5 + 2k items).
( for i in $(seq 40); do "$KS" key generate --type ec --label w$i --tag w$i --pin-source env:PIN >/dev/null 2>&1 || exit 1; done ) &
WRITER=$!
for i in 1 2 3; do
  sleep 0.3
  ks backup --out "$WORK/busy$i.ksb" --passphrase-source env:BP >/dev/null 2>"$WORK/busy$i.err" || bad "backup $i while the agent writes" "$(cat "$WORK/busy$i.err")"
done
wait "$WRITER" && ok "the writer made its 40 key pairs meanwhile" || bad "the writer made its key pairs"
WRITER=
counts="" whole=1
for i in 1 2 3; do
  machine b$i
  out=$(on b$i ks restore "$WORK/busy$i.ksb" --passphrase-source env:BP --json 2>&1)
  n=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["items"])' "$out" 2>/dev/null)
  counts="$counts $n"
  [ -n "$n" ] && [ $((n % 2)) -eq 1 ] && [ "$n" -ge 5 ] && [ "$n" -le 85 ] || { bad "backup $i taken during writes restores whole pairs" "$out"; whole=0; }
done
[ "$whole" = 1 ] && ok "backups taken while the agent wrote restore, each with whole key pairs (items:$counts)"

# --- TPM: bound to the device, reported, left out ---------------------------------------------------
if command -v swtpm >/dev/null && PT=$(tpm_start_free "$WORK/tpm"); then
  machine p
  mkdir -m 0700 -p "$HOME_p"
  tpm() { KEYSHARE_TCTI=swtpm:host=127.0.0.1,port=$PT on p "$@"; }
  check "TPM token T" tpm ks token create --label T --tpm --pin-source env:PIN --so-pin-source env:SOPIN
  check "a key in the TPM" tpm ks key generate --type ec --label tk --tag tk --token T --pin-source env:PIN
  check "a soft token bound to the TPM" tpm ks token create --label bnd --bind tpm --pin-source env:PIN --so-pin-source env:SOPIN
  # Not bound (a TPM here may make binding the default: --no-bind where the CLI has it).
  nobind=(); ks token create --help 2>&1 | grep -q -- --no-bind && nobind=(--no-bind)
  check "a soft token" tpm ks token create --label free "${nobind[@]}" --pin-source env:PIN --so-pin-source env:SOPIN
  check "a key in the soft token" tpm ks key generate --type ec --label fk --tag fk --token free --pin-source env:PIN
  out=$(tpm ks backup --out "$WORK/tpm.ksb" --passphrase-source env:BP 2>&1)
  grep -Eq "not backed up: token T \([0-9]+ items\): a TPM token: its keys exist only inside this machine's TPM" <<<"$out" \
    && ok "backup says the TPM token cannot move" || bad "backup reports the TPM token" "$out"
  grep -q "not backed up: token bnd .*sealed to this machine's TPM.*keyshare token unbind --token bnd" <<<"$out" \
    && ok "backup says the bound token cannot move and how to move it" || bad "backup reports the bound token" "$out"
  grep -q "^backed up 1 token (2 items)" <<<"$out" && ok "the soft token is backed up" || bad "soft token backed up" "$out"
  json=$(tpm ks backup --out "$WORK/tpm2.ksb" --passphrase-source env:BP --json)
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); k=sorted(t["kind"] for t in d["leftOut"]); assert k==["tpm","tpm-bound"], k; assert all(t["instead"] for t in d["leftOut"])' "$json" \
    && ok "backup --json: leftOut names tpm and tpm-bound, each with what to do instead" || bad "backup --json leftOut" "$json"
  machine q
  KEYSHARE_TCTI=swtpm:host=127.0.0.1,port=1 check_out "restore on a machine without that TPM: the soft token" "restored 1 token \(2 items\)" \
    on q ks restore "$WORK/tpm.ksb" --passphrase-source env:BP
  list=$(KEYSHARE_TCTI=swtpm:host=127.0.0.1,port=1 on q ks token list 2>&1)
  grep -q free <<<"$list" && ! grep -Eq "^(T|bnd) " <<<"$list" && ok "the restored store has the soft token only" || bad "restored tokens" "$list"
else
  bad "swtpm starts (make deps installs swtpm)"
fi

finish
