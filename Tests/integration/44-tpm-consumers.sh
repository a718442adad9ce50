#!/usr/bin/env bash
# Keys generated in the TPM through the real consumers (issue 17): a TPM token
# on a real swtpm (support/swtpm.sh: private state, loopback, stopped by PID)
# holding an EC P-256 and an RSA-2048 key made in the TPM, then
#  - OpenSSL 3.0 + libp11's engine: public keys exported, pkeyutl and dgst
#    sign (ECDSA, PKCS #1, PSS), OAEP decryption, req -x509 self-signed
#    certificates; openssl verifies every signature with the exported key;
#  - OpenSSH: ssh-keygen -D MODULE prints both keys, `ssh -I MODULE` logs in
#    to a private sshd on 127.0.0.1 with each of them (only that key in
#    authorized_keys), and is refused when another key is authorized;
#  - GnuTLS: p11tool --list-privkeys and certtool --generate-self-signed with
#    the module as provider (p11-kit's module files are ignored for root:
#    53-pkcs11-consumers covers that path as an unprivileged user);
#  - `keyshare export` of a TPM identity: one clear line, non-zero exit, no
#    file; the share tree (list, get, export-tree) leaves it out with a note;
#  - the store and every commit in its WAL: no PKCS #8 of a TPM token's key.
# PINs reach programs through the environment, a pipe (libp11's
# pin-source=file:/dev/fd/3) or SSH_ASKPASS, never argv (checked by strace).
# Passes in the default (agent) mode and with KEYSHARE_IN_PROCESS=1.
# Usage: 44-tpm-consumers.sh KEYSHARE MODULE. Ends with "N passed, M failed, K xfail".
set -uo pipefail
KEYSHARE=$(realpath "${1:?keyshare binary}")
MODULE=$(realpath "${2:?module path}")
. "$(dirname "$0")/lib.sh"
. "$HERE/support/consumers.sh"
. "$HERE/support/sshd.sh"
. "$HERE/support/swtpm.sh"
enter_sandbox "$@"
T0=$SECONDS
# The agent (it may hold a TPM connection) goes first, then swtpm, then the servers and files.
cleanup() { stop_agent; if [ -n "${TPMDIR:-}" ]; then tpm_stop "$TPMDIR"; rm -rf "$TPMDIR"; fi; cleanup_consumers; }
trap cleanup EXIT
need "TPM and consumers" swtpm openssl pkcs11-tool ssh ssh-keygen /usr/sbin/sshd p11tool certtool sqlite3 \
  /usr/lib/x86_64-linux-gnu/engines-3/pkcs11.so || { finish_consumers; exit 1; }
new_home
WORK=$(mktemp -d /tmp/keyshare-tpmc.XXXXXX)  # 0700
W=$WORK
TPMDIR=$(mktemp -d /tmp/keyshare-swtpm.XXXXXX)
# Distinctive values, so that check_no_secret_argv cannot match anything else.
export PIN=tpm-pin-$RANDOM$RANDOM SOPIN=tpm-so-$RANDOM$RANDOM
PORT_TPM=$(tpm_start_free "$TPMDIR") || { bad "swtpm starts on 127.0.0.1"; finish_consumers; exit 1; }
export KEYSHARE_TCTI=swtpm:host=127.0.0.1,port=$PORT_TPM

