#!/usr/bin/env bash
# Post-quantum credentials through the CLI (issue 18, "The keychain"), and cross-checks against an
# independent implementation:
#  - ML-DSA-44/65/87 and ML-KEM-768 identities made by OpenSSL 3.5 (c/pqfixture.c, at test time:
#    no private key is committed) import from PKCS #12 and from PEM, `list`/`show` name their
#    algorithm, the share-tree category rules place them like other keys (device, signature, PIV,
#    encryption), and `export` writes a modern PKCS #12 that OpenSSL 3.5 opens (key matches cert).
#  - `key generate --type ml-dsa-*|ml-kem-*`, `key sign/verify` (with --context), `csr` (the request
#    verifies with OpenSSL 3.5), `key encapsulate` (to a key in the token or a PEM file; never
#    overwrites, secret 0600) and `key decapsulate` (in the agent: the CLI opens no keychain.db).
#  - dilithium-py (FIPS 204) verifies keyshare's ML-DSA signatures and keyshare verifies its
#    signatures; kyber-py (FIPS 203) decapsulates keyshare's ciphertexts and keyshare decapsulates
#    kyber-py's, agreeing on the shared secret. Through the module (c/pqmodule.c: C_Sign with
#    CKM_ML_DSA and a context; private CKA_VALUE unreadable) dilithium-py verifies too, and
#    C_DecapsulateKey of kyber-py's ciphertext gives kyber-py's secret. Both pinned by hash (support/pq-crosscheck-requirements.txt)
#    in a venv under .build (made here when missing, as `make pq-crosscheck-venv` does).
# The CLI is the same in both modes (its private-key operations always go through the agent); the
# module's path is not: run it plain and with KEYSHARE_IN_PROCESS=1.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
new_home
ROOT=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d /tmp/keyshare-pqcli.XXXXXX)
export KEYSHARE_AGENT_IDLE_TIMEOUT=60
export PIN=1234-user SOPIN=9876-so PQ_P12_PASSWORD=pq-fixture-pass
cleanup() { rm -rf "$WORK" "$KEYSHARE_HOME"; }
trap cleanup EXIT
ks() { "$KS" "$@"; }
T0=$(date +%s)

# ---- the tools: OpenSSL 3.5 for the fixtures, the pinned Python implementations ---------------
BUNDLE_PC=$ROOT/.build/openssl-3.5/lib/pkgconfig
if [ -f "$BUNDLE_PC/libcrypto.pc" ]; then
  PC=(env PKG_CONFIG_PATH="$BUNDLE_PC"); SHIM=-DPQF_STRTOL_SHIM
elif pkg-config --atleast-version=3.5 libcrypto; then
  PC=(env); SHIM=
else
  echo "34-pq-cli: needs OpenSSL 3.5 (the bundle in .build/openssl-3.5: make build) to make the fixtures" >&2
  bad "OpenSSL 3.5 for the fixtures"; finish; exit
fi
# shellcheck disable=SC2046
if cc -O1 -Wall -Werror $SHIM $("${PC[@]}" pkg-config --cflags libcrypto) -o "$WORK/pqfixture" "$HERE/c/pqfixture.c" \
     $("${PC[@]}" pkg-config --libs libcrypto) 2>"$WORK/cc.err"; then ok "pqfixture builds against OpenSSL 3.5"
else bad "pqfixture builds" "$(cat "$WORK/cc.err")"; finish; exit; fi
FX=$WORK/fx; mkdir -p "$FX"
check "OpenSSL 3.5 makes ML-DSA-44/65/87 and ML-KEM-768 identities (PKCS #12 + PEM)" "$WORK/pqfixture" "$FX"

PQ_VENV=${PQ_VENV:-$ROOT/.build/pq-crosscheck-venv}
REQ=$HERE/support/pq-crosscheck-requirements.txt
if [ ! -f "$PQ_VENV/stamp" ] || [ "$REQ" -nt "$PQ_VENV/stamp" ]; then
  rm -rf "$PQ_VENV"
  python3 -m venv "$PQ_VENV" && "$PQ_VENV/bin/pip" install -q --disable-pip-version-check --require-hashes --no-deps \
    --only-binary :all: -r "$REQ" >"$WORK/pip.out" 2>&1 && touch "$PQ_VENV/stamp" || cat "$WORK/pip.out" >&2
