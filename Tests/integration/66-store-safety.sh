#!/usr/bin/env bash
# The store under hostile or broken conditions (issue 12; docs/reliability.md
# items 6, 7, 8, 11), with real mounts and real processes:
#  6  a store directory or file another user owns, or that is group/world-
#     writable, is refused with one line (path, owner, mode, fix); the
#     password service's socket directory too;
#  7  on a read-only mount (with and without -wal/-shm) and on a full disk,
#     listing, C_Initialize, login and signing work, writes fail clearly,
#     wrong PINs stay counted (and a login is refused when no count can be
#     kept at all);
#  8  an emptied keychain.db is an error naming the file, not "no tokens";
#  11 deleting the -wal/-shm under a running module host no longer loses a
#     later CLI import: the host's writes are refused and its close leaves
#     the new log alone.
# Mounts need root; without it those parts are skipped (and say so).
# Usage: 66-store-safety.sh KEYSHARE MODULE. Ends with "N passed, M failed".
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
export KEYSHARE_KDF_LOG2N=10 PIN=2468-user SOPIN=1357-so WRONG=0000-wrong
W=$(mktemp -d /tmp/keyshare-safety.XXXXXX)
HOSTS=()
MOUNTS=()
cleanup() {
  exec 7>&- 2>/dev/null
  for p in "${HOSTS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do umount -l "${MOUNTS[$i]}" 2>/dev/null; done
  [ -n "${KEEP:-}" ] || { chmod -R u+w "$W" 2>/dev/null; rm -rf "$W"; }
}
trap cleanup EXIT
ROOT=$(cd "$HERE/../.." && pwd)
check "compile storehost.c" cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$W/storehost" "$HERE/c/storehost.c" -ldl
ID=$FIXTURES/identities

# A store in $1 with one token and one EC identity; every process closed.
make_store() {
  export KEYSHARE_HOME=$1
  "$KS" token create --label safety --pin-source env:PIN --so-pin-source env:SOPIN >/dev/null &&
    "$KS" import "$ID/auth-upn-new.key.pem" "$ID/auth-upn-new.cert.pem" --pin-source env:PIN >/dev/null
}
# host CMD...: a fresh module host runs the commands; prints its "cmd 0xRV" lines.
host() { printf '%s\n' "$@" | "$W/storehost" "$MODULE" 2>&1; }
# rv_is NAME OUTPUT CMD RV: the host's answer to CMD was RV.
rv_is() {
  if grep -qx "$3 $4" <<<"$2"; then ok "$1"; else bad "$1" "wanted $3 $4; host said: $(tr '\n' ' ' <<<"$2")"; fi
}
SIGN_SESSION=(init slot open login sign)
signs() { # NAME OUTPUT: every step of a login-and-sign returned CKR_OK
  local want="init 0x0 slot 0x0 open 0x0 login 0x0 sign 0x0"
  if [ "$(head -5 <<<"$2" | tr '\n' ' ' | sed 's/ $//')" = "$want" ]; then ok "$1"; else bad "$1" "$(tr '\n' ' ' <<<"$2")"; fi
}
IS_ROOT=0; [ "$(id -u)" -eq 0 ] && IS_ROOT=1

# --- item 6: stores and directories someone else could have planted ---------
S6=$W/s6; make_store "$S6"
check "item 6: a store of our own opens" "$KS" token list
chmod 0770 "$S6"
check_fail "item 6: group-writable store directory refused (path, mode, fix)" \
  "^keyshare: refusing $S6: group-writable \(mode 0770, owner uid [0-9]+.*chmod go-w $S6" "$KS" token list
rv_is "item 6: C_Initialize refuses it: CKR_DEVICE_ERROR" "$(host init)" init 0x30
chmod 0700 "$S6"; chmod 0666 "$S6/keychain.db"
check_fail "item 6: world-writable keychain.db refused" "^keyshare: refusing $S6/keychain.db: group- and world-writable \(mode 0666" "$KS" list
chmod 0600 "$S6/keychain.db"
chmod 0777 "$W"
check_fail "item 6: world-writable, non-sticky parent refused" "^keyshare: refusing $S6: its parent $W is group- and world-writable" "$KS" list
chmod 0700 "$W"
if [ $IS_ROOT -eq 1 ]; then
  # A WAL planted by another user would be replayed into root's store.
  printf 'planted' >"$S6/keychain.db-wal"; chown 1000:1000 "$S6/keychain.db-wal"
  check_fail "item 6: keychain.db-wal owned by another uid refused" \
    "^keyshare: refusing $S6/keychain.db-wal: owned by uid 1000.* not by this process's uid 0" "$KS" token list
  rm -f "$S6/keychain.db-wal"
  chown -R 1000:1000 "$S6"
  check_fail "item 6: root refuses a store directory owned by uid 1000 (owner and mode named)" \
    "^keyshare: refusing $S6: owned by uid 1000.*mode 0700, not by this process's uid 0 .*chown 0 $S6" "$KS" token list
  rv_is "item 6: C_Initialize as root on uid 1000's store: CKR_DEVICE_ERROR" "$(host init)" init 0x30
  chown -R 0:0 "$S6"
