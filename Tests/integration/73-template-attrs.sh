#!/usr/bin/env bash
# CKA_WRAP_TEMPLATE, CKA_UNWRAP_TEMPLATE and CKA_DERIVE_TEMPLATE (issue 13):
# a C host (Tests/integration/c/templates.c) checks, from PKCS #11 3.0, that
# the module takes them where the key tables put them, checks the nested
# template, answers C_GetAttributeValue by §5.7.5's rules for array
# attributes, keeps them across C_Finalize and in a new process, refuses a
# C_WrapKey of a key that does not match (CKR_KEY_NOT_WRAPPABLE) and merges
# them into C_UnwrapKey's and C_DeriveKey's templates
# (CKR_TEMPLATE_INCONSISTENT on a conflict), without loosening the
# wrap/decrypt separation. Then the same program runs against SoftHSM2 (when
# installed): its differences are printed, not counted
# (docs/pkcs11-conformance.md "Template attributes" says why each differs).
# Run plain (agent) and with KEYSHARE_IN_PROCESS=1.
# Usage: 73-template-attrs.sh KEYSHARE MODULE. Ends with "N passed, M failed".
set -euo pipefail
KEYSHARE=${1:?keyshare path}
MODULE=${2:?module path}
MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")
. "$(dirname "$0")/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-tmpl.XXXXXX)
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export KS_TEST_PIN=0000 KS_TEST_SO_PIN=1234

run_host() { # run_host NAME ARGS...: counts the host's checks
  local name=$1; shift
  local out
  out=$("$WORK/templates" "$@" 2>&1) || true
  echo "$out" | grep -E '^(ok|FAIL|DIFF|skip|  )' || true
  local last c_pass c_fail
  last=$(echo "$out" | tail -1)
  c_pass=$(echo "$last" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p')
  c_fail=$(echo "$last" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p')
  if [ -z "$c_pass" ]; then bad "$name ran to its end" "$(echo "$out" | tail -5)"; else
    PASS=$((PASS + c_pass)); FAIL=$((FAIL + c_fail)); fi
}

if cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$WORK/templates" "$ROOT/Tests/integration/c/templates.c" -ldl; then
  run_host "C host (create)" "$MODULE" create tmpl-token
  run_host "C host (reopen, a new process)" "$MODULE" reopen tmpl-token
else
  bad "C host compiles"
fi

SOFTHSM=/usr/lib/softhsm/libsofthsm2.so
if [ -e "$SOFTHSM" ] && [ -x "$WORK/templates" ]; then
  echo "# the same program against SoftHSM2 (differences printed, not counted)"
  mkdir -p "$WORK/softhsm/tokens"
  printf 'directories.tokendir = %s\nobjectstore.backend = file\n' "$WORK/softhsm/tokens" > "$WORK/softhsm/conf"
  out=$(SOFTHSM2_CONF=$WORK/softhsm/conf PEER=softhsm "$WORK/templates" "$SOFTHSM" create tmpl-softhsm 2>&1) || true
  echo "$out" | grep -E '^(DIFF|FAIL|skip|  )' | sed 's/^/  softhsm2: /' || true
  echo "  softhsm2: $(echo "$out" | tail -1)"
fi
finish