# --- the TPM token and its keys -------------------------------------------------------------
check_out "token create --tpm" "com.keyshare.tpm:" "$KEYSHARE" token create --label T --tpm --pin-source env:PIN --so-pin-source env:SOPIN
# A reader holding a snapshot from before the keys exist keeps every later frame
# in the WAL (no checkpoint can pass it): the store check at the end sees every
# commit since (as 63-disk-secrets.sh does). Stopped by its PID (spawn/stop).
spawn "$W/holder.log" python3 -c 'import sqlite3,sys,time
c = sqlite3.connect(sys.argv[1], isolation_level=None); c.execute("BEGIN"); c.execute("SELECT count(*) FROM items").fetchall()
open(sys.argv[2], "w").close(); time.sleep(85)' "$KEYSHARE_HOME/keychain.db" "$W/holder"
HOLDER=$SPAWNED
for _ in $(seq 100); do [ -e "$W/holder" ] && break; sleep 0.1; done
check "EC P-256 key generated in the TPM" "$KEYSHARE" key generate --type ec --label tpm-ec --tag tpm-ec --token T --pin-source env:PIN
check "RSA-2048 key generated in the TPM" "$KEYSHARE" key generate --type rsa --bits 2048 --label tpm-rsa --tag tpm-rsa --token T --pin-source env:PIN
"$KEYSHARE" list --token T --private --pin-source env:PIN --json >"$W/list.json" 2>"$W/list.err"
# uri LABEL CLASS: the pkcs11: URI `keyshare list --json` prints for that item.
uri() {
  python3 - "$W/list.json" "$1" "$2" <<'EOF'
import json, sys
items = json.load(open(sys.argv[1]))
print(next((i["uri"] for i in items if i.get("label") == sys.argv[2] and i.get("itemClass") == sys.argv[3]), ""))
EOF
}
EC_KEY=$(uri tpm-ec private-key); EC_PUB=$(uri tpm-ec public-key)
RSA_KEY=$(uri tpm-rsa private-key); RSA_PUB=$(uri tpm-rsa public-key)
if [[ $EC_KEY == pkcs11:* && $RSA_KEY == pkcs11:* && $EC_PUB == pkcs11:* && $RSA_PUB == pkcs11:* ]]; then
  ok "keyshare list --json: URIs of both TPM key pairs"
else bad "keyshare list --json: URIs of both TPM key pairs" "$(head -c 800 "$W/list.json"; cat "$W/list.err")"; fi

# --- OpenSSL 3.0 + libp11 engine ----------------------------------------------------------------
E=(env PKCS11_MODULE_PATH="$MODULE" openssl)
EP=(-engine pkcs11 -keyform engine)
echo "signed in the TPM through OpenSSL's engine" >"$W/data"
openssl dgst -sha256 -binary "$W/data" >"$W/data.sha256"
check "engine exports the EC public key" "${E[@]}" pkey -engine pkcs11 -inform engine -in "$EC_PUB" -pubin -pubout -out "$W/ec.pub"
check "engine exports the RSA public key" "${E[@]}" pkey -engine pkcs11 -inform engine -in "$RSA_PUB" -pubin -pubout -out "$W/rsa.pub"
check_out "the EC key is P-256, the RSA key 2048 bits" "ok" bash -c \
  "openssl pkey -pubin -in '$W/ec.pub' -text -noout | grep -q 'ASN1 OID: prime256v1' && openssl pkey -pubin -in '$W/rsa.pub' -text -noout | grep -q '(2048 bit)' && echo ok"
check "engine pkeyutl -sign ECDSA (P-256 in the TPM)" with_pin "${E[@]}" pkeyutl "${EP[@]}" -sign -inkey "$EC_KEY;pin-source=file:/dev/fd/3" \
  -in "$W/data.sha256" -out "$W/s.ec"
check_out "openssl verifies the ECDSA signature with the exported key" "Verified OK" \
  openssl dgst -sha256 -verify "$W/ec.pub" -signature "$W/s.ec" "$W/data"
check "engine pkeyutl -sign RSA PKCS #1 (RSA-2048 in the TPM)" with_pin "${E[@]}" pkeyutl "${EP[@]}" -sign -inkey "$RSA_KEY;pin-source=file:/dev/fd/3" \
  -pkeyopt digest:sha256 -in "$W/data.sha256" -out "$W/s.rsa"
check_out "openssl verifies the PKCS #1 signature" "Verified OK" openssl dgst -sha256 -verify "$W/rsa.pub" -signature "$W/s.rsa" "$W/data"
check "engine pkeyutl -sign RSA-PSS" with_pin "${E[@]}" pkeyutl "${EP[@]}" -sign -inkey "$RSA_KEY;pin-source=file:/dev/fd/3" \
  -pkeyopt digest:sha256 -pkeyopt rsa_padding_mode:pss -pkeyopt rsa_pss_saltlen:32 -in "$W/data.sha256" -out "$W/s.pss"
