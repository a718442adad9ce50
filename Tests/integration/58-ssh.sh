#!/usr/bin/env bash
# OpenSSH with the keys in a keyshare token, as people really use it: a real
# sshd (private config, host key and AuthorizedKeysFile from `ssh-keygen -D
# MODULE`) on 127.0.0.1 in a private network namespace, `ssh -I MODULE` with the
# RSA and then the ECDSA key, and ssh-agent + `ssh-add -s MODULE` then ssh
# through the agent. The PIN reaches ssh and ssh-add through SSH_ASKPASS (a
# script that prints an environment variable), never a file or argv. sshd and
# the agent are stopped by PID (trap).
# Usage: 58-ssh.sh KEYSHARE MODULE. Ends with "N passed, M failed, K xfail".
set -uo pipefail
KEYSHARE=$(realpath "${1:?keyshare binary}")
MODULE=$(realpath "${2:?module path}")  # ssh-agent matches its -P allow-list on the real path
. "$(dirname "$0")/lib.sh"
. "$HERE/support/consumers.sh"
enter_sandbox "$@"
trap cleanup_consumers EXIT
T0=$SECONDS
need OpenSSH ssh ssh-keygen ssh-agent ssh-add /usr/sbin/sshd || { finish_consumers; exit 1; }
make_pki_and_token || { finish_consumers; exit 1; }
W=$WORK
mkdir -m 700 "$W/home"

# ssh-keygen -D prints the token's public keys; they must be the certificates' keys.
ssh-keygen -D "$MODULE" > "$W/token.pub" 2>"$W/keygen.err"
for cn in client-rsa client-ec; do
  openssl x509 -in "$W/$cn.pem" -pubkey -noout > "$W/$cn.spki"
  ssh-keygen -i -m PKCS8 -f "$W/$cn.spki" > "$W/$cn.pub"
done
if grep -qF "$(cut -d' ' -f2 "$W/client-rsa.pub")" "$W/token.pub" && grep -qF "$(cut -d' ' -f2 "$W/client-ec.pub")" "$W/token.pub"; then
  ok "ssh-keygen -D MODULE prints the RSA and ECDSA keys of the token's certificates"
else bad "ssh-keygen -D MODULE prints the RSA and ECDSA keys" "$(cat "$W/token.pub" "$W/keygen.err")"; fi

# A private sshd: only public-key logins, keys from $W/authorized_keys (swapped
# between checks). StrictModes no: the file sits under /tmp (mode 1777), which
# StrictModes refuses ("bad ownership or modes"); $W itself is 0700.
ssh-keygen -q -t ed25519 -N '' -C sshd-test -f "$W/hostkey"
ssh-keygen -q -t ed25519 -N '' -C not-in-token -f "$W/other"
cat > "$W/sshd_config" <<EOF
HostKey $W/hostkey
AuthorizedKeysFile $W/authorized_keys
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
# (or a parallel run of this test) may be using it.
[ -d /run/sshd ] || mkdir -m 755 /run/sshd
if ! serve "$W/sshd.log" /usr/sbin/sshd -D -e -f "$W/sshd_config" -o "ListenAddress=127.0.0.1:@PORT@"; then
  bad "sshd starts on 127.0.0.1" "$(cat "$W/sshd.log")"; finish_consumers; exit 1
fi
SSHD_PID=$SERVER_PID
echo "[127.0.0.1]:$PORT $(cut -d' ' -f1,2 "$W/hostkey.pub")" > "$W/known_hosts"
cat > "$W/ssh_config" <<EOF
UserKnownHostsFile $W/known_hosts
StrictHostKeyChecking yes
PreferredAuthentications publickey
PasswordAuthentication no
KbdInteractiveAuthentication no
ConnectTimeout 10
EOF
# The askpass program holds no secret: it prints the variable ssh passes on.
printf '#!/bin/sh\nprintf "%%s\\n" "$KS_TEST_PIN"\n' > "$W/askpass"; chmod 700 "$W/askpass"
export KS_TEST_PIN=$PIN  # exported, not passed on env's argv
ASK=(env HOME="$W/home" SSH_ASKPASS="$W/askpass" SSH_ASKPASS_REQUIRE=force DISPLAY=none)
SSH=(timeout 30 ssh -F "$W/ssh_config" -p "$PORT")