fi
PY() { "$PQ_VENV/bin/python" "$HERE/support/pq_crosscheck.py" "$@"; }
check_out "dilithium-py / kyber-py (pinned by hash) implement FIPS 204 / 203 final" "final: yes" PY check-fips

# ---- import, list, show, share tree, export ------------------------------------------------------
check "token create" ks token create --label pq --pin-source env:PIN --so-pin-source env:SOPIN
check "second token (PEM imports)" ks token create --label pem --pin-source env:PIN --so-pin-source env:SOPIN
for id in mldsa44-device mldsa65-signature mldsa87-auth mlkem768-enc; do
  check "import $id.p12" ks import --token pq "$FX/$id.p12" --pin-source env:PIN --password-source env:PQ_P12_PASSWORD
done
for id in mldsa65-signature mlkem768-enc; do
  check "import $id from PEM (certificate + PKCS #8 key)" ks import --token pem "$FX/$id.cert.pem" "$FX/$id.key.pem" --pin-source env:PIN
done
ks list --token pq --pin-source env:PIN >"$WORK/list" 2>&1
for pair in "ML-DSA-44 device" "ML-DSA-65 signature" "ML-DSA-87 authentication" "ML-KEM-768 encryption"; do
  set -- $pair
  grep -Eq "^certificate .* $1 +$2 " "$WORK/list" && grep -Eq "^private-key .* $1 " "$WORK/list" \
    && ok "list: the $1 identity (certificate and private key) shows its algorithm; category $2" \
    || bad "list shows $1 as $2" "$(cat "$WORK/list")"
done
ks list --token pem --pin-source env:PIN >"$WORK/list.pem" 2>&1
grep -Eq "^private-key .* ML-DSA-65 " "$WORK/list.pem" && grep -Eq "^certificate .* ML-KEM-768 +encryption " "$WORK/list.pem" \
  && [ "$(grep -c '^private-key' "$WORK/list.pem")" = 2 ] \
  && ok "list: the PEM imports are two identities (ML-DSA-65, ML-KEM-768)" || bad "PEM imports listed" "$(cat "$WORK/list.pem")"
LABEL65=$(sha256sum <"$FX/mldsa65-signature.cert.der" | cut -c1-64 | tr a-f A-F)
LABELKEM=$(sha256sum <"$FX/mlkem768-enc.cert.der" | cut -c1-64 | tr a-f A-F)
check_out "show: the ML-DSA-65 certificate's key" "x509.publicKey: ML-DSA-65" ks show --token pq "$LABEL65"
ks show --token pq "$LABEL65" --pin-source env:PIN >"$WORK/show" 2>&1
grep -q "keyshare.algorithm: ML-DSA-65" "$WORK/show" && grep -q "CKA_KEY_TYPE: CKK_ML_DSA" "$WORK/show" \
  && grep -q "CKA_PARAMETER_SET: 2$" "$WORK/show" && ! grep -q "CKA_SEED" "$WORK/show" \
  && ok "show (with the PIN): the keys as CKK_ML_DSA, their parameter set and algorithm; no seed" || bad "show of the ML-DSA keys" "$(cat "$WORK/show")"
ks share list --token pq --pin-source env:PIN >"$WORK/share" 2>&1
for n in device_44.p12 signature_65.p12 piv_87.p12 encryption_0768.p12; do
  grep -q "$n" "$WORK/share" && ok "share tree has $n" || bad "share tree has $n" "$(cat "$WORK/share")"
