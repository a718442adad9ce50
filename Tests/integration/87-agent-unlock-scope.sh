#!/usr/bin/env bash
# Unlocks that are scoped (issue 27 section 3; docs/agent.md "Unlock across
# processes"). `keyshare unlock --for D` once cleared "login required" for
# every program: pam_p11 then took any PIN (a locked screen opens with Enter)
# and a LUKS token opened the disk without one. Now:
# - `unlock --program A` reaches A (and a copy of it: the same content) only:
#   B, pkcs11-tool with another trailer, still needs a PIN; without --program
#   an unlock reaches the programs of the policy's `unlock` rules, none by
#   default, and says so; `keyshare policy unlock --exe B` is such a rule;
# - no unlock reaches a program that authenticates a person: by name (B
#   hard-linked as `login`), by the hello flag (B with libpam or
#   libcryptsetup loaded), by identity (a --program naming pamtester or
#   cryptsetup is left out, and said);
# - pam_p11 under pamtester (a throwaway user whose ~/.eid/authorized_certificates
#   holds the token's certificate, a private /etc/pam.d service) asks for the
#   PIN while an unlock is in force, refuses a wrong one, takes the right one;
#   so does a renamed, altered copy of pamtester that an unlock names (libpam
#   loaded: the hello flag);
# - a LUKS2 image (a file) with a systemd-cryptenroll PKCS #11 token: while an
#   unlock is in force, enrolling asks for the PIN, and `cryptsetup open
#   --test-passphrase --token-only` (systemd's token plugin) asks for it, refuses
#   a wrong one and opens the key slot with the right one.
# Not run here: `systemd-cryptsetup attach`, which needs device-mapper (no
# /dev/mapper/control in this container): it stops before the token.
# Runs as root (a PAM service file, a user, a p11-kit module file under
# /etc/pkcs11/modules limited to the cryptsetup programs: p11-kit reads no user
# configuration as root); each is removed at exit, every process stopped by PID.
set -u
KS=${1:?keyshare binary}
MODULE=$(realpath "${2:?module path}")
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { bad "runs as root (make test does): a PAM service, a throwaway user, a p11-kit module file"; finish; exit 1; }
agent_work unlock-scope
export KEYSHARE_AGENT_IDLE_TIMEOUT=120 KEYSHARE_AGENT_PROGRAM=$KS
unset KEYSHARE_IN_PROCESS
export PIN=1234-user SOPIN=9876-so WRONG=0000-wrong DISKPASS=keyshare-disk-pass
export TSS2_LOG=all+NONE  # p11-kit also loads the TPM module for systemd: no TPM here, no noise
TUSER=ksunlock$$
PAMSVC=keyshare-test-$$
P11MOD=/etc/pkcs11/modules/keyshare-test-$$.module
USER_MADE= P11DIR_MADE= MAPPER_MADE=
# libdevmapper (in cryptsetup) makes /dev/mapper/control when it is missing, even where the
# kernel has no device-mapper: removed at exit when this script's programs made it.
[ -e /dev/mapper ] || MAPPER_MADE=1
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -f "/etc/pam.d/$PAMSVC" "$P11MOD"
  [ -z "$P11DIR_MADE" ] || rmdir /etc/pkcs11/modules /etc/pkcs11 2>/dev/null
  [ -z "$USER_MADE" ] || userdel "$TUSER" 2>/dev/null
  [ -z "$MAPPER_MADE" ] || { rm -f /dev/mapper/control; rmdir /dev/mapper; } 2>/dev/null
  rm -rf "$WORK" "$KEYSHARE_HOME"
}
trap cleanup EXIT
LOG=$(agent_dir)/agent.log
ks() { "$KS" "$@"; }
printf 'scoped unlock\n' >"$WORK/data"

