#!/usr/bin/env bash
# Core dumps and same-user memory reads (issue 12, "core dumps"): the CLI runs
# with RLIMIT_CORE 0 and non-dumpable, so neither a core file nor another
# program of the same user (ptrace, /proc/PID/mem, environ) reaches its PINs,
# passwords or decrypted keys. `keyshare password fetch` stays dumpable (the
# password service must read its /proc/PID/exe) but still gets no core file.
# Run as an unprivileged uid: root may read any process.
set -u
KS=${1:?}; MODULE=${2:?}
source "$(dirname "$0")/lib.sh"
T=$(mktemp -d /tmp/keyshare-core.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
U=65534:65534   # nobody: any uid that is not root will do
chmod 0711 "$T"; copy_images "$T"
mkdir -m 0700 "$T/home"; chown -R "$U" "$T/home"
as_user() { setpriv --reuid "${U%:*}" --regid "${U#*:}" --clear-groups env -i HOME="$T/home" KEYSHARE_HOME="$T/home/store" KEYSHARE_KDF_LOG2N=10 "$@"; }

# A command that runs until stopped (every subcommand goes through the same start).
# `exec` so that $! is the keyshare process itself, not a subshell.
(exec setpriv --reuid "${U%:*}" --regid "${U#*:}" --clear-groups env -i HOME="$T/home" KEYSHARE_HOME="$T/home/store" \
  "$T/keyshare" token watch >/dev/null 2>&1) &
pid=$!; pids+=("$pid")
for _ in $(seq 50); do grep -q keyshare "/proc/$pid/cmdline" 2>/dev/null && break; sleep 0.1; done
sleep 0.3
grep -q keyshare "/proc/$pid/cmdline" 2>/dev/null && ok "the CLI runs as uid ${U%:*}" || bad "the CLI runs as uid ${U%:*}"
owner=$(stat -c %u "/proc/$pid/environ")
[ "$owner" = 0 ] && ok "the CLI is non-dumpable (its /proc files belong to root, not uid ${U%:*})" \
  || bad "the CLI is non-dumpable" "/proc/$pid owned by $owner"
if as_user cat "/proc/$pid/environ" >/dev/null 2>&1; then bad "same user cannot read the CLI's environ"
else ok "same user cannot read the CLI's environ"; fi
# (Yama ptrace_scope 1 also refuses this one for a non-child; non-dumpable refuses it everywhere.)
if as_user dd if="/proc/$pid/mem" bs=1 count=1 skip=4194304 >/dev/null 2>&1; then bad "same user cannot read the CLI's memory"
else ok "same user cannot read the CLI's memory"; fi
grep -Eq '^Max core file size +0 +0 ' "/proc/$pid/limits" && ok "the CLI's core size limit is 0" \
  || bad "the CLI's core size limit is 0" "$(grep core "/proc/$pid/limits")"
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null

# `password fetch` against a service that never answers: dumpable, but no core.
python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
c, _ = s.accept(); time.sleep(20)' "$T/home/silent.sock" &
pids+=("$!")
for _ in $(seq 50); do [ -S "$T/home/silent.sock" ] && break; sleep 0.1; done
chown "$U" "$T/home/silent.sock"
(exec setpriv --reuid "${U%:*}" --regid "${U#*:}" --clear-groups env -i HOME="$T/home" KEYSHARE_HOME="$T/home/store" \
  "$T/keyshare" password fetch --socket "$T/home/silent.sock" --stdout >/dev/null 2>&1) &
pid=$!; pids+=("$pid")
sleep 0.5
owner=$(stat -c %u "/proc/$pid/environ" 2>/dev/null || echo gone)
[ "$owner" = "${U%:*}" ] && ok "password fetch stays dumpable (the service can read its /proc/PID/exe)" \
  || bad "password fetch stays dumpable" "/proc/$pid owned by $owner"
grep -Eq '^Max core file size +0 +0 ' "/proc/$pid/limits" 2>/dev/null && ok "password fetch: core size limit 0" \
  || bad "password fetch: core size limit 0"
finish
