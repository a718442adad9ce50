#!/usr/bin/env bash
# The CLI's private-key operations run in the agent (issue 16 item 6,
# docs/agent.md "The CLI through the agent"): `keyshare key sign` and
# `key decrypt` open no keychain.db (strace: the CLI never reads the store,
# so it cannot decrypt a key); under gdb neither `key generate`, `key sign`,
# `csr` nor `export` ever enters libcrypto's key generation, signing or
# PKCS12_add_key in the CLI, and a core of `keyshare export` taken at its first such call (the old CLI: inside
# PKCS12_add_key), else at exit, holds none of the RSA key's prime, while the
# exported file does (the control: the search looks for the right bytes).
# `share export-tree`, `share get` and `share list` get their PKCS #12 files
# from the agent: under gdb the CLI never enters PKCS12_add_key nor parses a
# private key, its core at exit holds no prime, and every file of the tree
# opens with openssl and the shared password.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-cliagent.XXXXXX)
export KEYSHARE_AGENT_IDLE_TIMEOUT=60 KEYSHARE_AGENT_PROGRAM=$KS
export PIN=1234-user SOPIN=9876-so P12PASS=keyshare-test
cleanup() { rm -rf "$WORK" "$KEYSHARE_HOME"; }
trap cleanup EXIT
ks() { "$KS" "$@"; }
ID="$FIXTURES/identities"

check "token create" ks token create --label cli --pin-source env:PIN --so-pin-source env:SOPIN
check "import an RSA identity" ks import "$ID/device-ds-ke.modern.p12" --pin-source env:PIN --password-source env:P12PASS
check "EC key" ks key generate --type ec --label e1 --tag e1 --pin-source env:PIN
ks key public --tag e1 >"$WORK/e1.pub"
printf 'signed by the agent\n' >"$WORK/doc"
check "the CLI starts the agent (unlock --for 1s)" ks unlock --for 1s --pin-source env:PIN
APID=$(cat "$(agent_dir)/agent.pid" 2>/dev/null)
[ -n "$APID" ] && tr '\0' '\n' <"/proc/$APID/environ" | grep -q '^KEYSHARE_HOME=' && ! tr '\0' '\n' <"/proc/$APID/environ" | grep -q '^PIN=' \
  && ok "the agent started by the CLI does not inherit the PIN's variable (env:PIN)" || bad "agent environment without the PIN variable"

# under_gdb CORE "FUNCS" CMD...: runs CMD under gdb, stopping at the first call of
# one of FUNCS (libcrypto's private-key functions) or else at exit_group, takes
# a core of the CLI there, then lets it finish. The old CLI stops inside
# PKCS12_add_key with the key in its memory; this one never calls it.
under_gdb() {
  local core=$1 funcs=$2 f; shift 2
  local args=(-q -batch -ex 'set pagination off' -ex 'set breakpoint pending on')
  for f in $funcs; do args+=(-ex "break $f"); done
  args+=(-ex 'catch syscall exit_group' -ex run -ex "gcore $core" -ex delete -ex continue)
  gdb "${args[@]}" --args "$@" >"$WORK/gdb.out" 2>&1
}
entered() { grep -E "^(Thread .* hit )?Breakpoint [0-9]+, " "$WORK/gdb.out" | head -1; }
under_gdb "$WORK/gen.core" "EVP_PKEY_keygen_init EVP_PKEY_generate EVP_PKEY_keygen" \
  "$KS" key generate --type rsa --label r1 --tag r1 --pin-source env:PIN --json
grep -q '"itemClass" *: *"private-key"' "$WORK/gdb.out" && [ -z "$(entered)" ] \
  && ok "key generate: the RSA pair is generated in the agent (the CLI never enters EVP_PKEY_keygen/generate)" \
  || bad "key generate in the agent" "$(entered) $(tail -5 "$WORK/gdb.out")"
ks key public --tag r1 >"$WORK/r1.pub"
check_fail "generate a duplicate tag: one line" "a key with tag r1 already exists" ks key generate --type ec --label x --tag r1 --pin-source env:PIN

# --- sign and decrypt open no store ------------------------------------------------------
traced() {  # NAME CMD...: runs CMD under strace -f; passes when no keychain.db is opened
  local name=$1; shift
  rm -f "$WORK/trace"
  if strace -f -qq -e trace=open,openat,openat2 -o "$WORK/trace" "$@" >/dev/null 2>"$WORK/err"; then
    if grep -q "keychain.db" "$WORK/trace"; then bad "$name" "$(grep keychain.db "$WORK/trace" | head -3)"; else ok "$name"; fi
  else
    bad "$name" "$(cat "$WORK/err")"
  fi
}
traced "key sign (EC) opens no keychain.db in the CLI" "$KS" key sign --tag e1 "$WORK/doc" "$WORK/e1.sig" --pin-source env:PIN
openssl dgst -sha256 -verify "$WORK/e1.pub" -signature "$WORK/e1.sig" "$WORK/doc" >/dev/null 2>&1 \
  && ok "the agent's ECDSA signature verifies (DER)" || bad "agent ECDSA signature verifies"