check_out "openssl verifies the PSS signature" "Verified OK" openssl dgst -sha256 -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:32 \
  -verify "$W/rsa.pub" -signature "$W/s.pss" "$W/data"
check "engine dgst -sign ECDSA" with_pin "${E[@]}" dgst -sha256 "${EP[@]}" -sign "$EC_KEY;pin-source=file:/dev/fd/3" -out "$W/s2.ec" "$W/data"
check_out "openssl verifies it" "Verified OK" openssl dgst -sha256 -verify "$W/ec.pub" -signature "$W/s2.ec" "$W/data"
echo -n "a session key for the TPM" >"$W/plain"
openssl pkeyutl -encrypt -pubin -inkey "$W/rsa.pub" -pkeyopt rsa_padding_mode:oaep -in "$W/plain" -out "$W/ct" 2>/dev/null
check "engine pkeyutl -decrypt OAEP (in the TPM)" with_pin "${E[@]}" pkeyutl "${EP[@]}" -decrypt -pkeyopt rsa_padding_mode:oaep \
  -inkey "$RSA_KEY;pin-source=file:/dev/fd/3" -in "$W/ct" -out "$W/pt"
check "the OAEP plaintext matches" cmp "$W/plain" "$W/pt"
# Self-signed end-entity certificates (keyUsage digitalSignature, CA:FALSE: a
# "device" identity of the share tree; req -x509 makes a CA by default).
for k in ec rsa; do
  key=$EC_KEY; [ $k = rsa ] && key=$RSA_KEY
  check "engine req -x509 with the TPM $k key" with_pin "${E[@]}" req -new -x509 "${EP[@]}" -key "$key;pin-source=file:/dev/fd/3" \
    -subj "/CN=tpm-$k" -days 2 -addext keyUsage=critical,digitalSignature -addext basicConstraints=critical,CA:FALSE -out "$W/$k-self.pem"
  if openssl verify -CAfile "$W/$k-self.pem" "$W/$k-self.pem" >/dev/null 2>&1 \
     && cmp -s <(openssl x509 -in "$W/$k-self.pem" -pubkey -noout) "$W/$k.pub"; then
    ok "the $k certificate verifies and holds the exported public key"
  else bad "the $k certificate verifies and holds the exported public key" "$(openssl verify -CAfile "$W/$k-self.pem" "$W/$k-self.pem" 2>&1)"; fi
done

# --- OpenSSH --------------------------------------------------------------------------------------
for k in ec rsa; do ssh-keygen -i -m PKCS8 -f "$W/$k.pub" >"$W/$k.ssh" 2>/dev/null; done
ssh-keygen -D "$MODULE" >"$W/token.ssh" 2>"$W/keygen.err"
if [ -s "$W/ec.ssh" ] && [ -s "$W/rsa.ssh" ] && grep -qF "$(cut -d' ' -f2 "$W/ec.ssh")" "$W/token.ssh" \
   && grep -qF "$(cut -d' ' -f2 "$W/rsa.ssh")" "$W/token.ssh"; then
  ok "ssh-keygen -D MODULE prints the TPM's ECDSA and RSA keys"
else bad "ssh-keygen -D MODULE prints the TPM's ECDSA and RSA keys" "$(cat "$W/token.ssh" "$W/keygen.err")"; fi
# A private sshd as in 58-ssh.sh (support/sshd.sh).
if sshd_start "$W"; then
  ssh_login_check "ssh -I MODULE logs in with the TPM's ECDSA key" "$W/ec.ssh" ECDSA "${SSH_ASK[@]}" "${SSH[@]}" -I "$MODULE"
  ssh_login_check "ssh -I MODULE logs in with the TPM's RSA key" "$W/rsa.ssh" RSA "${SSH_ASK[@]}" "${SSH[@]}" -I "$MODULE"
  ssh_refused_check "sshd refuses the TPM keys when they are not authorized" "${SSH_ASK[@]}" "${SSH[@]}" -I "$MODULE"
  stop "$SSHD_PID"
else
  bad "sshd starts on 127.0.0.1" "$(cat "$SSHD_LOG")"
fi

