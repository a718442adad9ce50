#!/usr/bin/env bash
# 93-readme-examples: the README's examples run as written (issue 28). A ```sh block preceded by
# the line `<!-- test -->` is runnable and is run here; `<!-- test: token -->` runs after a token
# `work` was made; `pq` marks a block that needs the post-quantum engine (skipped, and said, on an
# OpenSSL without it). Every other block is deliberately not run: installation, and the consumers'
# workflows that need servers, hosts or URIs of the reader's own (Tests/integration/50-59 run those).
#
# Each block runs as one bash script (set -e: its first failing command fails it, named) in a
# fresh KEYSHARE_HOME and a fresh directory holding the files it names (made here with openssl),
# with the binaries under test first on PATH, no terminal (setsid, stdin /dev/null), and the PINs
# and passwords it asks for answered by a scripted pinentry reading them from a file
# (KEYSHARE_PINENTRY, as the CLI uses on a desktop): never on a command line. The `~` example
# (`--password-source file:~/p12.pass`, which failed before 0.4) is one of them.
set -u
KS=${1:?keyshare binary}; MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$HERE/../.." && pwd)
W=$(mktemp -d /tmp/keyshare-93.XXXXXX)
trap 'rm -rf "$W"' EXIT
export KEYSHARE_KDF_LOG2N=10

# The binaries under test as `keyshare` (and the module beside it, as `make build` lays them out).
mkdir -p "$W/bin" "$W/home" "$W/files" "$W/blocks"
ln -s "$(realpath "$KS")" "$W/bin/keyshare"
export PATH=$W/bin:$PATH HOME=$W/home
# PINs and passwords: one value the pinentry answers (every prompt: SO PIN, user PIN, a PKCS #12's
# password), an encrypted key's password in KEYPASS (the README names env:KEYPASS), a PKCS #12
# password in ~/p12.pass (the README's file:~/p12.pass). None of them on any command line.
export RPIN=readme-2580-pin KEYPASS=readme-key-pass
# secrets: the three, one a line, as a pattern file for grep -f (never on its command line).
secrets() { printf '%s\n' "$RPIN" "$KEYPASS" "$(cat "$HOME/p12.pass")"; }
printf '%s\n' readme-p12-pass >"$HOME/p12.pass" && chmod 600 "$HOME/p12.pass"
PE=$W/pinentry.d
mkdir -p "$PE" && chmod 700 "$PE"
printf '%s\n' "$RPIN" >"$PE/pin" && echo pin >"$PE/mode"
printf '#!/bin/sh\nexec %s %s %s "$@"\n' "$(command -v python3)" "$HERE/support/fake-pinentry.py" "$PE" >"$W/pinentry"
chmod 755 "$W/pinentry"
export KEYSHARE_PINENTRY=$W/pinentry DISPLAY=:93 KEYSHARE_AGENT_PROMPT_TIMEOUT=20