done
EXPORT_PASS=$(ks password --stdout --token pq --pin-source env:PIN)
for pair in "$LABEL65 ML-DSA-65 mldsa65-signature" "$LABELKEM ML-KEM-768 mlkem768-enc"; do
  set -- $pair
  check "export $3 (modern profile)" ks export --token pq "$1" --out "$WORK/$3.export.p12" --pin-source env:PIN
  PQ_P12_PASSWORD=$EXPORT_PASS check_out "OpenSSL 3.5 opens the exported $2 PKCS #12: key matches certificate, chain included" \
    "^$2 $3 chain=1$" "$WORK/pqfixture" check-p12 "$WORK/$3.export.p12"
done

# ---- key generate, public, sign/verify, csr ------------------------------------------------------
for t in ml-dsa-44 ml-dsa-65 ml-dsa-87 ml-kem-512 ml-kem-768 ml-kem-1024; do
  NAME=$(tr a-z A-Z <<<"$t")
  check_out "key generate --type $t" "$NAME" ks key generate --token pq --type "$t" --label "g-$t" --tag "$t" --pin-source env:PIN
  ks key public --token pq --tag "$t" >"$WORK/$t.pub" 2>"$WORK/err" || bad "key public $t" "$(cat "$WORK/err")"
done
# A post-quantum key does one job: --usage that does not fit is refused (before, an ML-KEM key made
# with --usage sign got CKA_SIGN true and kept CKA_DECAPSULATE true); the fitting one is honoured.
check_fail "key generate ml-kem-768 --usage sign: one line" "ML-KEM-768 keys only encapsulate" \
  ks key generate --token pq --type ml-kem-768 --usage sign --label u1 --tag u1 --pin-source env:PIN
check_fail "key generate ml-dsa-65 --usage encrypt: one line" "ML-DSA-65 keys only sign" \
  ks key generate --token pq --type ml-dsa-65 --usage encrypt --label u2 --tag u2 --pin-source env:PIN
check_out "key generate ml-kem-768 --usage encrypt: the pair may encapsulate/decapsulate, nothing else" \
  '"usage" : \[\s*"decapsulate"\s*\]' bash -c 'ks() { "$0" "$@"; }; ks key generate --token pq --type ml-kem-768 --usage encrypt \
  --label u3 --tag u3 --pin-source env:PIN --json | tr -d "\n"' "$KS"
ks show --token pq u3 --pin-source env:PIN >"$WORK/show.u3" 2>&1
grep -q "CKA_DECAPSULATE: true" "$WORK/show.u3" && grep -q "CKA_ENCAPSULATE: true" "$WORK/show.u3" && ! grep -q "CKA_SIGN: true" "$WORK/show.u3" \
  && ! grep -q "CKA_DECRYPT: true" "$WORK/show.u3" && ok "show: --usage encrypt set CKA_ENCAPSULATE/DECAPSULATE, not CKA_SIGN/DECRYPT" \
  || bad "ML-KEM --usage flags" "$(grep -E 'SIGN|CRYPT|CAPSULATE' "$WORK/show.u3")"
"$KS" --generate-completion-script bash >"$WORK/completion.bash" 2>&1
grep -q "'rsa'.*'ml-dsa-65'.*'ml-kem-768'" "$WORK/completion.bash" && grep -q "compgen -W '.* encapsulate decapsulate " "$WORK/completion.bash" \
  && ok "bash completion offers the post-quantum --type values and encapsulate/decapsulate" || bad "bash completion of the PQ types"
check_fail "key generate --bits with an ML-DSA type: one line" "bits" \
  ks key generate --token pq --type ml-dsa-65 --bits 2048 --label x --tag x --pin-source env:PIN
