# A private sshd for the OpenSSH workflows (58-ssh, 44-tpm-consumers): only
# public-key logins, the authorized key swapped between checks, on 127.0.0.1
# in the script's sandbox, stopped by its PID. Source it after
# support/consumers.sh (serve, wait_log, stop).
#
# StrictModes no: the authorized_keys file sits under /tmp (mode 1777), which
# StrictModes refuses ("bad ownership or modes"); the work directory itself is
# 0700. The PIN reaches ssh through SSH_ASKPASS (a script that prints an
# environment variable ssh passes on), never a file or argv.

# sshd_start DIR: host key, a key that is in no token (DIR/other.pub),
# sshd_config, the server, known_hosts, ssh_config and the askpass script, all
# in DIR. Sets SSHD_PID, SSHD_LOG, SSH_ASK (the askpass environment) and SSH
# (ssh with the private config and port). Returns non-zero when sshd does not
# start (its log is in $SSHD_LOG).
sshd_start() {
  local d=$1
  ssh-keygen -q -t ed25519 -N '' -C sshd-test -f "$d/hostkey"
  ssh-keygen -q -t ed25519 -N '' -C not-in-token -f "$d/other"
  cat >"$d/sshd_config" <<EOF
HostKey $d/hostkey
AuthorizedKeysFile $d/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
PidFile none
UseDNS no
LogLevel VERBOSE
EOF
  # The privilege separation directory that ssh.service makes (RuntimeDirectory=sshd)
  # and that is missing where that service never ran. Left in place: another sshd
  # (or a parallel run of a test) may be using it.
  [ -d /run/sshd ] || mkdir -m 755 /run/sshd
  SSHD_LOG=$d/sshd.log
  serve "$SSHD_LOG" /usr/sbin/sshd -D -e -f "$d/sshd_config" -o "ListenAddress=127.0.0.1:@PORT@" || return 1
  SSHD_PID=$SERVER_PID
  echo "[127.0.0.1]:$PORT $(cut -d' ' -f1,2 "$d/hostkey.pub")" >"$d/known_hosts"
  cat >"$d/ssh_config" <<EOF
UserKnownHostsFile $d/known_hosts
StrictHostKeyChecking yes
PreferredAuthentications publickey
PasswordAuthentication no
KbdInteractiveAuthentication no
ConnectTimeout 10
EOF
  printf '#!/bin/sh\nprintf "%%s\\n" "$KS_TEST_PIN"\n' >"$d/askpass"
  chmod 700 "$d/askpass"
  export KS_TEST_PIN=$PIN  # exported, not passed on env's argv
  mkdir -p -m 700 "$d/home"
  SSH_ASK=(env HOME="$d/home" SSH_ASKPASS="$d/askpass" SSH_ASKPASS_REQUIRE=force DISPLAY=none)
  SSH=(timeout 30 ssh -F "$d/ssh_config" -p "$PORT")
  SSHD_DIR=$d
}

# ssh_login_check NAME PUBFILE KIND CMD...: only PUBFILE's key is authorized;
# CMD (an ssh command line without the destination) must log in and run the
# remote command, and sshd must log that very key (KIND: RSA, ECDSA, ...).
ssh_login_check() {
  local name=$1 pub=$2 kind=$3 fp out
  shift 3
  cp "$pub" "$SSHD_DIR/authorized_keys"
  fp=$(ssh-keygen -lf "$pub" | awk '{print $2}' | sed 's/[+/.]/\\&/g')  # base64 has regex characters
  out=$("$@" root@127.0.0.1 'echo remote-ok "$(id -un)"' </dev/null 2>&1)
  if grep -q '^remote-ok root$' <<<"$out" \
     && wait_log "$SSHD_LOG" "Accepted publickey for root from 127.0.0.1 port [0-9]+ ssh2: $kind $fp"; then
    ok "$name"
  else bad "$name" "$out
$(grep -E 'Accepted|Failed|rror' "$SSHD_LOG" | tail -4)"; fi
}

# ssh_refused_check NAME CMD...: with a key from no token authorized, CMD must
# be refused by the server (the server really checks which key signed).
ssh_refused_check() {
  local name=$1 out rc
  shift
  cp "$SSHD_DIR/other.pub" "$SSHD_DIR/authorized_keys"
  out=$("$@" root@127.0.0.1 true </dev/null 2>&1) && rc=0 || rc=$?
  if [ "$rc" -ne 0 ] && grep -q 'Permission denied (publickey)' <<<"$out"; then ok "$name"
  else bad "$name" "$out"; fi
}
