#!/usr/bin/env bash
# The PKCS #11 3.2 functions (issue 18): a C host (Tests/integration/c/v32.c) takes the 3.2
# function list with C_GetInterface("PKCS 11", {3,2}) and checks the signature-first verify
# (C_VerifySignature*) for each verify mechanism, C_GetSessionValidationFlags, and
# C_WrapKeyAuthenticated / C_UnwrapKeyAuthenticated with AES-GCM (against EVP, and the
# wrap/decrypt attacks of 56-conformance through them), the async functions' answer, and that
# a host asking for 3.0 or 2.40 gets the tables it got before. Run it plain (agent mode, the
# default) and with KEYSHARE_IN_PROCESS=1.
# Usage: 74-pkcs11-3-2.sh KEYSHARE MODULE. Ends with "N passed, M failed".
set -euo pipefail
KEYSHARE=${1:?keyshare path}
MODULE=${2:?module path}
MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")
. "$(dirname "$0")/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-v32.XXXXXX)
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# Test PINs go through the environment, never argv.
export KS_TEST_PIN=0000 KS_TEST_SO_PIN=1234
if [ "${KEYSHARE_IN_PROCESS:-}" = 1 ]; then echo "mode: in-process"; else echo "mode: agent"; fi

# A public test certificate (no secret: its key is thrown away) for the trust objects.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout /dev/null -subj "/CN=v32 anchor" \
  -days 2 -outform DER -out "$WORK/anchor.der" 2>/dev/null
# A keychain token with an anchor set by the CLI (`keyshare trust anchor add`, the SO PIN from the env).
ANCHOR="$FIXTURES/ca/root-ca.pem"
"$KEYSHARE" token create --label anchors --pin-source env:KS_TEST_PIN --so-pin-source env:KS_TEST_SO_PIN --short-pin >/dev/null
"$KEYSHARE" trust anchor add "$ANCHOR" --token anchors --so-pin-source env:KS_TEST_SO_PIN >/dev/null
ANCHOR_SHA=$(openssl x509 -in "$ANCHOR" -outform DER | sha256sum | cut -c1-64)
c_host v32 "C host" -lcrypto -- "$WORK/anchor.der" anchors "$ANCHOR_SHA"
finish