else
  echo "skip - item 6 ownership checks need root (chown)"
fi
check "item 6: fixed modes and owner: the store opens again" "$KS" token list
# The password service's socket directory gets the same check.
mkdir -m 0770 "$W/sock"
pin_credential "$W/creds" PIN
check_fail "item 6: password service refuses a group-writable socket directory" \
  "^keyshare: refusing $W/sock: group-writable \(mode 0770" timeout 10 env CREDENTIALS_DIRECTORY="$W/creds" "$KS" serve --socket "$W/sock/password.sock" --pin-source credential:pin

# --- item 8: an emptied store is an error, not a new empty store ------------
S8=$W/s8; make_store "$S8"
: >"$S8/keychain.db"
check_fail "item 8: 0-byte keychain.db is an error naming the file" \
  "$S8/keychain.db is empty \(0 bytes\).*restore it from a backup" "$KS" token list
[ "$(stat -c %s "$S8/keychain.db")" = 0 ] && ok "item 8: the emptied file is left as it was" || bad "item 8: file left alone" "$(stat -c %s "$S8/keychain.db")"
rv_is "item 8: C_Initialize on it: CKR_DEVICE_ERROR" "$(host init)" init 0x30
S8b=$W/s8b; make_store "$S8b"
head -c 50 "$S8b/keychain.db" >"$S8b/cut" && mv "$S8b/cut" "$S8b/keychain.db" && chmod 600 "$S8b/keychain.db"
check_fail "item 8: a keychain.db cut to 50 bytes is an error naming the file" "$S8b/keychain.db" "$KS" token list
# A WAL with commits whose database file is gone: a host holds the store so
# the CLI's import stays in the WAL, then keychain.db is deleted.
S8c=$W/s8c; make_store "$S8c"
mkfifo "$W/fifo8"; "$W/storehost" "$MODULE" <"$W/fifo8" >/dev/null 2>&1 & HOSTS+=($!); exec 7>"$W/fifo8"
printf '%s\n' init slot >&7; sleep 0.5
"$KS" import "$ID/auth-upn-old.cert.pem" --pin-source env:PIN >/dev/null
rm "$S8c/keychain.db"
check_fail "item 8: a missing keychain.db next to its WAL is not a new store" \
  "$S8c/keychain.db is missing but its write-ahead log" "$KS" token list
[ ! -e "$S8c/keychain.db" ] && ok "item 8: no new store was made over the orphan WAL" || bad "item 8: no new store over the WAL"
printf 'finalize\n' >&7; exec 7>&-; wait "${HOSTS[-1]}" 2>/dev/null

# --- item 11: the WAL deleted under a running module host -------------------
S11=$W/s11; make_store "$S11"
mkfifo "$W/fifo11"; "$W/storehost" "$MODULE" <"$W/fifo11" >"$W/host11.out" 2>&1 & HOSTS+=($!); exec 7>"$W/fifo11"
printf '%s\n' init slot open login sign >&7; sleep 0.5
rm -f "$S11/keychain.db-wal" "$S11/keychain.db-shm"
check "item 11: CLI import after the WAL was deleted" "$KS" import "$ID/auth-upn-old.key.pem" "$ID/auth-upn-old.cert.pem" --pin-source env:PIN
printf '%s\n' create finalize >&7; exec 7>&-; wait "${HOSTS[-1]}" 2>/dev/null
out=$(cat "$W/host11.out")
signs "item 11: the host had logged in and signed before" "$out"
rv_is "item 11: the host's write into the deleted WAL is refused (CKR_DEVICE_ERROR)" "$out" create 0x30
rv_is "item 11: the host's C_Finalize" "$out" finalize 0x0
listing=$("$KS" list 2>&1)
[ "$(grep -c 'certificate\|public-key' <<<"$listing")" -eq 4 ] && ok "item 11: the CLI import survived the host's exit (4 public items listed)" \
  || bad "item 11: the CLI import survived the host's exit" "$listing"
