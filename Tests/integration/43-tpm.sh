#!/usr/bin/env bash
# TPM tokens and soft tokens sealed to this machine (issue 17, docs/tpm.md), on
# a real software TPM: swtpm with a private state directory on loopback,
# started here and stopped by its PID. Keys made in the TPM sign through
# pkcs11-tool and verify with openssl; the store holds no private material of
# them; another TPM (a fresh swtpm state, "another machine") refuses the
# store's TPM token and bound token with one clear line; wrong PINs are
# limited by the TPM's dictionary-attack protection and the right PIN works
# after its recovery; a restart keeps everything usable; a PCR-bound token
# refuses after the PCR is extended; 1,000 signatures in a row and 4
# concurrent clients; a process that lives through a swtpm restart (its
# saved SRK context goes stale); keys imported into the TPM (key import
# --tpm: CKA_LOCAL false); a host starting programs while it signs hands
# no TPM descriptor to its children; tpm2-tss writes nothing on the host's
# stderr; a new soft token is sealed to the TPM by default (issue 28 item 5:
# its copied keychain.db refuses on another TPM; short PINs accepted),
# --no-bind opts out with one warning and the short-PIN rule. Passes
# in-process and through the agent (the default).
# Usage: 43-tpm.sh KEYSHARE MODULE.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
# tpm_start, tpm_stop, free_port, tpm_start_free (swtpm on loopback, stopped by its PID).
source "$(dirname "$0")/support/swtpm.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
command -v swtpm >/dev/null || { echo "swtpm missing (make deps)"; echo "0 passed, 1 failed"; exit 1; }
new_home
WORK=$(mktemp -d /tmp/keyshare-tpm.XXXXXX)
chmod 0711 "$WORK"
if [ "${KEYSHARE_AGENT:-}" = 1 ]; then
  export XDG_RUNTIME_DIR=$WORK/run KEYSHARE_AGENT_PROGRAM=$KS KEYSHARE_AGENT_IDLE_TIMEOUT=60
  mkdir -m 0700 "$XDG_RUNTIME_DIR"
fi
export PIN=1234-user SOPIN=9876-so WRONG=0000-wrong TPMSIGN_PIN=1234-user
agent_stop() { local p; p=$(cat "$(agent_dir)/agent.pid" 2>/dev/null); [ -n "$p" ] && kill "$p" 2>/dev/null; sleep 0.2; }
cleanup() { [ -n "${LIVE:-}" ] && kill "$LIVE" 2>/dev/null; agent_stop; tpm_stop "$WORK/tpmA"; tpm_stop "$WORK/tpmB"; rm -rf "$KEYSHARE_HOME" "$WORK"; }
trap cleanup EXIT
PA=$(tpm_start_free "$WORK/tpmA") || { bad "swtpm starts"; finish; exit 1; }
export KEYSHARE_TCTI=swtpm:host=127.0.0.1,port=$PA
# Dictionary-attack protection as a test can wait for: 4 tries, one forgotten every 2 s.
TPM2TOOLS_TCTI=$KEYSHARE_TCTI tpm2_dictionarylockout --setup-parameters --max-tries=4 --recovery-time=2 --lockout-recovery-time=2 >/dev/null 2>&1
P=(pkcs11-tool --module "$MODULE")
# check_rv NAME REGEX CMD...: CMD is expected to fail; its output must name the CK_RV.
check_rv() { local name=$1 re=$2 out; shift 2; out=$("$@" 2>&1); grep -Eq -- "$re" <<<"$out" && ok "$name" || bad "$name" "$out"; }
cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$WORK/tpmsign" "$ROOT/Tests/integration/c/tpmsign.c" -ldl || { bad "tpmsign compiles"; finish; exit 1; }
cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$WORK/tpmfork" "$ROOT/Tests/integration/c/tpmfork.c" -ldl -lpthread || { bad "tpmfork compiles"; finish; exit 1; }

