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
. "$HERE/support/sshd.sh"
enter_sandbox "$@"
trap cleanup_consumers EXIT
T0=$SECONDS
need OpenSSH ssh ssh-keygen ssh-agent ssh-add /usr/sbin/sshd || { finish_consumers; exit 1; }
make_pki_and_token || { finish_consumers; exit 1; }
W=$WORK

# ssh-keygen -D prints the token's public keys; they must be the certificates' keys.
ssh-keygen -D "$MODULE" > "$W/token.pub" 2>"$W/keygen.err"
for cn in client-rsa client-ec; do
  openssl x509 -in "$W/$cn.pem" -pubkey -noout > "$W/$cn.spki"
  ssh-keygen -i -m PKCS8 -f "$W/$cn.spki" > "$W/$cn.pub"
done
if grep -qF "$(cut -d' ' -f2 "$W/client-rsa.pub")" "$W/token.pub" && grep -qF "$(cut -d' ' -f2 "$W/client-ec.pub")" "$W/token.pub"; then
  ok "ssh-keygen -D MODULE prints the RSA and ECDSA keys of the token's certificates"
else bad "ssh-keygen -D MODULE prints the RSA and ECDSA keys" "$(cat "$W/token.pub" "$W/keygen.err")"; fi

# A private sshd (support/sshd.sh): only public-key logins, the authorized key
# swapped between checks.
if ! sshd_start "$W"; then
  bad "sshd starts on 127.0.0.1" "$(cat "$SSHD_LOG")"; finish_consumers; exit 1
fi
ssh_login_check "ssh -I MODULE logs in with the token's RSA key" "$W/client-rsa.pub" RSA "${SSH_ASK[@]}" "${SSH[@]}" -I "$MODULE"
ssh_login_check "ssh -I MODULE logs in with the token's ECDSA key" "$W/client-ec.pub" ECDSA "${SSH_ASK[@]}" "${SSH[@]}" -I "$MODULE"
# The server really checks: with another key authorized, the token's keys are refused.
ssh_refused_check "sshd refuses the token's keys when they are not authorized" "${SSH_ASK[@]}" "${SSH[@]}" -I "$MODULE"

# ssh-agent holds the token's keys (ssh-add -s), ssh signs through it. The agent
# runs in the foreground (-D) so it is stopped by its own PID.
spawn "$W/agent.log" ssh-agent -D -a "$W/agent.sock" -P "$(dirname "$MODULE")/*"
AGENT_PID=$SPAWNED
for _ in $(seq 50); do [ -S "$W/agent.sock" ] && break; sleep 0.1; done
AG=(env SSH_AUTH_SOCK="$W/agent.sock")
check "ssh-add -s MODULE (PIN through SSH_ASKPASS)" "${SSH_ASK[@]}" SSH_AUTH_SOCK="$W/agent.sock" timeout 30 ssh-add -s "$MODULE"
keys=$("${AG[@]}" ssh-add -L 2>&1)
if grep -qF "$(cut -d' ' -f2 "$W/client-rsa.pub")" <<<"$keys" && grep -qF "$(cut -d' ' -f2 "$W/client-ec.pub")" <<<"$keys"; then
  ok "ssh-add -L: the agent holds the token's RSA and ECDSA keys"
else bad "ssh-add -L: the agent holds the token's RSA and ECDSA keys" "$keys"; fi
# -i PUBFILE + IdentitiesOnly: ssh offers only that key, and signs with it through the agent.
ssh_login_check "ssh through the agent with the token's RSA key" "$W/client-rsa.pub" RSA \
  env HOME="$W/home" "${SSH[@]}" -o IdentityAgent="$W/agent.sock" -o IdentitiesOnly=yes -i "$W/client-rsa.pub"
ssh_login_check "ssh through the agent with the token's ECDSA key" "$W/client-ec.pub" ECDSA \
  env HOME="$W/home" "${SSH[@]}" -o IdentityAgent="$W/agent.sock" -o IdentitiesOnly=yes -i "$W/client-ec.pub"
check "ssh-add -e MODULE removes the token's keys" "${AG[@]}" timeout 30 ssh-add -e "$MODULE"
check_out "the agent is empty afterwards" "no identities" bash -c "SSH_AUTH_SOCK='$W/agent.sock' ssh-add -l; true"
stop "$AGENT_PID" "$SSHD_PID"

echo "note - 58-ssh took $((SECONDS - T0)) s${IN_NETNS:+ (private network namespace)}"
check_no_secret_argv PIN SOPIN P12PASS
finish_consumers