printf 'post-quantum document\n' >"$WORK/doc"
printf 'keyshare test context' >"$WORK/ctx"
for s in 44 65 87; do
  t=ml-dsa-$s
  check "key sign ($t, in the agent)" ks key sign --token pq --tag "$t" "$WORK/doc" "$WORK/$t.sig" --pin-source env:PIN
  check_out "dilithium-py verifies keyshare's $t signature" "valid" PY mldsa-verify "$WORK/$t.pub" "$WORK/doc" "$WORK/$t.sig"
  check_out "keyshare verifies its own $t signature" "signature valid" ks key verify --token pq --tag "$t" "$WORK/doc" "$WORK/$t.sig"
  check "key sign --context ($t)" ks key sign --token pq --tag "$t" --context "keyshare test context" "$WORK/doc" "$WORK/$t.ctx.sig" --pin-source env:PIN
  check_out "dilithium-py verifies it with the same context" "valid" PY mldsa-verify "$WORK/$t.pub" "$WORK/doc" "$WORK/$t.ctx.sig" "$WORK/ctx"
  PY mldsa-verify "$WORK/$t.pub" "$WORK/doc" "$WORK/$t.ctx.sig" >/dev/null 2>&1 \
    && bad "dilithium-py must refuse the $t context signature without the context" || ok "dilithium-py refuses it without the context"
  check_out "keyshare verifies it with --context" "signature valid" \
    ks key verify --token pq --tag "$t" --context "keyshare test context" "$WORK/doc" "$WORK/$t.ctx.sig"
  check_fail "keyshare refuses it without the context: one line" "signature invalid" \
    ks key verify --token pq --tag "$t" "$WORK/doc" "$WORK/$t.ctx.sig"
  check "dilithium-py makes an $t key and signs (with a context)" PY mldsa-sign "$s" "$WORK/py$s.pub" "$WORK/doc" "$WORK/py$s.sig" "$WORK/ctx"
  check_out "keyshare verifies dilithium-py's $t signature (--public-key)" "signature valid" \
    ks key verify --public-key "$WORK/py$s.pub" --context "keyshare test context" "$WORK/doc" "$WORK/py$s.sig"
  printf 'tampered\n' >>"$WORK/doc.t$s"; cat "$WORK/doc" >>"$WORK/doc.t$s"
  check_fail "keyshare refuses dilithium-py's signature over another message: one line" "signature invalid" \
    ks key verify --public-key "$WORK/py$s.pub" --context "keyshare test context" "$WORK/doc.t$s" "$WORK/py$s.sig"
done
check_out "key generate --type slh-dsa-sha2-128f" "SLH-DSA-SHA2-128f" \
  ks key generate --token pq --type slh-dsa-sha2-128f --label slh --tag slh --pin-source env:PIN
check "key sign --context (SLH-DSA-SHA2-128f)" ks key sign --token pq --tag slh --context "keyshare test context" "$WORK/doc" "$WORK/slh.sig" --pin-source env:PIN
check_out "keyshare verifies the SLH-DSA signature with its context (and size 17088)" "signature valid" \
  ks key verify --token pq --tag slh --context "keyshare test context" "$WORK/doc" "$WORK/slh.sig"
[ "$(stat -c %s "$WORK/slh.sig")" = 17088 ] && ok "SLH-DSA-SHA2-128f signature: 17088 bytes (FIPS 205)" || bad "SLH-DSA signature size"
check_fail "and refuses it with another context: one line" "signature invalid" \
  ks key verify --token pq --tag slh --context other "$WORK/doc" "$WORK/slh.sig"
# Through the PKCS #11 module (this path differs between the agent mode and KEYSHARE_IN_PROCESS=1):
# C_Sign with CKM_ML_DSA and a CK_SIGN_ADDITIONAL_CONTEXT, verified by dilithium-py with the public
# key's CKA_VALUE, which is the raw key inside `keyshare key public`'s SubjectPublicKeyInfo.
if cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -I "$HERE/c" -o "$WORK/pqmodule" "$HERE/c/pqmodule.c" -ldl 2>"$WORK/cc.err"; then
  if "$WORK/pqmodule" "$MODULE" pq g-ml-dsa-65 "$WORK/doc" "$WORK/mod.sig" "$WORK/mod.pub" "$WORK/ctx" >"$WORK/mod.out" 2>&1; then
    while read -r line; do ok "${line#ok   - }"; done <"$WORK/mod.out"
    check_out "dilithium-py verifies the module's ML-DSA-65 signature (with its context)" "valid" \
      PY mldsa-verify "$WORK/mod.pub" "$WORK/doc" "$WORK/mod.sig" "$WORK/ctx"
    openssl base64 -d -in <(grep -v -- ----- "$WORK/ml-dsa-65.pub") | tail -c 1952 >"$WORK/cli.raw"
    cmp -s "$WORK/cli.raw" "$WORK/mod.pub" && ok "the module's public CKA_VALUE is the key in keyshare key public's SPKI" \
      || bad "module CKA_VALUE = CLI SPKI key"
    check_out "keyshare verifies the module's signature (key verify --context)" "signature valid" \
      ks key verify --token pq --tag ml-dsa-65 --context "keyshare test context" "$WORK/doc" "$WORK/mod.sig"
  else
    bad "ML-DSA-65 through the module" "$(cat "$WORK/mod.out")"
  fi
