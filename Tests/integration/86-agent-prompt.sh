#!/usr/bin/env bash
# The agent's own prompt (issue 27 §1 and the consent of §2; docs/agent.md "The
# agent's prompt", "Consent"), through a scripted pinentry
# (support/fake-pinentry.py, speaking Assuan; what it answers is in $PE/mode, the
# PIN in $PE/pin, never on a command line):
# - the token shows CKF_PROTECTED_AUTHENTICATION_PATH to a client with a display,
#   not to one without; C_Login(CKU_USER, NULL_PTR, 0) gets the PIN from the
#   prompt (answer, cancel: CKR_FUNCTION_CANCELED, wrong: CKR_PIN_INCORRECT and
#   counted, no answer: CKR_FUNCTION_CANCELED after the timeout, the pinentry
#   killed); a C_Login with a PIN shows no prompt;
# - the prompt names the calling program, the token and the attempts left; its
#   display comes from the client (DISPLAY=:42), not from the agent's starter;
# - pkcs11-tool --login without --pin, the libp11 engine without a PIN, ssh -I
#   (to a private sshd) log in through the prompt; a keyshare command with no
#   terminal asks through the same pinentry on its own display; a real
#   pinentry-curses on the client's terminal works (support/pty_answer.py types);
# - consent (token set --consent ask): Allow once (this process), Deny
#   (CKR_FUNCTION_REJECTED), no answer (CKR_FUNCTION_CANCELED), no display
#   (refused, logged), Always allow (a rule policy list shows; later uses are
#   not asked; other programs still see the token and are asked); token create
#   at a terminal defaults to consent ask, with PIN sources to off.
# Usage: 86-agent-prompt.sh KEYSHARE MODULE.
set -uo pipefail
KS=$(realpath "${1:?keyshare binary}")
MODULE=$(realpath "${2:?module path}")
source "$(dirname "$0")/lib.sh"
. "$HERE/support/consumers.sh"
. "$HERE/support/sshd.sh"
enter_sandbox "$@"
agent_work prompt
trap cleanup_consumers EXIT
export KEYSHARE_AGENT_IDLE_TIMEOUT=300 KEYSHARE_AGENT_PROGRAM=$KS
unset KEYSHARE_IN_PROCESS DISPLAY WAYLAND_DISPLAY
export PIN=1234-user SOPIN=9876-so WRONG=0000-wrong KEYSHARE_TEST_PIN=1234-user
ks() { "$KS" "$@"; }

# The scripted pinentry: a wrapper names its directory (the agent gives a
# pinentry only the client's display variables, PATH, HOME and LANG).
PE=$WORK/pe
mkdir -m 700 "$PE"
printf '%s\n' "$PIN" >"$PE/pin"
printf '%s\n' "$WRONG" >"$PE/wrong"
printf '#!/bin/sh\nexec %s %s %s "$@"\n' "$(command -v python3)" "$HERE/support/fake-pinentry.py" "$PE" >"$WORK/pinentry"
chmod 700 "$WORK/pinentry"
export KEYSHARE_PINENTRY=$WORK/pinentry KEYSHARE_AGENT_PROMPT_TIMEOUT=3
mode() { echo "$1" >"$PE/mode"; }
starts() { grep -c '^START' "$PE/log" 2>/dev/null || echo 0; }
# last_dialog: the fake's log from its last start on.
last_dialog() { awk '/^START/ {buf = ""} {buf = buf $0 "\n"} END {printf "%s", buf}' "$PE/log"; }

# The agent, started by hand with display variables of its own: they must not reach the prompt.
check "the agent starts (its starter has DISPLAY=:99 and an XAUTHORITY)" \
  env DISPLAY=:99 XAUTHORITY="$WORK/starter-only-xauthority" "$KS" agent run --daemonize
LOG=$(agent_dir)/agent.log
check_out "the agent names its prompt program and timeout" "prompt: $WORK/pinentry, 3 s to answer" cat "$LOG"
check "token work" ks token create --label work --pin-source env:PIN --so-pin-source env:SOPIN
check_out "a token made with PIN sources does not ask for consent" '"consent" : "off"' ks token list --json
check "EC key uk" ks key generate --type ec --label uk --tag uk --pin-source env:PIN
ks key public --tag uk >"$WORK/uk.pub"
check "compile the prompt host" cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$WORK/prompthost" \
  "$ROOT/Tests/integration/c/prompthost.c" -ldl
H=$WORK/prompthost
host() { DISPLAY=:42 "$H" "$MODULE" "$@" 2>&1; }