traced "key sign (RSA PSS) opens no keychain.db in the CLI" "$KS" key sign --tag r1 --algorithm pss-sha256 "$WORK/doc" "$WORK/r1.sig" --pin-source env:PIN
openssl pkeyutl -verify -pubin -inkey "$WORK/r1.pub" -rawin -digest sha256 -pkeyopt rsa_padding_mode:pss \
  -pkeyopt rsa_pss_saltlen:32 -in "$WORK/doc" -sigfile "$WORK/r1.sig" >/dev/null 2>&1 \
  && ok "the agent's RSA-PSS signature verifies" || bad "agent RSA-PSS signature verifies"
openssl pkeyutl -encrypt -pubin -inkey "$WORK/r1.pub" -pkeyopt rsa_padding_mode:oaep -pkeyopt rsa_oaep_md:sha256 \
  -pkeyopt rsa_mgf1_md:sha256 -in "$WORK/doc" -out "$WORK/ct"
traced "key decrypt opens no keychain.db in the CLI" "$KS" key decrypt --tag r1 "$WORK/ct" "$WORK/pt" --pin-source env:PIN
cmp -s "$WORK/doc" "$WORK/pt" && ok "the agent decrypts (OAEP)" || bad "the agent decrypts"
KSABS=$(realpath "$KS")
(cd "$(dirname "$KEYSHARE_HOME")" && KEYSHARE_HOME=./$(basename "$KEYSHARE_HOME") "$KSABS" key sign --tag e1 "$WORK/doc" "$WORK/rel.sig" --pin-source env:PIN) \
  && openssl dgst -sha256 -verify "$WORK/e1.pub" -signature "$WORK/rel.sig" "$WORK/doc" >/dev/null 2>&1 \
  && ok "a relative KEYSHARE_HOME names the same store in the agent" || bad "relative KEYSHARE_HOME"
export WRONG=nope-wrong
check_fail "sign with a wrong PIN: one line, counted" "incorrect user PIN for token cli \([0-9]+ attempts? left" ks key sign --tag e1 "$WORK/doc" "$WORK/x.sig" --pin-source env:WRONG
[ ! -e "$WORK/x.sig" ] && ok "a refused sign writes nothing" || bad "a refused sign writes nothing"
grep -q "signed with tag e1" "$(agent_dir)/agent.log" && ok "the agent logs the CLI's signature" || bad "sign logged"

# --- export: a core of the CLI holds none of the key ---------------------------------------------
NEEDLE=$(openssl pkcs12 -in "$ID/device-ds-ke.modern.p12" -nocerts -nodes -passin env:P12PASS 2>/dev/null |
  openssl rsa -noout -text 2>/dev/null | awk '/^prime1:/{f=1;next} /^prime2:/{f=0} f' | tr -d ' :\n' | sed 's/^00//')