# --- a TPM token, keys made in the TPM --------------------------------------------------
check_out "token create --tpm" "com.keyshare.tpm:" "$KS" token create --label T --tpm --pin-source env:PIN --so-pin-source env:SOPIN
check_out "token list shows the kind" "T +tpm " "$KS" token list
check "key generate ec in the TPM" "$KS" key generate --type ec --label tk1 --tag tk1 --token T --pin-source env:PIN
check "key generate rsa in the TPM" "$KS" key generate --type rsa --label tk2 --tag tk2 --token T --pin-source env:PIN
echo "a message signed in the TPM" >"$WORK/msg"
id_of() { "${P[@]}" --token-label T -O --type pubkey 2>/dev/null | awk -v l="$1" '$1=="label:"{cur=$2} $1=="ID:" && cur==l {print $2; exit}'; }
ID1=$(id_of tk1); ID2=$(id_of tk2)
ec_pubkey_der "$WORK/k1.der" "${P[@]}" --token-label T --id "$ID1"  # the EC key (lib.sh: not --read-object)
"${P[@]}" --token-label T --read-object --type pubkey --id "$ID2" -o "$WORK/k2.der" >/dev/null 2>&1
openssl pkey -pubin -inform DER -in "$WORK/k1.der" -out "$WORK/k1.pem" 2>/dev/null
openssl pkey -pubin -inform DER -in "$WORK/k2.der" -out "$WORK/k2.pem" 2>/dev/null
sign() { "${P[@]}" --token-label T --login --pin env:PIN -s --id "$1" -m "$2" -i "$WORK/msg" -o "$WORK/sig" "${@:3}" >/dev/null 2>&1; }
sign "$ID1" ECDSA-SHA256 --signature-format openssl
check_out "ECDSA P-256 in the TPM verifies with openssl" "Verified OK" openssl dgst -sha256 -verify "$WORK/k1.pem" -signature "$WORK/sig" "$WORK/msg"
sign "$ID2" SHA256-RSA-PKCS
check_out "RSA PKCS #1 in the TPM verifies with openssl" "Verified OK" openssl dgst -sha256 -verify "$WORK/k2.pem" -signature "$WORK/sig" "$WORK/msg"
sign "$ID2" SHA256-RSA-PKCS-PSS
check_out "RSA-PSS in the TPM verifies with openssl" "Verified OK" openssl dgst -sha256 -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:32 -verify "$WORK/k2.pem" -signature "$WORK/sig" "$WORK/msg"
echo "a session key" >"$WORK/secret"
openssl pkeyutl -encrypt -pubin -inkey "$WORK/k2.pem" -pkeyopt rsa_padding_mode:oaep -pkeyopt rsa_oaep_md:sha256 -pkeyopt rsa_mgf1_md:sha256 -in "$WORK/secret" -out "$WORK/ct" 2>/dev/null
"${P[@]}" --token-label T --login --pin env:PIN --decrypt --id "$ID2" -m RSA-PKCS-OAEP --hash-algorithm SHA256 --mgf MGF1-SHA256 -i "$WORK/ct" -o "$WORK/pt" >/dev/null 2>&1
check "RSA-OAEP decryption in the TPM" cmp "$WORK/secret" "$WORK/pt"
check_out "private keys: never extractable, local" "never extractable, local" "${P[@]}" --token-label T --login --pin env:PIN -O --type privkey