else
  bad "pqmodule builds" "$(cat "$WORK/cc.err")"
fi
head -c 256 /dev/zero | tr '\0' c >"$WORK/ctx256"
check_fail "key sign with a 256-byte context: one line" "255" \
  ks key sign --token pq --tag ml-dsa-65 --context "$(cat "$WORK/ctx256")" "$WORK/doc" "$WORK/long.sig" --pin-source env:PIN
[ ! -e "$WORK/long.sig" ] && ok "nothing written for the refused signature" || bad "nothing written for the refused signature"
check_fail "key sign with an ML-KEM key: one line" "ML-KEM-768.*(cannot|not) sign" \
  ks key sign --token pq --tag ml-kem-768 "$WORK/doc" "$WORK/kem.sig" --pin-source env:PIN
check "an EC key beside them" ks key generate --token pq --type ec --label ec1 --tag ec1 --pin-source env:PIN
# `key list`: a post-quantum key's BITS is its NIST security category (its public key's length in
# bits, 9472 for ML-KEM-768, was shown before); an EC key keeps its curve size.
ks key list --token pq >"$WORK/keylist" 2>&1
for pair in "ML-KEM-512 1" "ML-KEM-768 3" "ML-KEM-1024 5" "ML-DSA-44 2" "ML-DSA-65 3" "ML-DSA-87 5" "SLH-DSA-SHA2-128f 1"; do
  set -- $pair
  grep -Eq "^public-key .* $1 +category $2 " "$WORK/keylist" \
    && ok "key list: $1 shows category $2 in BITS" || bad "key list BITS of $1" "$(grep -E "$1|BITS" "$WORK/keylist")"
done
! grep -Eq " (ML|SLH)-[A-Za-z0-9-]+ +[0-9]+ " "$WORK/keylist" && grep -Eq "^public-key .* ec +256 " "$WORK/keylist" \
  && ok "key list: no public-key length as BITS; the EC key still shows 256" || bad "key list BITS" "$(cat "$WORK/keylist")"
ks key list --token pq --json >"$WORK/keylist.json" 2>&1
python3 - "$WORK/keylist.json" <<'PY' && ok "key list --json: securityCategory 3 and no bits for ML-KEM-768, bits 256 for EC" || bad "key list --json" "$(head -c 600 "$WORK/keylist.json")"
import json, sys
rows = json.load(open(sys.argv[1]))
kem = [r for r in rows if r["keyType"] == "ML-KEM-768" and r["itemClass"] == "public-key"]
ec = [r for r in rows if r["keyType"] == "ec" and r["itemClass"] == "public-key"]
sys.exit(0 if kem and all(r.get("securityCategory") == 3 and "bits" not in r for r in kem)
         and ec and all(r.get("bits") == 256 and "securityCategory" not in r for r in ec) else 1)
PY
check_fail "key sign --context with an EC key: one line" "context" \
  ks key sign --token pq --tag ec1 --context x "$WORK/doc" "$WORK/x.sig" --pin-source env:PIN
check "csr with an ML-DSA-65 key" ks csr --token pq --tag ml-dsa-65 --subject "/CN=PQ Request/O=keyshare" --san email:pq@mail.example \
  --out "$WORK/req.pem" --pin-source env:PIN