grep -q storehost-object <<<"$listing" && bad "item 11: the refused write is not in the store" "$listing" || ok "item 11: the refused write is not in the store"
if command -v sqlite3 >/dev/null; then
  check_out "item 11: integrity_check ok" "^ok$" sqlite3 "$S11/keychain.db" "PRAGMA integrity_check"
fi

# --- item 7: read-only mount, full disk -------------------------------------
if [ $IS_ROOT -eq 1 ]; then
  RO=$W/ro; mkdir -m 700 "$RO"
  mount -t tmpfs -o size=8m,mode=0700 tmpfs "$RO" && MOUNTS+=("$RO")
  make_store "$RO/plain"
  # The same store with its -wal and -shm in place, as a running host leaves them.
  mkfifo "$W/fifo7"; KEYSHARE_HOME=$RO/plain "$W/storehost" "$MODULE" <"$W/fifo7" >/dev/null 2>&1 & HOSTS+=($!); exec 7>"$W/fifo7"
  printf '%s\n' init slot >&7; sleep 0.5
  # While the host holds the store, this commit stays in the WAL.
  "$KS" import "$ID/auth-upn-old.cert.pem" --pin-source env:PIN >/dev/null
  mkdir -m 700 "$RO/wal" "$RO/walonly"
  cp -p "$RO/plain/keychain.db" "$RO/plain/keychain.db-wal" "$RO/plain/keychain.db-shm" "$RO/wal/"
  cp -p "$RO/plain/keychain.db" "$RO/plain/keychain.db-wal" "$RO/walonly/"
  printf 'finalize\n' >&7; exec 7>&-; wait "${HOSTS[-1]}" 2>/dev/null
  [ ! -e "$RO/plain/keychain.db-wal" ] && [ -s "$RO/wal/keychain.db-wal" ] && [ -e "$RO/wal/keychain.db-shm" ] \
    && ok "item 7: ro stores prepared: one without -wal/-shm, one with both (a commit in the WAL)" || bad "item 7: ro stores prepared" "$(ls -la "$RO"/*)"
  mount -o remount,ro "$RO"
  for variant in plain wal; do
    export KEYSHARE_HOME=$RO/$variant
    check_out "item 7 ro ($variant): token list" "safety .*present" "$KS" token list
    n=$("$KS" list 2>&1 | grep -c '^certificate')
    [ "$n" -eq 2 ] && ok "item 7 ro ($variant): list shows both certificates (the second committed in the WAL)" \
      || bad "item 7 ro ($variant): list" "$("$KS" list 2>&1)"
    out=$(host "${SIGN_SESSION[@]}" create)
    signs "item 7 ro ($variant): C_Initialize, login and sign" "$out"
    rv_is "item 7 ro ($variant): C_CreateObject: CKR_TOKEN_WRITE_PROTECTED" "$out" create 0xe2
    check_out "item 7 ro ($variant): the token says CKF_WRITE_PROTECTED (pkcs11-tool: readonly)" "token flags +: .*readonly" \
      pkcs11-tool --module "$MODULE" -L
    check_fail "item 7 ro ($variant): import fails with one clear line" \
      "read-only store: $RO/$variant is on a read-only file system" "$KS" import "$ID/auth-upn-old.cert.pem" --pin-source env:PIN
  done
  export KEYSHARE_HOME=$RO/walonly
  check_fail "item 7 ro: a WAL without its -shm is a clear error" "has no index file .*keychain.db-shm" "$KS" token list
  # Wrong PINs on the read-only store are still counted, across processes.
  export KEYSHARE_HOME=$RO/plain
  out=$(host init slot open badlogin badlogin badlogin badlogin badlogin badlogin badlogin badlogin badlogin)
  [ "$(grep -c '^badlogin 0xa0$' <<<"$out")" -eq 9 ] && ok "item 7 ro: 9 wrong PINs: CKR_PIN_INCORRECT each" || bad "item 7 ro: wrong PINs" "$out"
  rv_is "item 7 ro: the 10th wrong PIN, in another process, is still judged" "$(host init slot open badlogin)" badlogin 0xa0
  rv_is "item 7 ro: then even the right PIN is CKR_PIN_LOCKED" "$(host init slot open login)" login 0xa4
  check_fail "item 7 ro: the CLI too says locked" "locked" "$KS" list --pin-source env:PIN
  # No place to count at all (/dev/shm read-only too, in a private mount namespace): the login is refused.
  export KEYSHARE_HOME=$RO/wal
  # Agent mode: the store is the agent's, so the agent must run in that namespace
  # too: a runtime directory of its own there makes the host start one inside it
  # (stopped by its PID after).
  if command -v unshare >/dev/null; then
    mkdir -m 0700 "$W/ns-run"
    out=$(XDG_RUNTIME_DIR="$W/ns-run" unshare --mount --propagation private sh -c 'mount -t tmpfs -o ro,size=1m tmpfs /dev/shm && printf "%s\n" init slot open login | "$0" "$1"' "$W/storehost" "$MODULE" 2>&1)
    stop_agent "$W/ns-run"
    rv_is "item 7 ro: nowhere to count the attempt: login refused (CKR_DEVICE_ERROR)" "$out" login 0x30
  fi
  mount -o remount,rw "$RO"
  export KEYSHARE_HOME=$RO/plain
  rv_is "item 7: writable again, the read-only lockout is in the store" "$(host init slot open login)" login 0xa4
  check_out "item 7: token list shows the lock" "locked" "$KS" token list

  # A full disk: a small tmpfs filled with dd.
  FULL=$W/full; mkdir -m 700 "$FULL"
  mount -t tmpfs -o size=4m,mode=0700 tmpfs "$FULL" && MOUNTS+=("$FULL")
  make_store "$FULL/ks"
  dd if=/dev/zero of="$FULL/fill" bs=4k 2>/dev/null
  avail=$(df --output=avail "$FULL" | tail -1 | tr -d ' ')
  [ "$avail" -eq 0 ] && ok "item 7 full: disk filled (0 KiB free)" || bad "item 7 full: disk filled" "$avail KiB free"
  check_out "item 7 full: token list" "safety .*present" "$KS" token list
  check_out "item 7 full: list" "certificate" "$KS" list
  out=$(host "${SIGN_SESSION[@]}" create)
  signs "item 7 full: C_Initialize, login and sign" "$out"
  rv_is "item 7 full: C_CreateObject: CKR_DEVICE_MEMORY" "$out" create 0x31
  check_fail "item 7 full: import fails with one clear line" "disk full: the disk holding $FULL/ks is full" \
    "$KS" import "$ID/auth-upn-old.cert.pem" --pin-source env:PIN
  # A host that opened the store before the disk filled: its WAL index exists.
  rm -f "$FULL/fill"
  mkfifo "$W/fifo7f"; "$W/storehost" "$MODULE" <"$W/fifo7f" >"$W/host7f.out" 2>&1 & HOSTS+=($!); exec 7>"$W/fifo7f"
  printf '%s\n' init slot open >&7; sleep 0.5
  dd if=/dev/zero of="$FULL/fill" bs=4k 2>/dev/null
  check_fail "item 7 full (store open elsewhere): import fails with one clear line" "disk full: cannot write $FULL/ks/keychain.db" \
    "$KS" import "$ID/auth-upn-old.key.pem" --pin-source env:PIN
  signs "item 7 full (store open elsewhere): another host logs in and signs" "$(host "${SIGN_SESSION[@]}")"
  printf '%s\n' login sign create finalize >&7; exec 7>&-; wait "${HOSTS[-1]}" 2>/dev/null
  out=$(cat "$W/host7f.out")
  rv_is "item 7 full (store open elsewhere): the open host signs" "$out" sign 0x0
  rv_is "item 7 full (store open elsewhere): the open host's write: CKR_DEVICE_MEMORY" "$out" create 0x31
  rv_is "item 7 full: a wrong PIN is still judged" "$(host init slot open badlogin)" badlogin 0xa0
  rm -f "$FULL/fill"
  rv_is "item 7 full: space freed, another wrong PIN" "$(host init slot open badlogin)" badlogin 0xa0
  check_out "item 7 full: the store counts both (the one from the full disk moved in)" "safety .* 2 failed" "$KS" token list
  check "item 7 full: space freed, import works again" "$KS" import "$ID/auth-upn-old.cert.pem" --pin-source env:PIN
else
  echo "skip - item 7 needs root for its tmpfs mounts"
fi

finish