# --- keys imported into the TPM (TPM2_Import): CKA_LOCAL false -----------------------------------
export P12PW=import-pass-1
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/imp-ec.key" 2>/dev/null
openssl req -x509 -new -key "$WORK/imp-ec.key" -subj /CN=imported-ec -days 2 -out "$WORK/imp-ec.crt" 2>/dev/null
openssl pkcs12 -export -inkey "$WORK/imp-ec.key" -in "$WORK/imp-ec.crt" -name ie -passout env:P12PW -out "$WORK/imp-ec.p12" 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/imp-rsa.key" 2>/dev/null
check_fail "key import without --tpm says what it is for" "give --tpm" "$KS" key import --token T "$WORK/imp-rsa.key" --pin-source env:PIN
check "key import --tpm: a PKCS #12 identity (P-256)" "$KS" key import --tpm --token T "$WORK/imp-ec.p12" --password-source env:P12PW --pin-source env:PIN
check "key import --tpm: a PEM key (RSA-2048)" "$KS" key import --tpm --token T --label ir "$WORK/imp-rsa.key" --pin-source env:PIN
IE=$(id_of ie); IR=$(id_of ir)
openssl pkey -in "$WORK/imp-ec.key" -pubout -out "$WORK/ie.pem" 2>/dev/null
openssl pkey -in "$WORK/imp-rsa.key" -pubout -out "$WORK/ir.pem" 2>/dev/null
sign "$IE" ECDSA-SHA256 --signature-format openssl
check_out "imported P-256 key signs in the TPM, openssl verifies with the original public key" "Verified OK" openssl dgst -sha256 -verify "$WORK/ie.pem" -signature "$WORK/sig" "$WORK/msg"
sign "$IR" SHA256-RSA-PKCS
check_out "imported RSA-2048 key signs in the TPM, openssl verifies" "Verified OK" openssl dgst -sha256 -verify "$WORK/ir.pem" -signature "$WORK/sig" "$WORK/msg"
access_of() { "${P[@]}" --token-label T --login --pin env:PIN -O --type privkey 2>/dev/null | awk -v l="$1" '/^[A-Z]/{cur=""} $1=="label:"{cur=$2} $1=="Access:" && cur==l {sub(/^ *Access: */, ""); print}'; }
a=$(access_of ie); b=$(access_of ir)
[ "$a" = "sensitive" ] && [ "$b" = "sensitive" ] && ok "imported keys: Access only sensitive (not extractable, not local, not always sensitive, not never extractable)" \
  || bad "imported keys' access flags" "ie: $a / ir: $b"
