#!/usr/bin/env bash
# PIN protection (issue 8): the user PIN locks after the token's maximum (10 by
# default) wrong tries; CKF_USER_PIN_COUNT_LOW / FINAL_TRY / LOCKED say the
# truth at each step; a brute force spread over many parallel processes is
# still counted (the counter lives in the shared store); the SO unlocks by
# setting a new user PIN. With KEYSHARE_MEASURE_KDF=1 it also measures one PIN
# guess at the default scrypt cost (log2N 15; docs/reliability.md).
# Usage: 64-pin-lockout.sh KEYSHARE MODULE.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
new_home
trap 'rm -rf "$KEYSHARE_HOME"' EXIT
# PINs reach pkcs11-tool through the environment (--pin env:VAR), never argv.
export PIN=1234-user SOPIN=9876-so WRONG=0000-wrong NEWPIN=4321-new
P=(pkcs11-tool --module "$MODULE")
check "token create" "$KS" token create --label lock --pin-source env:PIN --so-pin-source env:SOPIN

flags() { "${P[@]}" -L 2>/dev/null | grep -A12 "token label *: lock" | grep "token flags"; }
try_login() { "${P[@]}" --token-label lock --login --pin "env:$1" -O 2>&1; true; }   # try_login PIN_VARIABLE

check_out "no failure: no COUNT_LOW flag" "PIN initialized" flags
flags | grep -q "count low" && bad "flags before any failure" "$(flags)" || ok "flags before any failure are clean"
check_out "wrong PIN: CKR_PIN_INCORRECT" "CKR_PIN_INCORRECT" try_login WRONG
check_out "after one failure: user PIN count low" "count low" flags
check_out "correct PIN resets the counter" "Private Key|Certificate|Data object|^$" try_login PIN
flags | grep -q "count low" && bad "counter reset" "$(flags)" || ok "counter reset by a good login"

# Brute force from 24 processes at once (12 in parallel): only 10 guesses may be judged.
seq 24 | xargs -P 12 -I{} sh -c "pkcs11-tool --module '$MODULE' --token-label lock --login --pin env:WRONG -O 2>&1 | grep -o 'CKR_PIN_[A-Z_]*' || echo other" >"$KEYSHARE_HOME/bf.out"
incorrect=$(grep -c CKR_PIN_INCORRECT "$KEYSHARE_HOME/bf.out")
locked=$(grep -c CKR_PIN_LOCKED "$KEYSHARE_HOME/bf.out")
[ "$incorrect" -eq 10 ] && [ "$locked" -eq 14 ] && ok "24 parallel guesses: 10 judged PIN_INCORRECT, 14 PIN_LOCKED" \
  || bad "24 parallel guesses counted across processes" "incorrect=$incorrect locked=$locked: $(sort "$KEYSHARE_HOME/bf.out" | uniq -c)"
check_out "user PIN locked flag" "user PIN locked" flags
check_out "correct PIN refused while locked" "CKR_PIN_LOCKED" try_login PIN
check_fail "CLI: locked PIN is one clear line" "locked" "$KS" list --pin-source env:PIN
check_out "token list shows the lock" "locked" "$KS" token list

# SO unlock: a new user PIN, keys kept, counters cleared.
check "SO sets a new user PIN" "${P[@]}" --token-label lock --init-pin --login --login-type so --so-pin env:SOPIN --new-pin env:NEWPIN
flags | grep -qE "locked|count low|final" && bad "flags cleared after unlock" "$(flags)" || ok "flags cleared after unlock"
check "new PIN logs in" "${P[@]}" --token-label lock --login --pin env:NEWPIN -O

# FINAL_TRY: 9 wrong guesses leave one.
for i in 1 2 3 4 5 6 7 8 9; do try_login WRONG >/dev/null; done
check_out "after 9 failures: final try" "final user PIN try" flags
check "the final try with the right PIN still works" "${P[@]}" --token-label lock --login --pin env:NEWPIN -O

if [ "${KEYSHARE_MEASURE_KDF:-0}" = 1 ]; then
  # One guess at the default cost: CPU time of a wrong-PIN list minus a no-PIN list.
  unset KEYSHARE_KDF_LOG2N
  export KEYSHARE_HOME; KEYSHARE_HOME=$(mktemp -d /tmp/keyshare-kdf.XXXXXX)
  "$KS" token create --label kdf --pin-source env:PIN --so-pin-source env:SOPIN >/dev/null
  cpu() { local s e me=$BASHPID; s=$(awk '{print $14+$15+$16+$17}' /proc/$me/stat); "$@" >/dev/null 2>&1
          e=$(awk '{print $14+$15+$16+$17}' /proc/$me/stat); echo $((e - s)); }
  base=0 guess=0
  for i in 1 2 3 4 5; do
    base=$((base + $(cpu "$KS" token list))); guess=$((guess + $(cpu "$KS" list --pin-source env:PIN)))
  done
  ms=$(( (guess - base) * 1000 / $(getconf CLK_TCK) / 5 ))
  [ "$ms" -ge 50 ] && ok "one PIN guess at scrypt log2N 15 costs ${ms} ms CPU (>= 50)" || bad "KDF cost ${ms} ms CPU < 50"
  rm -rf "$KEYSHARE_HOME"
fi
finish