# The token: an RSA identity made here (pam_p11 and systemd-cryptenroll use its certificate).
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/id.key" -out "$WORK/id.crt" -subj "/CN=$TUSER" -days 2 2>/dev/null
openssl x509 -in "$WORK/id.crt" -pubkey -noout >"$WORK/id.pub"
check "token work" ks token create --label work --pin-source env:PIN --so-pin-source env:SOPIN
check "an RSA identity (certificate and key)" ks import --token work "$WORK/id.crt" "$WORK/id.key" --pin-source env:PIN
rm -f "$WORK/id.key"
ID=$(pkcs11-tool --module "$MODULE" --token-label work -O --type cert 2>/dev/null | awk '/ID:/ {print $2; exit}')
# Programs A and B: pkcs11-tool made different by a trailer (another content: another program).
mkdir -m 0755 "$WORK/bin"
A=$WORK/bin/tool-a B=$WORK/bin/tool-b
for t in a b; do cp "$(command -v pkcs11-tool)" "$WORK/bin/tool-$t"; printf 'trailer %s' "$t" >>"$WORK/bin/tool-$t"; done
# psign PROGRAM [ENV...]: PROGRAM signs without logging in (no PIN, no terminal); openssl verifies.
psign() {
  local prog=$1; shift
  rm -f "$WORK/sig"
  env "$@" "$prog" --module "$MODULE" --token-label work -s -m SHA256-RSA-PKCS --id "$ID" -i "$WORK/data" -o "$WORK/sig" \
    </dev/null >/dev/null 2>&1 && openssl dgst -sha256 -verify "$WORK/id.pub" -signature "$WORK/sig" "$WORK/data" >/dev/null 2>&1
}
psign "$A" && bad "locked: A cannot sign without a PIN" || ok "locked: A cannot sign without a PIN"

# --- no --program, no policy unlock rule: no program ------------------------------------------
check_out "unlock without --program or a policy unlock rule says it unlocked for no program" \
  "unlocked for no program: no --program given and the policy names none" ks unlock --for 5m --pin-source env:PIN
check_out "... and nothing is unlocked (unlock --status)" "no token of this store is unlocked" ks unlock --status
psign "$A" && bad "... A cannot sign without a PIN" || ok "... A cannot sign without a PIN"
psign "$(command -v pkcs11-tool)" && bad "... pkcs11-tool cannot sign without a PIN" || ok "... pkcs11-tool cannot sign without a PIN"
ks lock >/dev/null

# --- unlock --program A ---------------------------------------------------------------------------
check_out "unlock --program A names A" "unlocked token work for 5m for 1 program: $A " \
  ks unlock --for 5m --program "$A" --pin-source env:PIN
psign "$A" && ok "A signs without a PIN (openssl verifies)" || bad "A signs without a PIN"
psign "$B" && bad "B (another trailer: another content) cannot sign without a PIN" || ok "B (another trailer: another content) cannot sign without a PIN"
psign "$(command -v pkcs11-tool)" && bad "pkcs11-tool itself (not named) cannot sign without a PIN" \
  || ok "pkcs11-tool itself (not named) cannot sign without a PIN"
cp "$A" "$WORK/bin/a-copy"
psign "$WORK/bin/a-copy" && ok "a copy of A (same content) signs: a program is what it is" || bad "a copy of A signs"
check_out "unlock --status names the program" "work|$A" ks unlock --status

# --- policy unlock rules ------------------------------------------------------------------------
check_out "policy unlock --exe B" "policy: unlock $B every token" ks policy unlock --exe "$B"
check_out "policy list shows the unlock rule" "^unlock +$B" ks policy list
check_fail "policy unlock of pamtester is refused in one line" "no unlock ever reaches /usr/bin/pamtester" \
  ks policy unlock --exe /usr/bin/pamtester
check_out "unlock without --program: the policy's unlock programs" "for 1 program \(policy unlock rules\): $B " \
  ks unlock --for 5m --pin-source env:PIN
psign "$B" && ok "B (policy unlock rule) signs without a PIN" || bad "B signs without a PIN"
psign "$A" && bad "A no longer does (the new unlock replaced the old)" || ok "A no longer does (the new unlock replaced the old)"
# B under an authenticator's name (a hard link: the same file), and B with libpam or libcryptsetup loaded.
ln "$B" "$WORK/bin/login"
psign "$WORK/bin/login" && bad "B hard-linked as 'login' gets no unlock (built-in list, by name)" \
  || ok "B hard-linked as 'login' gets no unlock (built-in list, by name)"