check_out "the PKCS #12's certificate joined the imported key" "label: +ie" "${P[@]}" --token-label T -O --type cert
# A second import of the same key finds it (by its public key) instead of making a second TPM object, as keyshare import does for soft tokens.
nobj() { "${P[@]}" --token-label T --login --pin env:PIN -O 2>/dev/null | grep -c "Object;"; }
before=$(nobj)
check_out "key import --tpm again (PKCS #12): already there, nothing imported" "already in the TPM of token T: private key \"ie\"" "$KS" key import --tpm --token T "$WORK/imp-ec.p12" --password-source env:P12PW --pin-source env:PIN
check_out "key import --tpm again (PEM, another --label): already there" "already in the TPM of token T: private key \"ir\"" "$KS" key import --tpm --token T --label ir2 "$WORK/imp-rsa.key" --pin-source env:PIN
check_fail "key import --tpm again with another --id: refused, naming the pair's ID" "CKA_ID" "$KS" key import --tpm --token T --id 99 "$WORK/imp-rsa.key" --pin-source env:PIN
after=$(nobj)
[ "$before" = "$after" ] && [ "$before" -gt 0 ] && ok "no duplicate objects after the repeated imports ($after objects)" || bad "repeated imports made no objects" "before $before, after $after"
check_fail "keyshare import (soft) of a private key into a TPM token is refused, naming key import --tpm" "key import --tpm" "$KS" import --token T "$WORK/imp-rsa.key" --pin-source env:PIN
# The store holds neither private value: not the EC scalar, not an RSA prime (raw bytes, in the store or its WAL).
hexof() { openssl pkey -in "$1" -text -noout 2>/dev/null | awk -v f="$2:" '$1==f{on=1;next} on && /^[a-z]/{on=0} on' | tr -d ' :\n' | sed 's/^00//' | cut -c1-64; }
dbhex=$(cat "$KEYSHARE_HOME"/keychain.db* 2>/dev/null | od -An -tx1 -v | tr -d ' \n')
d=$(hexof "$WORK/imp-ec.key" priv); q=$(hexof "$WORK/imp-rsa.key" prime1)
[ ${#d} = 64 ] && [ ${#q} = 64 ] && ! grep -q "$d" <<<"$dbhex" && ! grep -q "$q" <<<"$dbhex" \
  && ok "the store holds no private value of the imported keys" || bad "imported keys' private values absent from the store" "${#d} ${#q}"
# The store: no PKCS #8 item attribute for the TPM token (only the TPM blob, sealed).
DB=$KEYSHARE_HOME/keychain.db
n=$(sqlite3 "$DB" "SELECT count(*) FROM attributes a JOIN items i ON i.id = a.item WHERE i.token_id LIKE 'com.keyshare.tpm:%' AND a.type = $((0x80004B53))" 2>&1)
[ "$n" = 0 ] && ok "the store holds no PKCS #8 of a TPM key" || bad "no PKCS #8 of TPM keys in the store" "$n"

# --- 1,000 signatures in a row, 4 concurrent clients --------------------------------------
check_out "1,000 ECDSA signatures in a row (transient objects flushed)" "signs=1000 failed=0" "$WORK/tpmsign" "$MODULE" T 1000
for i in 1 2 3 4; do "$WORK/tpmsign" "$MODULE" T 100 >"$WORK/c$i.out" 2>&1 & done; wait
c=$(cat "$WORK"/c?.out | grep -c "signs=100 failed=0")
[ "$c" = 4 ] && ok "4 concurrent clients, 100 signatures each" || bad "4 concurrent clients" "$(cat "$WORK"/c?.out)"
# A host thread starts programs (posix_spawn: no atfork handler) while another signs: every TPM descriptor is close-on-exec.
check_out "a host starting programs (posix_spawn) while it signs: no child inherits a TPM descriptor" "leaked=0 signs=200 failed=0" "$WORK/tpmfork" "$MODULE" T 200

# --- soft tokens sealed to this machine -----------------------------------------------------
check "token create --bind tpm" "$KS" token create --label bnd --bind tpm --pin-source env:PIN --so-pin-source env:SOPIN
check "token create --bind tpm --pcrs 7" "$KS" token create --label pcr7 --bind tpm --pcrs 7 --pin-source env:PIN --so-pin-source env:SOPIN
check_out "token create --no-bind: a warning with the offline arithmetic" "warning: token soft1 is not sealed to this machine's TPM \(--no-bind\).*every 9-digit PIN in about" \
  "$KS" token create --label soft1 --no-bind --pin-source env:PIN --so-pin-source env:SOPIN
check_out "token create with a TPM reachable: sealed to it by default" "sealed to the TPM at swtpm:.*--no-bind to opt out" \
  "$KS" token create --label dflt --pin-source env:PIN --so-pin-source env:SOPIN
check_out "token list: the default token is bound" "dflt +soft, bound to TPM" "$KS" token list
check "key in the default-sealed token" "$KS" key generate --type ec --label dk --tag dk --token dflt --pin-source env:PIN
export SHORT=4321 SHORTSO=8765
check_out "sealed by default: a 4-character PIN is accepted (the TPM takes part in every guess)" "sealed to the TPM" \
  "$KS" token create --label shortb --pin-source env:SHORT --so-pin-source env:SHORTSO
check_fail "--no-bind: the short-PIN rule applies" "at least 6" "$KS" token create --label shortu --no-bind --pin-source env:SHORT --so-pin-source env:SHORTSO
check_fail "--no-bind with --bind is refused" "excludes" "$KS" token create --label x --no-bind --bind tpm --pin-source env:PIN --so-pin-source env:SOPIN
KEYSHARE_TCTI=swtpm:host=127.0.0.1,port=1 check_fail "a TPM pointed at that does not answer: refused, naming --no-bind" "--no-bind creates it unsealed" \
  "$KS" token create --label dead --pin-source env:PIN --so-pin-source env:SOPIN
if [ ! -e /dev/tpmrm0 ]; then
  H2=$(mktemp -d /tmp/keyshare-it.XXXXXX)
  out=$(env -u KEYSHARE_TCTI KEYSHARE_HOME="$H2" "$KS" token create --label plain --pin-source env:PIN --so-pin-source env:SOPIN 2>&1)
  grep -q "created token" <<<"$out" && ! grep -q "sealed" <<<"$out" && ok "no TPM on the machine (no KEYSHARE_TCTI, no /dev/tpmrm0): not sealed, no warning" \
    || bad "no TPM on the machine: not sealed" "$out"
  rm -rf "$H2"
fi
check "key in the bound token" "$KS" key generate --type ec --label bk --tag bk --token bnd --pin-source env:PIN
check "token bind --tpm" "$KS" token bind --tpm --token soft1 --pin-source env:PIN --so-pin-source env:SOPIN
check_out "token list: bound kinds" "soft, bound to TPM PCRs 7" "$KS" token list
check_out "bound token logs in on this machine" "bk" "${P[@]}" --token-label bnd --login --pin env:PIN -O
check_fail "key import --tpm into a soft token is refused" "not a TPM token" "$KS" key import --tpm --token bnd "$WORK/imp-rsa.key" --pin-source env:PIN
check_out "PCR-bound token logs in" "Public Key|^$" "${P[@]}" --token-label pcr7 --login --pin env:PIN -O

# --- restart: same state, same TPM -----------------------------------------------------------
# A process (the agent) that lives through the restart: the SRK context it saved no longer loads, the SRK is made again.
rm -f "$WORK/go" "$WORK/go.ready"
TPMSIGN_WAIT=$WORK/go "$WORK/tpmsign" "$MODULE" T 20 >"$WORK/live.out" 2>&1 &
LIVE=$!
for _ in $(seq 400); do [ -e "$WORK/go.ready" ] && break; sleep 0.05; done
tpm_stop "$WORK/tpmA"; tpm_start "$WORK/tpmA" "$PA"; touch "$WORK/go"; wait "$LIVE"; LIVE=
check_out "a process living through a swtpm restart still signs (stale SRK context detected)" "signs=20 failed=0" cat "$WORK/live.out"
agent_stop; tpm_stop "$WORK/tpmA"; tpm_start "$WORK/tpmA" "$PA"
check_out "after a restart: the TPM key signs" "signs=20 failed=0" "$WORK/tpmsign" "$MODULE" T 20
check_out "after a restart: the PCR-bound token opens (PCRs reset)" "Public Key|^$" "${P[@]}" --token-label pcr7 --login --pin env:PIN -O
TPM2TOOLS_TCTI=$KEYSHARE_TCTI tpm2_pcrextend 7:sha256=$(printf 'another boot' | sha256sum | cut -d' ' -f1) >/dev/null 2>&1
check_fail "PCR-bound token refuses after PCR 7 is extended" "boot state \(PCRs\)" "$KS" list --token pcr7 --pin-source env:PIN
check_rv "... and through the module" "CKR_DEVICE_ERROR" "${P[@]}" --token-label pcr7 --login --pin env:PIN -O
check_out "the unbound-PCR bound token still opens" "bk" "${P[@]}" --token-label bnd --login --pin env:PIN -O

# --- wrong PINs are counted by the TPM ---------------------------------------------------------
out="" all=""
for i in 1 2 3 4 5 6; do
  r=$(env -u TSS2_LOG "${P[@]}" --token-label T --login --pin env:WRONG -O 2>&1); all+=$r$'\n'
  out+=$(grep -o 'CKR_PIN_[A-Z_]*' <<<"$r")" "
done
grep -q "CKR_PIN_INCORRECT" <<<"$out" && grep -q "CKR_PIN_LOCKED" <<<"$out" && ok "wrong PINs: PIN_INCORRECT, then the TPM locks out" || bad "TPM lockout after wrong PINs" "$out"
# tpm2-tss logs failed commands on stderr (ERROR:esys:...) unless TSS2_LOG says otherwise; the module silences it.
tss=$(grep -E '^(ERROR|WARNING|INFO|DEBUG|TRACE):[a-z_]+:' <<<"$all")
[ -z "$tss" ] && ok "no tpm2-tss lines on the host's stderr (wrong PINs, lockout; TSS2_LOG unset)" || bad "tpm2-tss lines on stderr" "$tss"
check_rv "right PIN refused during the TPM's lockout" "CKR_PIN_LOCKED" "${P[@]}" --token-label T --login --pin env:PIN -O
check_fail "CLI: the lockout is one clear line" "dictionary-attack lockout" "$KS" list --token T --pin-source env:PIN
sleep 5
check_out "right PIN works after the lockout recovery" "tk1" "${P[@]}" --token-label T --login --pin env:PIN -O

# --- another machine: the same store, another TPM ------------------------------------------------
agent_stop
PB=$(tpm_start_free "$WORK/tpmB") || bad "second swtpm starts"
KEYSHARE_TCTI=swtpm:host=127.0.0.1,port=$PB check_fail "another TPM: the TPM token refuses, one line" "sealed to another TPM" "$KS" list --token T --pin-source env:PIN
KEYSHARE_TCTI=swtpm:host=127.0.0.1,port=$PB check_fail "another TPM: the bound token refuses, one line" "sealed to another TPM" "$KS" list --token bnd --pin-source env:PIN
KEYSHARE_TCTI=swtpm:host=127.0.0.1,port=$PB check_rv "another TPM: login refused through the module" "CKR_DEVICE_ERROR" "${P[@]}" --token-label bnd --login --pin env:PIN -O
# The default-sealed token's keychain.db, copied (sqlite3 .backup) into another home and opened against another TPM.
mkdir -m 0700 "$WORK/copy"
sqlite3 "$KEYSHARE_HOME/keychain.db" ".backup '$WORK/copy/keychain.db'"
KEYSHARE_HOME=$WORK/copy KEYSHARE_TCTI=swtpm:host=127.0.0.1,port=$PB check_fail "a default-sealed token's keychain.db copied to another TPM: refused" "sealed to another TPM" \
  "$KS" list --token dflt --pin-source env:PIN
KEYSHARE_HOME=$WORK/copy check_out "... the copy opens on the TPM it is sealed to" "dk" "$KS" list --token dflt --pin-source env:PIN
agent_stop
check_out "the original TPM still opens both" "signs=5 failed=0" "$WORK/tpmsign" "$MODULE" T 5
check_out "... and the bound token" "bk" "${P[@]}" --token-label bnd --login --pin env:PIN -O

# --- unbind needs the SO PIN --------------------------------------------------------------------
export BADSO=1111-bad
check_fail "unbind with a wrong SO PIN is refused" "incorrect" "$KS" token unbind --token soft1 --pin-source env:PIN --so-pin-source env:BADSO
check "unbind with the SO PIN" "$KS" token unbind --token soft1 --pin-source env:PIN --so-pin-source env:SOPIN
agent_stop
KEYSHARE_TCTI=swtpm:host=127.0.0.1,port=$PB check_out "unbound token opens on another TPM" "^$|Public|Private" "${P[@]}" --token-label soft1 --login --pin env:PIN -O

# --- no TPM at all: everything else works ---------------------------------------------------------
agent_stop
KEYSHARE_TCTI=swtpm:host=127.0.0.1,port=1 check_out "no TPM: soft tokens still list and open" "soft1 " "$KS" token list
KEYSHARE_TCTI=swtpm:host=127.0.0.1,port=1 check_fail "no TPM: the TPM token says so, one line" "no TPM reachable" "$KS" list --token T --pin-source env:PIN
slots=$(KEYSHARE_TCTI=swtpm:host=127.0.0.1,port=1 "${P[@]}" -L 2>&1)
grep -q "token label *: soft1" <<<"$slots" && ! grep -q "token label *: T *$" <<<"$slots" \
  && ok "no TPM: the module lists the soft token, not the TPM token" || bad "no TPM: TPM token not present in the slot list" "$slots"
agent_stop
check_out "TPM back: the TPM token is listed again" "token label *: T *$" "${P[@]}" -L
finish