# --- GnuTLS with the module as provider ---------------------------------------------------------------
export GNUTLS_PIN=$PIN
out=$(p11tool --provider "$MODULE" --login --list-privkeys 'pkcs11:token=T' 2>&1)
if grep -q 'object=tpm-ec' <<<"$out" && grep -q 'object=tpm-rsa' <<<"$out" && grep -Eq 'Type: Private key \(EC' <<<"$out" \
   && grep -Eq 'Type: Private key \(RSA' <<<"$out"; then
  ok "p11tool --list-privkeys: both TPM keys"
else bad "p11tool --list-privkeys: both TPM keys" "$out"; fi
printf 'cn = "gnutls-tpm"\nexpiration_days = 2\nsigning_key\n' >"$W/tmpl"
if certtool --provider "$MODULE" --generate-self-signed --load-privkey "$EC_KEY" --template "$W/tmpl" --outfile "$W/gnutls.pem" >"$W/certtool.log" 2>&1 \
   && openssl verify -CAfile "$W/gnutls.pem" "$W/gnutls.pem" >/dev/null 2>&1 \
   && cmp -s <(openssl x509 -in "$W/gnutls.pem" -pubkey -noout) "$W/ec.pub"; then
  ok "certtool --generate-self-signed with the TPM's EC key; openssl verifies it"
else bad "certtool --generate-self-signed with the TPM's EC key; openssl verifies it" "$(tail -5 "$W/certtool.log")"; fi
unset GNUTLS_PIN

# --- export and the share tree ---------------------------------------------------------------------
for k in ec rsa; do
  check "import the tpm-$k certificate (pairs with the TPM key)" "$KEYSHARE" import "$W/$k-self.pem" --token T --pin-source env:PIN
done
check_fail "keyshare export of a TPM identity: one clear line" "tpm-ec lives in the TPM and can never leave it" \
  "$KEYSHARE" export tpm-ec --token T --out "$W/tpm-ec.p12" --pin-source env:PIN
[ ! -e "$W/tpm-ec.p12" ] && ok "... and no output file is left" || bad "export of a TPM identity leaves no file" "$(ls -l "$W/tpm-ec.p12")"
check_fail "keyshare export (RSA): one clear line" "tpm-rsa lives in the TPM" \
  "$KEYSHARE" export tpm-rsa --token T --out "$W/tpm-rsa.p12" --pin-source env:PIN
out=$("$KEYSHARE" share list --token T --pin-source env:PIN 2>&1) && rc=0 || rc=$?
if [ "$rc" = 0 ] && grep -q "^left out: tpm-ec: .*lives in the TPM" <<<"$out" && grep -q "^left out: tpm-rsa: .*lives in the TPM" <<<"$out" \
   && ! grep -q "device_" <<<"$out"; then
  ok "share list leaves both TPM identities out, with a note"; grep "^left out: tpm-ec" <<<"$out" | sed 's/^/  /'
else bad "share list leaves both TPM identities out, with a note" "exit $rc: $out"; fi
out=$("$KEYSHARE" share list --token T --pin-source env:PIN --json 2>&1)
python3 -c '
import json, sys
t = json.loads(sys.argv[1])
left = {l["label"]: l["reason"] for l in t["leftOut"]}
assert set(left) == {"tpm-ec", "tpm-rsa"} and set(left.values()) == {"tpm"}, left
assert not t["root"] and all(not f["items"] for f in t["folders"]), t
' "$out" 2>/dev/null && ok "share list --json: leftOut names both, reason tpm" || bad "share list --json: leftOut" "$out"
check_fail "share get of a TPM identity: one clear line" "tpm-ec is left out of the share tree: .*TPM" \
  "$KEYSHARE" share get tpm-ec --out "$W/get.p12" --token T --pin-source env:PIN
[ ! -e "$W/get.p12" ] && ok "... and no output file is left" || bad "share get of a TPM identity leaves no file"
out=$("$KEYSHARE" share export-tree "$W/tree" --token T --pin-source env:PIN 2>&1) && rc=0 || rc=$?
p12s=$(find "$W/tree" -name '*.p12' 2>/dev/null | wc -l)
if [ "$rc" = 0 ] && [ "$p12s" = 0 ] && grep -q "^left out: tpm-ec: " <<<"$out" && grep -q "^left out: tpm-rsa: " <<<"$out"; then
  ok "share export-tree: no file for a TPM identity, a note for each"
