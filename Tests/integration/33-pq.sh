#!/usr/bin/env bash
# PKCS #11 3.2 post-quantum mechanisms (issue 18): ML-DSA (pure, context, hedged/deterministic,
# multi-part, HashML-DSA), ML-KEM (C_EncapsulateKey / C_DecapsulateKey, implicit rejection) and
# SLH-DSA through the C ABI (Tests/integration/c/pq.c). With the bundled OpenSSL 3.5 the C host
# links the same static libcrypto and checks the module's signatures and ciphertexts with raw EVP;
# with `make OPENSSL=system` (3.0) it checks that no post-quantum mechanism is offered. Passes
# through the agent (the default) and with KEYSHARE_IN_PROCESS=1.
# Usage: 33-pq.sh KEYSHARE MODULE. Ends with "N passed, M failed".
set -euo pipefail
KEYSHARE=${1:?keyshare path}
MODULE=${2:?module path}
MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")
. "$(dirname "$0")/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-pq.XXXXXX)
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export KS_TEST_PIN=0000 KS_TEST_SO_PIN=1234

# Which engine the module runs (keyshare --version, line 2), and the matching libcrypto for the host.
engine=$("$KEYSHARE" --version | sed -n 2p)
BUNDLE=$ROOT/.build/openssl-3.5
case "$engine" in
  *"OpenSSL 3.5"*bundled*)
    CRYPTO=(-DKS_PQ_ENGINE=1 -I "$BUNDLE/include" -L "$BUNDLE/lib" -lkeyshare-crypto35 -lzstd -lz -lbrotlienc -lbrotlidec -lpthread) ;;
  *"OpenSSL 3."[5-9]*|*"OpenSSL "[4-9]*)
    CRYPTO=(-DKS_PQ_ENGINE=1 -lcrypto) ;;
  *) CRYPTO=(-DKS_PQ_ENGINE=0 -lcrypto) ;;
esac
echo "# engine: $engine (host built with ${CRYPTO[0]})"

# C hosts through lib.sh's c_host.
c_host pq "C host" "${CRYPTO[@]}"

# The classical KEMs of 3.2 (Tests/integration/c/kem_classic.c): ECDH (CKM_ECDH1_DERIVE /
# _COFACTOR_DERIVE, the ephemeral public value as ciphertext) and RSASVE (CKM_RSA_X_509), each
# crossed with raw EVP (ECDH + X9.63 KDF, EVP's RSASVE); any engine (OpenSSL 3.0 has both).
c_host kem_classic "classical KEM host" "${CRYPTO[@]}"

# C_CreateObject of post-quantum keys made by raw EVP here (Tests/integration/c/pq_import.c):
# only with a post-quantum engine (the host needs EVP's ML-KEM / ML-DSA / SLH-DSA).
if [ "${CRYPTO[0]}" = -DKS_PQ_ENGINE=1 ]; then
  c_host pq_import "import host" "${CRYPTO[@]:1}"
fi

# C_WrapKey / C_UnwrapKey of post-quantum private keys (Tests/integration/c/pq_wrap.c): PKCS #8
# opened and parsed by raw EVP, unwrapped keys sign / decapsulate; only with a post-quantum engine.
if [ "${CRYPTO[0]}" = -DKS_PQ_ENGINE=1 ]; then
  c_host pq_wrap "wrap host" "${CRYPTO[@]:1}"
fi

# python-pkcs11 with raw mechanism numbers, on the token the C host made ("pq"): it cannot today
# (0.9.4's generate_keypair takes only its KeyType enum, which has no CKK_ML_DSA); the script
# says so with a reason instead of passing. PyKCS11 is not installed with the audit suites.
PY=/tmp/audit-suites/venv/bin/python
if [ "${CRYPTO[0]}" = -DKS_PQ_ENGINE=1 ] && [ -x "$PY" ]; then
  out=$(timeout 120 "$PY" "$ROOT/Tests/integration/support/pq_python_pkcs11.py" "$MODULE" pq 2>&1) || true
  if grep -q '^skip:' <<<"$out"; then echo "# python-pkcs11 $(grep '^skip:' <<<"$out")"; else
    echo "$out" | grep -E '^(ok|FAIL)' || true
    p_pass=$(echo "$out" | tail -1 | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p')
    p_fail=$(echo "$out" | tail -1 | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p')
    if [ -z "$p_pass" ]; then bad "python-pkcs11 script ran to its end" "$(echo "$out" | tail -5)"; else
      PASS=$((PASS + p_pass)); FAIL=$((FAIL + p_fail)); fi
  fi
else
  echo "# python-pkcs11: skipped (no post-quantum engine, or no /tmp/audit-suites venv)"
fi
# PyKCS11 (Debian 12's python3-pykcs11, a 2.40-level binding) with raw CKK/CKM/CKA/CKP numbers on the
# same token: ML-DSA-65 keygen, sign, verify (tampered: CKR_SIGNATURE_INVALID), CKA_VALUE public
# readable / private sensitive, ML-KEM-768 keygen (it has no C_EncapsulateKey: the script says so).
# Debian's interpreter on purpose: the package installs into /usr/lib/python3/dist-packages.
if [ "${CRYPTO[0]}" = -DKS_PQ_ENGINE=1 ] && /usr/bin/python3 -c 'import PyKCS11' 2>/dev/null; then
  out=$(timeout 60 /usr/bin/python3 "$ROOT/Tests/integration/support/pq_pykcs11.py" "$MODULE" pq 2>&1) || true
  echo "$out" | grep -E '^(ok|FAIL|#)' || true
  k_pass=$(echo "$out" | tail -1 | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p')
  k_fail=$(echo "$out" | tail -1 | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p')
  if [ -z "$k_pass" ]; then bad "PyKCS11 script ran to its end" "$(echo "$out" | tail -5)"; else
    PASS=$((PASS + k_pass)); FAIL=$((FAIL + k_fail)); fi
elif [ "${CRYPTO[0]}" = -DKS_PQ_ENGINE=1 ]; then
  bad "PyKCS11 importable (python3-pykcs11 is in the Makefile's DEB_PACKAGES)"
else
  echo "# PyKCS11: skipped (no post-quantum engine)"
fi
finish
