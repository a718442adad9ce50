#!/usr/bin/env bash
# make bench, TPM rows (issue 17, docs/tpm.md): keyshare's TPM token against
# tpm2-pkcs11 (Debian libtpm2-pkcs11-1) on the same swtpm in the same run:
# CKM_ECDSA P-256 and CKM_RSA_PKCS RSA-2048 signatures per second (one
# session, BENCH_TPM_SIGNS in a row; RSA: BENCH_TPM_RSA_SIGNS) and C_Login
# time, the median of BENCH_REPS runs each, alternating. keyshare's module runs
# through its agent (the default mode), a private one: its own runtime
# directory, started with this environment's KEYSHARE_TCTI and stopped by its
# PID at the end (a user's running agent would talk to its own TPM).
# Both tokens are set up through PKCS #11 / the CLI with PINs from the
# environment (tpm2_ptool takes PINs on its command line; it is not used).
# Usage: tpm.sh KEYSHARE MODULE.
set -u
KS=${1:?keyshare binary}
MODULE=${2:?module path}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REF=/usr/lib/x86_64-linux-gnu/libtpm2_pkcs11.so.1
N=${BENCH_TPM_SIGNS:-500}
NR=${BENCH_TPM_RSA_SIGNS:-$((N / 5))}
REPS=${BENCH_REPS:-5}
command -v swtpm >/dev/null && [ -e "$REF" ] || { echo "TPM rows skipped: swtpm or libtpm2-pkcs11-1 missing (make deps)"; exit 0; }
WORK=$(mktemp -d /tmp/keyshare-bench-tpm.XXXXXX)
stop_pid() { local p; p=$(cat "$1" 2>/dev/null) || return 0; case $p in ''|*[!0-9]*) return 0 ;; esac; kill "$p" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done; }
# The agent of this run's store lives in a directory per store ("$KS" agent socket --dir; it was
# $WORK/run/keyshare before agents were per store, and this script then left its agent running).
cleanup() { stop_pid "$("$KS" agent socket --dir 2>/dev/null || echo "$WORK/run/keyshare")/agent.pid"; stop_pid "$WORK/tpm/pid"; rm -rf "$WORK"; }
trap cleanup EXIT
mkdir -p "$WORK/tpm" "$WORK/ref" "$WORK/home"
mkdir -m 0700 "$WORK/run"
export XDG_RUNTIME_DIR=$WORK/run KEYSHARE_AGENT_PROGRAM=$(realpath "$KS")
for _ in 1 2 3 4 5; do
  PORT=$((20000 + RANDOM % 30000))
  swtpm socket --tpmstate dir="$WORK/tpm" --tpm2 --server type=tcp,port=$PORT,bindaddr=127.0.0.1 \
    --ctrl type=tcp,port=$((PORT + 1)),bindaddr=127.0.0.1 --flags not-need-init,startup-clear --daemon \
    --pid file="$WORK/tpm/pid" 2>/dev/null && break
done
export TSS2_LOG=all+NONE PIN=1234-bench SOPIN=9876-bench TPMSIGN_PIN=1234-bench
export KEYSHARE_TCTI=swtpm:host=127.0.0.1,port=$PORT TPM2_PKCS11_TCTI=swtpm:host=127.0.0.1,port=$PORT
export TPM2_PKCS11_STORE=$WORK/ref KEYSHARE_HOME=$WORK/home
cc -O2 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$WORK/tpmsign" "$ROOT/Tests/integration/c/tpmsign.c" -ldl || exit 1
"$KS" token create --label bench --tpm --pin-source env:PIN --so-pin-source env:SOPIN >/dev/null &&
  "$KS" key generate --type ec --label k --tag k --token bench --pin-source env:PIN >/dev/null &&
  "$KS" key generate --type rsa --bits 2048 --label r --tag r --token bench --pin-source env:PIN >/dev/null || { echo "keyshare TPM token setup failed"; exit 1; }
P2=(pkcs11-tool --module "$REF")
{ "${P2[@]}" --init-token --label bench --so-pin env:SOPIN &&
  "${P2[@]}" --token-label bench --login --login-type so --so-pin env:SOPIN --init-pin --new-pin env:PIN &&
  "${P2[@]}" --token-label bench --login --pin env:PIN --keypairgen --key-type EC:prime256v1 --label k &&
  "${P2[@]}" --token-label bench --login --pin env:PIN --keypairgen --key-type rsa:2048 --label r; } >/dev/null 2>&1 \
  || { echo "tpm2-pkcs11 token setup failed"; exit 1; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
: >"$WORK/ks" ; : >"$WORK/rf"; : >"$WORK/ksr" ; : >"$WORK/rfr"
for _ in $(seq "$REPS"); do
  "$WORK/tpmsign" "$MODULE" bench "$N" >>"$WORK/ks" || { echo "keyshare run failed"; exit 1; }
  "$WORK/tpmsign" "$REF" bench "$N" >>"$WORK/rf" || { echo "tpm2-pkcs11 run failed"; exit 1; }
  TPMSIGN_KEY=rsa "$WORK/tpmsign" "$MODULE" bench "$NR" >>"$WORK/ksr" || { echo "keyshare RSA run failed"; exit 1; }
  TPMSIGN_KEY=rsa "$WORK/tpmsign" "$REF" bench "$NR" >>"$WORK/rfr" || { echo "tpm2-pkcs11 RSA run failed"; exit 1; }
done
field() { sed -nE "s/.*$1=([0-9.]+).*/\1/p" "$2" | median; }
ks_ops=$(field ops_per_s "$WORK/ks"); rf_ops=$(field ops_per_s "$WORK/rf")
ks_login=$(field login_ms "$WORK/ks"); rf_login=$(field login_ms "$WORK/rf")
ks_rsa=$(field ops_per_s "$WORK/ksr"); rf_rsa=$(field ops_per_s "$WORK/rfr")
echo
echo "TPM (swtpm, same instance; median of $REPS runs, $N ECDSA / $NR RSA signatures each)"
printf '%-28s %12s %12s %8s\n' "row" "keyshare" "tpm2-pkcs11" "ratio"
printf '%-28s %12s %12s %8s\n' "ECDSA P-256 sign (ops/s)" "$ks_ops" "$rf_ops" "$(awk -v a="$ks_ops" -v b="$rf_ops" 'BEGIN{printf "%.2fx", a/b}')"
printf '%-28s %12s %12s %8s\n' "RSA-2048 PKCS#1 sign (ops/s)" "$ks_rsa" "$rf_rsa" "$(awk -v a="$ks_rsa" -v b="$rf_rsa" 'BEGIN{printf "%.2fx", a/b}')"
printf '%-28s %12s %12s %8s\n' "C_Login (ms)" "$ks_login" "$rf_login" "$(awk -v a="$ks_login" -v b="$rf_login" 'BEGIN{printf "%.2fx faster", b/a}')"