# login_check NAME PUBFILE KIND CMD...: only PUBFILE's key is authorized; the
# login must run the remote command and sshd must log that very key.
login_check() {
  local name=$1 pub=$2 kind=$3; shift 3
  cp "$pub" "$W/authorized_keys"
  local fp out
  fp=$(ssh-keygen -lf "$pub" | awk '{print $2}' | sed 's/[+/.]/\\&/g')  # base64 has regex characters
  out=$("$@" root@127.0.0.1 'echo remote-ok "$(id -un)"' </dev/null 2>&1)
  if grep -q '^remote-ok root$' <<<"$out" && wait_log "$W/sshd.log" "Accepted publickey for root from 127.0.0.1 port [0-9]+ ssh2: $kind $fp"; then
    ok "$name"
  else bad "$name" "$out
$(grep -E 'Accepted|Failed|error|rror' "$W/sshd.log" | tail -4)"; fi
}
login_check "ssh -I MODULE logs in with the token's RSA key" "$W/client-rsa.pub" RSA "${ASK[@]}" "${SSH[@]}" -I "$MODULE"
login_check "ssh -I MODULE logs in with the token's ECDSA key" "$W/client-ec.pub" ECDSA "${ASK[@]}" "${SSH[@]}" -I "$MODULE"
# The server really checks: with another key authorized, the token's keys are refused.
cp "$W/other.pub" "$W/authorized_keys"
if out=$("${ASK[@]}" "${SSH[@]}" -I "$MODULE" root@127.0.0.1 true </dev/null 2>&1); then
  bad "sshd refuses the token's keys when they are not authorized" "$out"
elif grep -q 'Permission denied (publickey)' <<<"$out"; then ok "sshd refuses the token's keys when they are not authorized"
else bad "sshd refuses the token's keys when they are not authorized" "$out"; fi

# ssh-agent holds the token's keys (ssh-add -s), ssh signs through it. The agent
# runs in the foreground (-D) so it is stopped by its own PID.
spawn "$W/agent.log" ssh-agent -D -a "$W/agent.sock" -P "$(dirname "$MODULE")/*"
AGENT_PID=$SPAWNED
for _ in $(seq 50); do [ -S "$W/agent.sock" ] && break; sleep 0.1; done
AG=(env SSH_AUTH_SOCK="$W/agent.sock")
check "ssh-add -s MODULE (PIN through SSH_ASKPASS)" "${ASK[@]}" SSH_AUTH_SOCK="$W/agent.sock" timeout 30 ssh-add -s "$MODULE"
keys=$("${AG[@]}" ssh-add -L 2>&1)
if grep -qF "$(cut -d' ' -f2 "$W/client-rsa.pub")" <<<"$keys" && grep -qF "$(cut -d' ' -f2 "$W/client-ec.pub")" <<<"$keys"; then
  ok "ssh-add -L: the agent holds the token's RSA and ECDSA keys"
else bad "ssh-add -L: the agent holds the token's RSA and ECDSA keys" "$keys"; fi
# -i PUBFILE + IdentitiesOnly: ssh offers only that key, and signs with it through the agent.
login_check "ssh through the agent with the token's RSA key" "$W/client-rsa.pub" RSA \
  env HOME="$W/home" "${SSH[@]}" -o IdentityAgent="$W/agent.sock" -o IdentitiesOnly=yes -i "$W/client-rsa.pub"
login_check "ssh through the agent with the token's ECDSA key" "$W/client-ec.pub" ECDSA \
  env HOME="$W/home" "${SSH[@]}" -o IdentityAgent="$W/agent.sock" -o IdentitiesOnly=yes -i "$W/client-ec.pub"
check "ssh-add -e MODULE removes the token's keys" "${AG[@]}" timeout 30 ssh-add -e "$MODULE"
check_out "the agent is empty afterwards" "no identities" bash -c "SSH_AUTH_SOCK='$W/agent.sock' ssh-add -l; true"
stop "$AGENT_PID" "$SSHD_PID"

echo "note - 58-ssh took $((SECONDS - T0)) s${IN_NETNS:+ (private network namespace)}"
check_no_secret_argv PIN SOPIN P12PASS
finish_consumers