grep -q "no unlock reaches it: its executable is login" "$LOG" && ok "... and the log says why" || bad "log: login refused" "$(tail -5 "$LOG")"
for lib in libpam.so.0 libcryptsetup.so.12; do
  path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64|x86_64|AArch64/ {print $NF; exit}')
  [ -n "$path" ] || { bad "$lib is installed"; continue; }
  psign "$B" LD_PRELOAD="$path" && bad "B with $lib loaded gets no unlock (its hello says it authenticates a person)" \
    || ok "B with $lib loaded gets no unlock (its hello says it authenticates a person)"
done
grep -q "authenticates a person: no unlock reaches it" "$LOG" && ok "... and the log says so at its hello" || bad "log: hello flag" "$(tail -5 "$LOG")"
psign "$B" && ok "B itself still signs" || bad "B still signs"
err=$(ks unlock --for 5m --program /usr/bin/pamtester --program "$A" --pin-source env:PIN 2>&1 >"$WORK/out"); rc=$?
[ "$rc" = 0 ] && grep -q "not unlocked for /usr/bin/pamtester: its executable is pamtester" <<<"$err" && grep -q "for 1 program: $A " "$WORK/out" \
  && ok "unlock --program pamtester --program A: pamtester left out, and said" || bad "pamtester left out of an unlock" "rc $rc: $err $(cat "$WORK/out")"
cp /usr/bin/pamtester "$WORK/bin/pt"; printf 'altered' >>"$WORK/bin/pt"
check_out "an altered, renamed pamtester (not on the list) can be named: unlock --program pt" "for 2 programs: $WORK/bin/pt, $A " \
  ks unlock --for 5m --program "$WORK/bin/pt" --program "$A" --pin-source env:PIN

# --- pam_p11 under pamtester -----------------------------------------------------------------------
useradd -M -N -g nogroup -d "$WORK/home" -s /usr/sbin/nologin "$TUSER" && USER_MADE=1
mkdir -p "$WORK/home/.eid" && cp "$WORK/id.crt" "$WORK/home/.eid/authorized_certificates"
printf 'auth required pam_p11.so %s\naccount required pam_permit.so\n' "$MODULE" >"/etc/pam.d/$PAMSVC"
# pam PROGRAM VAR: PROGRAM (pamtester or a copy) authenticates the user, the PIN in VAR on its stdin.
pam() { printf '%s\n' "${!2}" | timeout 60 "$1" -v "$PAMSVC" "$TUSER" authenticate 2>&1; }
pam_case() {  # pam_case PROGRAM WHAT
  local out rc
  out=$(pam "$1" WRONG); rc=$?
  [ "$rc" != 0 ] && grep -q "Login with work" <<<"$out" && grep -q "PIN not verified" <<<"$out" \
    && ok "$2: pam_p11 asks for the PIN while an unlock is in force and refuses a wrong one" || bad "$2: a wrong PIN is refused" "rc $rc: $out"
  out=$(pam "$1" PIN); rc=$?
  [ "$rc" = 0 ] && grep -q "successfully authenticated" <<<"$out" && ok "$2: the right PIN authenticates" || bad "$2: the right PIN" "rc $rc: $out"
}
ks unlock --for 5m --pin-source env:PIN >/dev/null  # the policy's: B (the old code: every program)
pam_case /usr/bin/pamtester "pamtester (unlock in force)"
ks unlock --for 5m --program /usr/bin/pamtester --program "$A" --pin-source env:PIN >/dev/null 2>&1
pam_case /usr/bin/pamtester "pamtester (unlock --program pamtester in force)"
ks unlock --for 5m --program "$WORK/bin/pt" --pin-source env:PIN >/dev/null 2>&1
pam_case "$WORK/bin/pt" "an altered pamtester that the unlock names (libpam: hello flag)"

# --- cryptsetup: a LUKS2 file with a systemd-cryptenroll PKCS #11 token ---------------------------
[ -d /etc/pkcs11/modules ] || { mkdir -p /etc/pkcs11/modules && P11DIR_MADE=1; }
printf 'module: %s\nenable-in: cryptsetup systemd-cryptenroll systemd-cryptsetup\n' "$MODULE" >"$P11MOD"
IMG=$WORK/disk.img
truncate -s 40M "$IMG"
check "a LUKS2 image in a file" cryptsetup luksFormat --type luks2 --batch-mode --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
  --key-file /dev/fd/3 "$IMG" 3< <(pin_pipe DISKPASS)