# ---- the protected authentication path ----------------------------------------------------
check_out "a client with a display: CKF_PROTECTED_AUTHENTICATION_PATH" '^flags protected=1 login=1' host flags
check_out "a client without display or terminal: no flag" '^flags protected=0' env -u DISPLAY "$H" "$MODULE" flags
check_out "... and C_Login(NULL) is CKR_ARGUMENTS_BAD, no prompt" '^login 0x7$' env -u DISPLAY "$H" "$MODULE" login
[ "$(starts)" = 0 ] && ok "no pinentry was started for a client that cannot be asked" || bad "no pinentry without a display"

mode pin
out=$(host login sign)
[ "$out" = "login 0x0
sign 0x0" ] && ok "C_Login(CKU_USER, NULL_PTR, 0): the PIN from the prompt; then signs" || bad "C_Login(NULL) through the prompt" "$out"
d=$(last_dialog)
grep -q "^SETDESC $H (pid [0-9]*) asks for the user PIN of token “work”" <<<"$d" \
  && ok "the prompt names the calling program (as identified), the token and what is asked" || bad "prompt text" "$d"
grep -q '^ENV DISPLAY=:42$' <<<"$d" && ok "the prompt's display is the client's (DISPLAY=:42)" || bad "client display" "$d"
! grep -q ':99\|starter-only' <<<"$d" && ok "nothing of the agent starter's display reached the prompt" || bad "starter display leaked" "$d"
grep -q '^SETTIMEOUT 3$' <<<"$d" && ok "pinentry gets the timeout (SETTIMEOUT)" || bad "SETTIMEOUT" "$d"
grep -q '^BYE$' <<<"$d" && ok "the dialog ends with BYE" || bad "BYE" "$d"

n=$(starts)
check_out "a C_Login with a PIN keeps working" '^loginpin 0x0$' host loginpin
[ "$(starts)" = "$n" ] && ok "... and shows no prompt" || bad "a PIN given: no prompt"
check_out "NULL_PTR with a length: the prompt as well" '^loginlen 0x0$' host loginlen

mode cancel
check_out "cancel: CKR_FUNCTION_CANCELED" '^login 0x50$' host login
check_out "... not counted" '"userPIN" : "ok"' ks token list --json

mode wrong
check_out "a wrong PIN from the prompt: CKR_PIN_INCORRECT" '^login 0xa0$' host login
check_out "... counted like any other" '"userPIN" : "1 failed"' ks token list --json
mode pin
check_out "the next prompt: logs in" '^login 0x0$' host login
d=$(last_dialog)
grep -q "9 attempts left before the PIN locks" <<<"$d" && grep -q '^SETERROR Wrong PIN before: 9 attempts left' <<<"$d" \
  && ok "... after saying how many attempts are left" || bad "attempts left in the prompt" "$d"

mode hang
t0=$(date +%s.%N)
out=$(host login)
t1=$(date +%s.%N)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
[ "$out" = "login 0x50" ] && awk -v s="$secs" 'BEGIN {exit !(s >= 2.5 && s < 10)}' \
  && ok "a pinentry that never answers: CKR_FUNCTION_CANCELED after the timeout ($secs s, timeout 3 s)" \
  || bad "timeout" "$out after $secs s"
pid=$(sed -n 's/^START pid=\([0-9]*\).*/\1/p' "$PE/log" | tail -1)
sleep 0.5
[ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && ok "... and that pinentry was killed (pid $pid)" || bad "hung pinentry killed" "pid $pid"

# ---- keyshare with no terminal on a desktop: the same pinentry, on the command's own display ----
mode pin
n=$(starts)
check "keyshare key generate with no terminal (setsid) and DISPLAY=:42: the PIN from the prompt" \
  setsid -w env DISPLAY=:42 "$KS" key generate --type ec --label k2 --tag k2
grep -q "^SETDESC keyshare (pid [0-9]*, no terminal) asks for the user PIN for work" <(last_dialog) && [ "$(starts)" = $((n + 1)) ] \
  && ok "... the prompt says which command asks" || bad "desktop prompt text" "$(last_dialog)"
check_fail "no terminal and no display: give a source option" "give a source option" \
  setsid -w "$KS" key generate --type ec --label k3 --tag k3

# ---- programs that use the protected path --------------------------------------------------
mode pin
printf 'prompt data\n' >"$WORK/data"
check_out "pkcs11-tool -L: the token has a PIN pad (the protected path)" 'PIN pad present' \
  env DISPLAY=:42 pkcs11-tool --module "$MODULE" -L
rm -f "$WORK/sig"
n=$(starts)
if DISPLAY=:42 pkcs11-tool --module "$MODULE" --token-label work --login -s -m ECDSA-SHA256 --label uk -i "$WORK/data" \
     -o "$WORK/sig" --signature-format openssl >"$WORK/p11.out" 2>&1 &&
   openssl dgst -sha256 -verify "$WORK/uk.pub" -signature "$WORK/sig" "$WORK/data" >/dev/null 2>&1 && [ "$(starts)" -gt "$n" ]; then
  ok "pkcs11-tool --login without --pin: the PIN from the prompt, openssl verifies the signature"
else bad "pkcs11-tool --login through the prompt" "$(cat "$WORK/p11.out")"; fi
grep -q "^SETDESC $(command -v pkcs11-tool) " <(last_dialog) && ok "... the prompt names pkcs11-tool" || bad "prompt names pkcs11-tool" "$(last_dialog)"

ENGINE=/usr/lib/x86_64-linux-gnu/engines-3/pkcs11.so
if need "the libp11 engine" "$ENGINE"; then
  rm -f "$WORK/sig"
  n=$(starts)
  if env DISPLAY=:42 PKCS11_MODULE_PATH="$MODULE" openssl dgst -sha256 -engine pkcs11 -keyform engine \
       -sign "pkcs11:token=work;object=uk;type=private" -out "$WORK/sig" "$WORK/data" >"$WORK/engine.out" 2>&1 &&
     openssl dgst -sha256 -verify "$WORK/uk.pub" -signature "$WORK/sig" "$WORK/data" >/dev/null 2>&1 && [ "$(starts)" -gt "$n" ]; then
    ok "the libp11 engine with no PIN logs in through the prompt (openssl verifies)"
  else bad "libp11 engine through the prompt" "$(cat "$WORK/engine.out")"; fi
fi

if need OpenSSH ssh ssh-keygen /usr/sbin/sshd; then
  ssh-keygen -D "$MODULE" >"$WORK/token.pub" 2>"$WORK/keygen.err"
  check_out "ssh-keygen -D MODULE lists the token's key" '^ecdsa-sha2-nistp256 ' cat "$WORK/token.pub"
  if sshd_start "$WORK"; then
    n=$(starts)
    # No SSH_ASKPASS: ssh defers the PIN to the token ("reader keypad"), the agent asks.
    ssh_login_check "ssh -I MODULE logs in, the PIN from the agent's prompt" "$WORK/token.pub" ECDSA \
      env HOME="$WORK/home" DISPLAY=:42 "${SSH[@]}" -I "$MODULE"
    [ "$(starts)" -gt "$n" ] && ok "... ssh showed no PIN question of its own: the agent's prompt answered" || bad "ssh used the prompt"
  else bad "sshd starts on 127.0.0.1" "$(cat "$SSHD_LOG")"; fi
fi

# ---- consent ---------------------------------------------------------------------------------
check_out "token set --consent ask" "token work: consent ask" ks token set work --consent ask
check_out "token list shows it" '"consent" : "ask"' ks token list --json
mode allow
n=$(starts)
out=$(host loginpin sign sign)
[ "$out" = "loginpin 0x0
sign 0x0
sign 0x0" ] && [ "$(starts)" = $((n + 1)) ] && ok "Allow once: the process signs, asked once for two signatures" || bad "allow once" "$out"
d=$(last_dialog)
grep -q "^SETDESC $H (pid [0-9]*) wants to use the key “uk” of token “work” to sign" <<<"$d" \
  && grep -q '^SETOK Allow once$' <<<"$d" && grep -q '^SETNOTOK Always allow$' <<<"$d" && grep -q '^SETCANCEL Deny$' <<<"$d" \
  && grep -q '^CONFIRM allow$' <<<"$d" && ok "the question names the program, key, token and use; Deny / Allow once / Always allow" \
  || bad "consent question" "$d"
mode deny
out=$(host loginpin sign sign)
[ "$out" = "loginpin 0x0
sign 0x200
sign 0x200" ] && [ "$(starts)" = $((n + 2)) ] \
  && ok "another process is asked again; Deny: CKR_FUNCTION_REJECTED, not asked twice" || bad "deny" "$out"
mode allow
check_out "another use (derive) is asked about as such" '^derive 0x0$' host loginpin derive
grep -q "to derive" <(last_dialog) && ok "... the question says derive" || bad "derive question" "$(last_dialog)"
mode hang
check_out "no answer: CKR_FUNCTION_CANCELED after the timeout" '^sign 0x50$' host loginpin sign
check_out "a client that cannot be asked is refused" '^sign 0x200$' env -u DISPLAY "$H" "$MODULE" loginpin sign
check_out "... with a log line" "refused: the token asks for consent and no prompt can reach this client" cat "$LOG"

mode always
check_out "Always allow: signs" '^sign 0x0$' host loginpin sign
check_out "... writes the rule (policy list)" "allow +$H +com\.keyshare\.soft:[0-9A-F]+ +work .*prompt$" ks policy list
check_out "... marked as the prompt's (policy list --json)" '"from" : "prompt"' ks policy list --json
mode deny
n=$(starts)
check_out "a later process of that program signs" '^sign 0x0$' host loginpin sign
[ "$(starts)" = "$n" ] && ok "... without being asked" || bad "always allow: not asked again"
rm -f "$WORK/sig"
if DISPLAY=:42 pkcs11-tool --module "$MODULE" --token-label work --login --pin env:PIN -s -m ECDSA-SHA256 --label uk \
     -i "$WORK/data" -o "$WORK/sig" >"$WORK/p11.out" 2>&1; then bad "another program is still asked (and denied)" "$(cat "$WORK/p11.out")"
elif grep -q "C_SignInit failed: rv = .*(0x200)" "$WORK/p11.out" && [ "$(starts)" = $((n + 1)) ]; then
  ok "another program still sees the token and is asked (Deny: CKR_FUNCTION_REJECTED)"
else bad "another program is asked" "$(cat "$WORK/p11.out")"; fi
check_out "token set --consent off" "consent off" ks token set work --consent off
n=$(starts)
DISPLAY=:42 pkcs11-tool --module "$MODULE" --token-label work --login --pin env:PIN -s -m ECDSA-SHA256 --label uk \
  -i "$WORK/data" -o "$WORK/sig" >/dev/null 2>&1 && [ "$(starts)" = "$n" ] \
  && ok "consent off: signs without a question" || bad "consent off"

# token create: a person at a terminal gets consent ask, a script off
# (support/pty_answer.py types the PINs at the prompts, from the environment).
PTY=(python3 "$HERE/support/pty_answer.py")
check_out "token create at a terminal: consent ask by default" "label typed, slot [0-9]+, consent ask" \
  "${PTY[@]}" "New SO PIN=env:SOPIN" "Repeat new SO PIN=env:SOPIN" "New user PIN=env:PIN" "Repeat new user PIN=env:PIN" \
  -- "$KS" token create --label typed
check_out "--consent off overrides it" "consent off" ks token create --label scripted --pin-source env:PIN --so-pin-source env:SOPIN --consent off

# ---- a real pinentry: pinentry-curses on the client's terminal ------------------------------
# A second store, so a second agent, whose prompt program is Debian's pinentry-curses.
if need "pinentry-curses" /usr/bin/pinentry-curses; then
  S2=(env KEYSHARE_HOME="$WORK/home2")
  mkdir -m 700 "$WORK/home2"
  check "an agent whose pinentry is pinentry-curses" "${S2[@]}" KEYSHARE_PINENTRY=/usr/bin/pinentry-curses \
    KEYSHARE_AGENT_PROMPT_TIMEOUT=20 "$KS" agent run --daemonize
  "${S2[@]}" "$KS" token create --label work --pin-source env:PIN --so-pin-source env:SOPIN --consent ask >/dev/null 2>&1
  "${S2[@]}" "$KS" key generate --type ec --label uk --tag uk --pin-source env:PIN >/dev/null 2>&1
  out=$("${S2[@]}" "${PTY[@]}" "PIN=env:PIN" "Allow once=enter" -- "$H" "$MODULE" login sign)
  grep -q "login 0x0" <<<"$out" && grep -q "sign 0x0" <<<"$out" \
    && ok "pinentry-curses on the client's terminal: the PIN typed there logs in (C_Login(NULL)), Enter allows the use once" \
    || bad "pinentry-curses on the client's terminal" "$(tr -c '[:print:]\n' ' ' <<<"$out" | tail -5)"
fi

! grep -qF -f <(printf '%s\n' "$PIN" "$WRONG") "$LOG" && ok "the agent log holds no PIN" || bad "no PIN in the agent log"
! grep -qF -f <(printf '%s\n' "$PIN" "$WRONG") "$PE/log" && ok "no PIN on the pinentry's command line or in what it was told" \
  || bad "no PIN in the pinentry's log"
check_no_secret_argv PIN SOPIN WRONG
finish_consumers