else bad "share export-tree: no file for a TPM identity, a note for each" "exit $rc, $p12s .p12 files: $out"; fi

# --- the store and its WAL: no private key material of the TPM keys -------------------------------------
# Every commit the WAL holds is replayed onto the main file, one store image per
# commit, and each image is queried: no TPM token item has a PKCS #8
# (0x80004B53), and each TPM private key holds its TPM blob (0x80004B4D).
DB=$KEYSHARE_HOME/keychain.db
out=$(python3 - "$DB" "$W/img.db" <<'EOF'
import os, sqlite3, struct, sys
db, img = sys.argv[1:3]
main = open(db, "rb").read()
wal = open(db + "-wal", "rb").read() if os.path.exists(db + "-wal") else b""
page = struct.unpack(">H", main[16:18])[0]
page = 65536 if page == 1 else page
images = [dict()]
frames = 0
if len(wal) >= 32:
    page, salt = struct.unpack(">I", wal[8:12])[0], wal[16:24]
    cur, off = {}, 32
    # Frames of an earlier WAL generation (another salt) are not part of the log.
    while off + 24 + page <= len(wal) and wal[off + 8:off + 16] == salt:
        pno, commit = struct.unpack(">II", wal[off:off + 8])
        cur[pno] = wal[off + 24:off + 24 + page]; frames += 1
        if commit: images.append(dict(cur))
        off += 24 + page
bad, checked, blobs = [], 0, 0
for n, pages in enumerate(images):
    size = max([len(main) // page] + list(pages))
    buf = bytearray(main.ljust(size * page, b"\0"))
    for pno, data in pages.items(): buf[(pno - 1) * page:pno * page] = data
    buf[18:20] = b"\x01\x01"  # legacy journal mode: the image is read as a plain file
    open(img, "wb").write(buf)
    try:
        c = sqlite3.connect(f"file:{img}?immutable=1", uri=True)
        p8 = c.execute("SELECT count(*) FROM attributes a JOIN items i ON i.id = a.item WHERE i.token_id LIKE 'com.keyshare.tpm:%' AND a.type = ?", (0x80004B53,)).fetchone()[0]
        blobs = c.execute("SELECT count(*) FROM attributes a JOIN items i ON i.id = a.item WHERE i.token_id LIKE 'com.keyshare.tpm:%' AND a.type = ?", (0x80004B4D,)).fetchone()[0]
        c.close(); checked += 1
        if p8: bad.append(f"image {n}: {p8} PKCS #8")
    except sqlite3.DatabaseError as e:
        if n == 0 and not main: continue
        bad.append(f"image {n}: {e}")
print(f"{checked} store images ({frames} WAL frames), TPM blobs in the last: {blobs}; " + ("; ".join(bad) if bad else "no PKCS #8"))
EOF
)
stop "$HOLDER"
echo "  $out"
grep -Eq "^[0-9]+ store images \([1-9][0-9]* WAL frames\), TPM blobs in the last: [2-9]; no PKCS #8$" <<<"$out" \
  && ok "store and every WAL commit: no PKCS #8 of a TPM key, only TPM blobs" || bad "store and WAL: no private key material of TPM keys" "$out"
n=$(sqlite3 "$DB" "SELECT count(*) FROM attributes a JOIN items i ON i.id = a.item WHERE i.token_id LIKE 'com.keyshare.tpm:%' AND a.type = $((0x80004B53))" 2>&1)
[ "$n" = 0 ] && ok "the live store (with its WAL): no PKCS #8 of a TPM key" || bad "the live store: no PKCS #8 of a TPM key" "$n"

echo "note - 44-tpm-consumers took $((SECONDS - T0)) s${IN_NETNS:+ (private network namespace)}${KEYSHARE_IN_PROCESS:+, in-process}"
check_no_secret_argv PIN SOPIN
finish_consumers