# ---- the files the examples name -------------------------------------------------------------
F=$W/files
(
  set -e
  cd "$F"
  q() { "$@" >/dev/null 2>&1; }
  q openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 30 -subj '/CN=Readme CA'
  leaf() { # NAME CN: NAME.key, NAME.crt issued by the CA (a client certificate)
    q openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" -out "$1.csr" -subj "/CN=$2"
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n' >"$1.ext"
    q openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 -extfile "$1.ext" -out "$1.crt"
  }
  leaf alice 'Alice Example'
  q openssl pkcs12 -export -inkey alice.key -in alice.crt -out alice.p12 -passout file:"$HOME/p12.pass"
  leaf cred 'Erin Example'
  q openssl pkcs12 -export -inkey cred.key -in cred.crt -out my-credential.p12 -passout env:RPIN
  leaf bob 'Bob Example' && cat bob.key bob.crt >bundle.pem
  leaf carol 'Carol Example'
  q openssl pkcs8 -topk8 -v2 aes-256-cbc -in carol.key -out key.pem -passout env:KEYPASS
  cp carol.crt issued.pem
  leaf dave 'Dave Example'
  q openssl pkcs12 -export -inkey dave.key -in dave.crt -out id.p12 -passout env:RPIN
  echo "a document to sign" >doc
  rm -f ./*.csr ./*.ext ./*.srl alice.key alice.crt cred.* bob.* carol.* dave.*
) || bad "the examples' files (openssl)"

# ---- the runnable blocks ---------------------------------------------------------------------
# blocks.txt: one line per block: NUMBER FLAGS...; N.sh: its text. A marker not followed by a
# ```sh fence is an error (a block meant to be tested would silently not be).
awk -v out="$W/blocks" '
  /^<!-- test(: [a-z ]+)? -->$/ { flags = $0; sub(/^<!-- test:? ?/, "", flags); sub(/ ?-->$/, "", flags); armed = 1; next }
  armed && /^```sh$/ { n++; file = out "/" n ".sh"; printf "%d %s\n", n, flags > (out "/blocks.txt"); armed = 0; inblock = 1; next }
  armed { printf "misplaced marker before line %d\n", NR > (out "/errors"); armed = 0 }
  inblock && /^```$/ { inblock = 0; next }
  inblock { print > file }
' "$ROOT/README.md"
if [ -s "$W/blocks/errors" ]; then bad "every <!-- test --> marker is followed by a \`\`\`sh block" "$(cat "$W/blocks/errors")"; fi
count=$(wc -l <"$W/blocks/blocks.txt" 2>/dev/null || echo 0)
if [ "$count" -ge 4 ]; then ok "README.md marks $count runnable example blocks"; else bad "README.md marks at least 4 runnable blocks" "$count"; fi
if grep -l 'file:~/' "$W"/blocks/*.sh >/dev/null 2>&1; then ok "the ~ example (--password-source file:~/...) is among them"
else bad "the ~ example (--password-source file:~/...) is among them"; fi

has_pq=0
"$KS" --version | grep -qE 'OpenSSL (3\.([5-9]|[1-9][0-9])|[4-9])\.' && has_pq=1
while read -r n flags; do
  first=$(grep -m1 -v '^#' "$W/blocks/$n.sh" | cut -c1-60)
  name="README block $n ($first ...)"
  case " $flags " in *" pq "*) [ "$has_pq" = 1 ] || { ok "$name: skipped (no post-quantum engine in this build)"; continue; } ;; esac
  export KEYSHARE_HOME=$W/store-$n
  D=$W/run-$n && mkdir -p "$D"
  case " $flags " in
    *" token "*)
      cp "$F/ca.pem" "$F/ca.key" "$F/doc" "$D/"
      "$KS" token create --label work --pin-source env:RPIN --so-pin-source env:RPIN >/dev/null 2>&1 \
        || bad "$name: its token" ;;
    *) cp "$F"/* "$D/" ;;
  esac
  {
    echo 'set -eE -o pipefail'
    echo "trap 'echo \"FAILED: \$BASH_COMMAND\" >&2' ERR"
    cat "$W/blocks/$n.sh"
  } >"$D/block.sh"
  t=$SECONDS
  if (cd "$D" && timeout 120 setsid -w bash block.sh </dev/null >"$D/log" 2>&1); then
    ok "$name: ran ($(grep -cvE '^\s*(#|$)' "$W/blocks/$n.sh") lines, $((SECONDS - t)) s)"
  else
    bad "$name: ran" "$(grep -v -F -f <(secrets) "$D/log" | tail -8)"
  fi
done <"$W/blocks/blocks.txt"

# What the examples did, beyond their exit status (found by the files they made).
result() { # NAME FILE-IN-A-RUN-DIRECTORY CHECK...: CHECK runs in the run directory holding FILE
  local d; d=$(dirname "$(ls "$W"/run-*/"$2" 2>/dev/null | head -1)")
  if [ "$d" != . ] && (cd "$d" && export KEYSHARE_HOME=${d/\/run-/\/store-} && "${@:3}") >/dev/null 2>&1; then ok "$1"; else bad "$1"; fi
}
result "desktop: Chromium's NSS database loads the module (keyshare browser setup)" my-credential.p12 \
  grep -q '^name=keyshare$' "$HOME/.pki/nssdb/pkcs11.txt"
result "CLI by example: the exported PKCS #12 opens with the export password printed before the rotation" alice-out.p12 \
  openssl pkcs12 -in alice-out.p12 -passin file:export.pass -noout
result "CLI by example: the legacy profile too" alice-old.p12 openssl pkcs12 -legacy -in alice-old.p12 -passin file:export.pass -noout
result "enrolment: the CA's certificate for the request, exported with its key (keyshare export alice)" alice.csr \
  sh -c 'keyshare password --stdout >p && openssl pkcs12 -in alice.p12 -passin file:p -nokeys | grep -q "subject=.*CN *= *Alice Example"'
[ "$has_pq" = 1 ] && result "post-quantum: the sender's and the holder's ML-KEM secrets are equal" ct cmp secret secret2

# No secret of the run in what the examples printed (the export password is theirs to print: not checked).
if cat "$W"/run-*/log 2>/dev/null | grep -qF -f <(secrets); then bad "no PIN or password in the examples' output"
else ok "no PIN or password in the examples' output"; fi

finish
