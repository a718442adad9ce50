#!/usr/bin/env bash
# fork() while other threads are inside the module (issue 12; docs/reliability.md
# "Fork with busy threads"): Tests/stress/forkbusy.c keeps 4 threads signing,
# creating and destroying token objects while its main thread forks; every
# child must C_Initialize, log in and sign within 5 s. `make stress` runs it
# with 100 forks (FORKBUSY_FORKS). pkcs11-tool --test-fork (a fork with no
# other thread inside) must keep passing too.
# Usage: 55-fork.sh KEYSHARE MODULE [FORKS]
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
FORKS=${3:-${FORKBUSY_FORKS:-20}}
source "$(dirname "$0")/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-fork.XXXXXX)
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PIN=1234-user SOPIN=9876-so
check "token create" "$KS" token create --label fork --pin-source env:PIN --so-pin-source env:SOPIN
check "generate an EC key" "$KS" key generate --type ec --curve P-256 --label fork-ec --tag fork-ec --pin-source env:PIN
check "compile forkbusy" ${CC:-cc} -O1 -Wall -Werror -I "$ROOT/pkcs11/types" \
  -o "$WORK/forkbusy" "$ROOT/Tests/stress/forkbusy.c" -ldl -lpthread
out=$("$WORK/forkbusy" "$MODULE" "$FORKS" 5 2>&1)
echo "$out" | grep -v '^[0-9]* passed'
PASS=$((PASS + $(grep -c '^ok ' <<<"$out"))); FAIL=$((FAIL + $(grep -c '^FAIL' <<<"$out")))
grep -q '^[0-9]* passed' <<<"$out" || bad "forkbusy ran to the end" "$out"
# pkcs11-tool's own check: a fork with no other thread inside the module.
check "pkcs11-tool --test-fork" pkcs11-tool --module "$MODULE" --token-label fork --login --pin env:PIN --test-fork
# The module's fork handler forgets, never unmaps, a connection's shared region in the
# child (mapped MADV_DONTFORK, so the child does not have it; its address may already
# be another mapping there). forkmap.c maps a page at that address in a fork handler that
# runs before the module's. Before, the module's handler unmapped that page in the child.
# In-process (KEYSHARE_IN_PROCESS=1) there is no agent, so no region: nothing to check.
if [ -n "${KEYSHARE_IN_PROCESS:-}" ]; then
  echo "note - in-process: no agent connection, no shared region (the forkmap check is agent mode's)"
elif ${CC:-cc} -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -I "$ROOT/Tests/integration/c" \
     -o "$WORK/forkmap" "$ROOT/Tests/integration/c/forkmap.c" -ldl -lpthread; then
  out=$(timeout 30 "$WORK/forkmap" "$MODULE" 2>&1)
  grep -q "child page kept" <<<"$out" && ok "a fork child keeps a mapping at the old shared region's address ($out)" \
    || bad "a fork child keeps a mapping at the old shared region's address" "$out"
else
  bad "compile forkmap (Tests/integration/c/forkmap.c)"
fi
check "store integrity after the forks" bash -c "sqlite3 '$KEYSHARE_HOME/keychain.db' 'PRAGMA integrity_check' | grep -qx ok"
finish