ks unlock --for 5m --pin-source env:PIN >/dev/null  # the policy's: B (the old code: every program)
err=$(ks unlock --for 5m --program /usr/sbin/cryptsetup --program "$B" --pin-source env:PIN 2>&1 >/dev/null)
grep -q "not unlocked for /usr/sbin/cryptsetup" <<<"$err" && ok "unlock --program cryptsetup: left out, and said" || bad "cryptsetup left out" "$err"
# A wrong $PIN: refused, then systemd asks a password agent and would wait for ever: stopped (by
# its PID) once it has said the PIN is incorrect.
PIN=$WRONG PASSWORD=$DISKPASS systemd-cryptenroll --pkcs11-token-uri="pkcs11:token=work" "$IMG" </dev/null >"$WORK/enroll" 2>&1 &
EP=$!; PIDS+=("$EP")
for _ in $(seq 300); do kill -0 "$EP" 2>/dev/null && ! grep -q incorrect "$WORK/enroll" || break; sleep 0.1; done
kill "$EP" 2>/dev/null; wait "$EP"; rc=$?
grep -q "PIN for token 'work' is incorrect" "$WORK/enroll" && ! grep -q "enrolled" "$WORK/enroll" \
  && ok "systemd-cryptenroll logs in while an unlock is in force: a wrong PIN in its environment is refused, nothing enrolled" \
  || bad "cryptenroll refuses a wrong PIN" "rc $rc: $(cat "$WORK/enroll")"
out=$(PASSWORD="$DISKPASS" timeout 60 systemd-cryptenroll --pkcs11-token-uri="pkcs11:token=work" "$IMG" </dev/null 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q "Successfully logged into security token 'work'" <<<"$out" \
  && ok "systemd-cryptenroll with the right PIN in its environment enrolls the token" || bad "cryptenroll with the PIN" "rc $rc: $out"
# copen VAR|-: `cryptsetup open --test-passphrase --token-only` (the systemd-pkcs11 plugin), the PIN in VAR on stdin.
copen() {
  if [ "$1" = - ]; then env -u PIN timeout 60 cryptsetup open --test-passphrase --token-only -v "$IMG" </dev/null 2>&1
  else printf '%s\n' "${!1}" | env -u PIN timeout 60 cryptsetup open --test-passphrase --token-only -v "$IMG" 2>&1; fi
}
out=$(copen -); rc=$?
[ "$rc" != 0 ] && grep -q "Nothing to read on input" <<<"$out" && ! grep -q "unlocked" <<<"$out" \
  && ok "cryptsetup --token-only asks for the PIN while an unlock is in force (none: the key slot stays shut)" || bad "cryptsetup asks for the PIN" "rc $rc: $out"
out=$(copen WRONG); rc=$?
[ "$rc" != 0 ] && grep -q "incorrect" <<<"$out" && ! grep -q "Key slot .* unlocked" <<<"$out" \
  && ok "cryptsetup --token-only refuses a wrong PIN" || bad "cryptsetup refuses a wrong PIN" "rc $rc: $out"
out=$(copen PIN); rc=$?
[ "$rc" = 0 ] && grep -q "Key slot 1 unlocked" <<<"$out" && ok "cryptsetup --token-only opens the key slot with the right PIN" \
  || bad "cryptsetup with the right PIN" "rc $rc: $out"
if grep -qw device-mapper /proc/misc; then
  echo "note - systemd-cryptsetup attach is not run: it would map a device (the token path is cryptsetup's plugin above)"
else
  echo "skip - systemd-cryptsetup attach: no device-mapper in this kernel (/proc/misc): it stops before the token"
fi

check_out "lock" "locked 1 token" ks lock
! grep -qF -f <(printf '%s\n' "$PIN" "$WRONG" "$DISKPASS") "$LOG" && ok "the agent log holds no PIN" || bad "no PIN in the log"
finish