check_out "OpenSSL 3.5 verifies the ML-DSA-65 request" "^ML-DSA-65 /CN=PQ Request/O=keyshare$" "$WORK/pqfixture" check-csr "$WORK/req.pem"
check_fail "csr with an ML-KEM key: one line" "ML-KEM" \
  ks csr --token pq --tag ml-kem-768 --subject "/CN=kem" --out "$WORK/kem.csr" --pin-source env:PIN

# ---- encapsulate / decapsulate -------------------------------------------------------------------
for s in 512 768 1024; do
  t=ml-kem-$s
  check "key encapsulate to the token's $t key" ks key encapsulate --token pq --tag "$t" "$WORK/$t.ct" "$WORK/$t.ss"
  check "key decapsulate ($t, in the agent)" ks key decapsulate --token pq --tag "$t" "$WORK/$t.ct" "$WORK/$t.ss2" --pin-source env:PIN
  [ "$(stat -c %s "$WORK/$t.ss")" = 32 ] && cmp -s "$WORK/$t.ss" "$WORK/$t.ss2" \
    && ok "$t: decapsulation gives the encapsulated 32-byte secret" || bad "$t round trip"
  check "kyber-py makes an $t key" PY mlkem-keygen "$s" "$WORK/py$s.pub" "$WORK/py$s.dk"
  check "keyshare encapsulates to kyber-py's $t key (--public-key)" ks key encapsulate --public-key "$WORK/py$s.pub" "$WORK/ks$s.ct" "$WORK/ks$s.ss"
  check "kyber-py decapsulates keyshare's $t ciphertext" PY mlkem-decaps "$s" "$WORK/py$s.dk" "$WORK/ks$s.ct" "$WORK/ks$s.ss.py"
  cmp -s "$WORK/ks$s.ss" "$WORK/ks$s.ss.py" && ok "$t: kyber-py and keyshare agree on the shared secret (keyshare encapsulated)" \
    || bad "$t: shared secrets differ (keyshare -> kyber-py)"
  check "kyber-py encapsulates to keyshare's $t key" PY mlkem-encaps "$WORK/$t.pub" "$WORK/py$s.ct" "$WORK/py$s.ss"
  check "keyshare decapsulates kyber-py's $t ciphertext" ks key decapsulate --token pq --tag "$t" "$WORK/py$s.ct" "$WORK/py$s.ss.ks" --pin-source env:PIN
  cmp -s "$WORK/py$s.ss" "$WORK/py$s.ss.ks" && ok "$t: kyber-py and keyshare agree on the shared secret (kyber-py encapsulated)" \
    || bad "$t: shared secrets differ (kyber-py -> keyshare)"
done
# kyber-py's ML-KEM-768 ciphertext decapsulated through the module (C_DecapsulateKey, PKCS #11 3.2).
if [ -x "$WORK/pqmodule" ] && "$WORK/pqmodule" "$MODULE" pq g-ml-kem-768 --decapsulate "$WORK/py768.ct" "$WORK/py768.ss.mod" >"$WORK/mod.out" 2>&1; then
  while read -r line; do ok "${line#ok   - }"; done <"$WORK/mod.out"
  cmp -s "$WORK/py768.ss" "$WORK/py768.ss.mod" && ok "ML-KEM-768: the module and kyber-py agree on the shared secret" \
    || bad "module vs kyber-py shared secret"
else
  bad "C_DecapsulateKey of kyber-py's ciphertext through the module" "$(cat "$WORK/mod.out" 2>/dev/null)"
fi
[ "$(stat -c %a "$WORK/ml-kem-768.ss")" = 600 ] && [ "$(stat -c %a "$WORK/ml-kem-768.ss2")" = 600 ] \
  && ok "the shared-secret files are 0600" || bad "secret files 0600" "$(stat -c '%a %n' "$WORK"/ml-kem-768.ss*)"