[ ${#NEEDLE} -ge 128 ] && ok "the key's prime read for the search" || bad "the key's prime read"
LABEL=$(openssl dgst -sha256 -r "$ID/device-ds-ke.cert.der" | awk '{print toupper($1)}')
under_gdb "$WORK/sign.core" "EVP_DigestSignInit EVP_DigestSign EVP_PKEY_sign_init EVP_PKEY_sign" \
  "$KS" key sign --tag r1 "$WORK/doc" "$WORK/r1b.sig" --pin-source env:PIN
[ -s "$WORK/r1b.sig" ] && [ -s "$WORK/sign.core" ] && [ -z "$(entered)" ] \
  && ok "key sign: the CLI never enters libcrypto's signing functions (gdb)" || bad "key sign never signs in the CLI" "$(entered) $(tail -3 "$WORK/gdb.out")"
under_gdb "$WORK/csr.core" "EVP_DigestSignInit EVP_DigestSign EVP_PKEY_sign_init EVP_PKEY_sign" \
  "$KS" csr --tag e1 --subject "/CN=Agent Signed/O=Example" --san dns:agent.example --out "$WORK/req.pem" --pin-source env:PIN
[ -s "$WORK/req.pem" ] && [ -z "$(entered)" ] && ok "csr: the CLI never enters libcrypto's signing functions (gdb)" \
  || bad "csr signs in the agent" "$(entered) $(tail -3 "$WORK/gdb.out")"
check_out "the agent-signed request verifies (openssl req -verify)" "verify OK|Certificate request self-signature verify OK" \
  openssl req -in "$WORK/req.pem" -noout -verify
check_out "csr --json reports the signing key" '"tag" : "e1"|"tag":"e1"' ks csr --tag e1 --subject /CN=J --out "$WORK/req2.pem" --json --pin-source env:PIN
check_fail "csr with an unknown tag: one line" "no private key with tag nope in token cli" ks csr --tag nope --subject /CN=J --out "$WORK/req3.pem" --pin-source env:PIN
under_gdb "$WORK/cli.core" "PKCS12_add_key EVP_PKEY_sign_init EVP_PKEY_decrypt_init" \
  "$KS" export "$LABEL" --out "$WORK/id.p12" --pin-source env:PIN
[ -s "$WORK/id.p12" ] && [ -s "$WORK/cli.core" ] && ok "export under gdb wrote the PKCS #12, with a core of the CLI" \
  || bad "export under gdb" "$(tail -5 "$WORK/gdb.out")"
[ -z "$(entered)" ] && ok "export: the CLI never enters PKCS12_add_key (the PKCS #12 is built in the agent)" \
  || bad "export builds no PKCS #12 in the CLI" "$(entered)"
search() { python3 - "$1" "$NEEDLE" <<'PY'
import sys
core = open(sys.argv[1], 'rb').read()
p = bytes.fromhex(sys.argv[2])
sys.exit(0 if any(w in core for w in (p[16:40], p[::-1][16:40])) else 1)
PY
}
search "$WORK/cli.core"; rc=$?
[ "$rc" = 1 ] && ok "the core of keyshare export (at its first private-key call, else at exit) holds none of the key's prime" \
  || bad "export core holds no key bytes" "search status $rc (0: found)"
PW=$(ks password --stdout --pin-source env:PIN); export PW
openssl pkcs12 -in "$WORK/id.p12" -nocerts -nodes -passin env:PW 2>/dev/null |
  openssl rsa -noout -text 2>/dev/null | awk '/^prime1:/{f=1;next} /^prime2:/{f=0} f' | tr -d ' :\n' | sed 's/^00//' >"$WORK/p1"
[ "$(cat "$WORK/p1")" = "$NEEDLE" ] && ok "control: the exported PKCS #12 holds that prime (the search looks for the right bytes)" \
  || bad "control: the export holds the prime"

# --- the share tree: its PKCS #12 files are built in the agent -------------------------------------
P12FUNCS="PKCS12_add_key d2i_AutoPrivateKey EVP_PKCS82PKEY EVP_PKEY_sign_init"
under_gdb "$WORK/tree.core" "$P12FUNCS" "$KS" share export-tree "$WORK/tree" --pin-source env:PIN
n=$(find "$WORK/tree" -name '*.p12' 2>/dev/null | wc -l)
[ "$n" -gt 0 ] && [ -z "$(entered)" ] \
  && ok "share export-tree: the CLI never enters PKCS12_add_key or parses a private key (gdb); $n PKCS #12 files written" \
  || bad "share export-tree builds no PKCS #12 in the CLI" "$(entered) $n files; $(grep -v '^During' "$WORK/gdb.out" | tail -3)"
search "$WORK/tree.core"; rc=$?
[ "$rc" = 1 ] && ok "the core of keyshare share export-tree (at exit) holds none of the key's prime" \
  || bad "share export-tree core holds no key bytes" "search status $rc (0: found)"
bad_files=0
for f in $(find "$WORK/tree" -name '*.p12'); do
  openssl pkcs12 -in "$f" -nocerts -nodes -passin env:PW 2>/dev/null | openssl rsa -noout -text 2>/dev/null |
    awk '/^prime1:/{f=1;next} /^prime2:/{f=0} f' | tr -d ' :\n' | sed 's/^00//' | grep -qx "$NEEDLE" || bad_files=$((bad_files + 1))
done
zips=$(find "$WORK/tree" -name '*.zip' | wc -l)
[ "$n" -gt 0 ] && [ "$bad_files" = 0 ] && [ "$zips" -gt 0 ] \
  && ok "every file of the tree ($n .p12, $zips zips) opens with openssl and the shared password and holds the key" \
  || bad "the tree's files open with the shared password" "$bad_files of $n do not; $zips zips"
ITEM=$(find "$WORK/tree" -maxdepth 1 -name '*.p12' | head -1 | xargs -r basename)
under_gdb "$WORK/get.core" "$P12FUNCS" "$KS" share get "$ITEM" --out "$WORK/got.p12" --pin-source env:PIN
[ -s "$WORK/got.p12" ] && [ -z "$(entered)" ] \
  && openssl pkcs12 -in "$WORK/got.p12" -noout -passin env:PW 2>/dev/null \
  && ok "share get $ITEM: built in the agent (gdb), opens with the shared password" \
  || bad "share get builds no PKCS #12 in the CLI" "$(entered) $(grep -v '^During' "$WORK/gdb.out" | tail -3)"
under_gdb "$WORK/list.core" "$P12FUNCS" "$KS" share list --pin-source env:PIN
grep -q "$ITEM" "$WORK/gdb.out" && [ -z "$(entered)" ] && ok "share list: the sizes come from the agent's files (gdb: no PKCS12_add_key in the CLI)" \
  || bad "share list builds no PKCS #12 in the CLI" "$(entered) $(grep -v '^During' "$WORK/gdb.out" | tail -3)"
check_fail "share export-tree with a wrong PIN: one line, counted" "incorrect user PIN for token cli \([0-9]+ attempts? left" \
  ks share export-tree "$WORK/tree2" --pin-source env:WRONG
[ ! -e "$WORK/tree2" ] && ok "a refused export-tree leaves no directory" || bad "a refused export-tree leaves no directory"
rm -f "$WORK"/*.core
finish