cp "$WORK/ml-kem-768.ss" "$WORK/keep"
check_fail "encapsulate over an existing secret file without --force: one line" "exists" \
  ks key encapsulate --token pq --tag ml-kem-768 "$WORK/new.ct" "$WORK/ml-kem-768.ss"
cmp -s "$WORK/keep" "$WORK/ml-kem-768.ss" && [ ! -e "$WORK/new.ct" ] \
  && ok "refused: the existing secret is as it was, no ciphertext written" || bad "refused encapsulation left no trace"
check_fail "encapsulate over an existing ciphertext file without --force: one line" "exists" \
  ks key encapsulate --token pq --tag ml-kem-768 "$WORK/ml-kem-768.ct" "$WORK/new.ss"
[ ! -e "$WORK/new.ss" ] && ok "refused: no secret file written" || bad "refused encapsulation wrote a secret"
check "encapsulate --force replaces both" ks key encapsulate --token pq --tag ml-kem-768 --force "$WORK/ml-kem-768.ct" "$WORK/ml-kem-768.ss"
! cmp -s "$WORK/keep" "$WORK/ml-kem-768.ss" && ok "--force: a new secret" || bad "--force: a new secret"
check_fail "encapsulate with the same file for both: one line" "same file" \
  ks key encapsulate --token pq --tag ml-kem-768 "$WORK/same" "$WORK/same"
check_fail "encapsulate to an ML-DSA key: one line" "ML-DSA-65.*encapsulat" \
  ks key encapsulate --token pq --tag ml-dsa-65 "$WORK/x.ct" "$WORK/x.ss"
head -c 100 "$WORK/ml-kem-768.ct" >"$WORK/short.ct"
check_fail "decapsulate a truncated ciphertext: one line" "1088" \
  ks key decapsulate --token pq --tag ml-kem-768 "$WORK/short.ct" "$WORK/short.ss" --pin-source env:PIN
[ ! -e "$WORK/short.ss" ] && ok "nothing written for the refused decapsulation" || bad "refused decapsulation wrote a file"
check_fail "decapsulate with an ML-DSA key: one line" "ML-DSA-65" \
  ks key decapsulate --token pq --tag ml-dsa-65 "$WORK/ml-kem-768.ct" "$WORK/d.ss" --pin-source env:PIN
check_fail "decapsulate without the PIN's source on a pipe: one line" "PIN|pin" \
  ks key decapsulate --token pq --tag ml-kem-768 "$WORK/ml-kem-768.ct" "$WORK/np.ss" </dev/null
# The private key never reaches the CLI: it opens no keychain.db for decapsulate.
strace -f -qq -e trace=open,openat,openat2 -o "$WORK/trace" "$KS" key decapsulate --token pq --tag ml-kem-768 \
  "$WORK/ml-kem-768.ct" "$WORK/traced.ss" --pin-source env:PIN >/dev/null 2>"$WORK/err"
if [ ! -s "$WORK/traced.ss" ]; then bad "traced decapsulate" "$(cat "$WORK/err")"
elif grep -q keychain.db "$WORK/trace"; then bad "decapsulate opens no keychain.db in the CLI" "$(grep keychain.db "$WORK/trace" | head -3)"
else ok "key decapsulate opens no keychain.db in the CLI (the agent decapsulates)"; fi
strace -f -qq -e trace=open,openat,openat2 -o "$WORK/trace" "$KS" key sign --token pq --tag ml-dsa-65 \
  "$WORK/doc" "$WORK/traced.sig" --pin-source env:PIN >/dev/null 2>"$WORK/err"
[ -s "$WORK/traced.sig" ] && ! grep -q keychain.db "$WORK/trace" \
  && ok "key sign (ML-DSA) opens no keychain.db in the CLI" || bad "ML-DSA sign opens no keychain.db" "$(cat "$WORK/err")"

echo "# 34-pq-cli: $(( $(date +%s) - T0 ))s (mode: $([ "${KEYSHARE_IN_PROCESS:-}" = 1 ] && echo in-process || echo agent))"
finish
