#!/usr/bin/env bash
# No PIN, password or key on any command line (the project rule; issue 12):
# every local user reads every process's argv in `ps`, so tests, benchmarks,
# examples, the Makefile, CI and the README/docs snippets must pass secrets
# through the environment (`--pin env:VAR`, `-passin env:VAR`,
# `--pin-source env:VAR`), a file or a pipe (`pin-source=file:/dev/fd/3`,
# `certutil -f <(...)`, `grep -f <(...)`). Runs lint_argv_secrets.py over the
# repository, then proves the lint itself: every forbidden form planted in a
# temp file is caught (FILE:LINE named), the allowed forms are not, and the
# lint never prints the secret it found. Runs first (09): it needs no build.
# Usage: 09-no-secrets-on-argv.sh [KEYSHARE MODULE] (both unused).
set -u
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$HERE/../.." && pwd)
LINT=$HERE/lint_argv_secrets.py
WORK=$(mktemp -d /tmp/keyshare-argv-lint.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# 1. The repository.
out=$(python3 "$LINT" --waivers "$HERE/lint_argv_secrets.waivers" "$ROOT" 2>&1); rc=$?
summary=$(tail -1 <<<"$out")
grep '^waived: \|^stale waiver' <<<"$out" | sed 's/^/  /'
if [ "$rc" -eq 0 ] && grep -q ' 0 lines with a secret' <<<"$summary"; then
  ok "no secret on a command line in tests, benchmarks, examples, Makefile, CI, docs (${summary#lint: })"
else
  bad "no secret on a command line in tests, benchmarks, examples, Makefile, CI, docs" "$(grep -v '^waived: ' <<<"$out")"
fi
files=$(grep -o '[0-9]* files scanned' <<<"$summary" | cut -d' ' -f1)
[ "${files:-0}" -ge 40 ] && ok "the lint scanned the repository ($files files)" || bad "the lint scanned the repository" "$summary"

# 2. The lint catches each forbidden form. The planted lines carry @@ inside the
# forbidden token (removed when planted), so this script does not trip the lint.
PLANTED=planted-S3cret-$RANDOM   # a made-up value: the lint must never print it
plant() {  # plant NAME FILE TEXT [N]: FILE holds TEXT (@@ removed) from line 2; the lint must name FILE:N (default 2).
  local name=$1 file=$WORK/$2 line=$3 at=${4:-2}
  printf '# planted\n%s\n' "${line//@@/}" >"$file"
  local got; got=$(python3 "$LINT" "$WORK" "$file" 2>&1)
  if grep -q "^$(basename "$file"):$at: " <<<"$got"; then ok "lint catches: $name"; else bad "lint catches: $name" "$got"; fi
  if grep -qF -e "$PLANTED" <<<"$got"; then bad "lint output for $name holds no secret"; fi
}
plant "pkcs11-tool user PIN option, a literal"   p1.sh    "pkcs11-tool --module m --login --p@@in $PLANTED -O"
plant "pkcs11-tool SO PIN option, a variable"    p2.sh    'pkcs11-tool --module m --init-token --label t --so-p@@in "$SOPIN"'
plant "pkcs11-tool new PIN option"               p3.sh    "pkcs11-tool --module m --init-pin --login --login-type so --so-pin env:SO --new-p@@in $PLANTED"
plant "a PUK option"                             p4.sh    "pkcs15-tool --unblock-pin --pu@@k $PLANTED"
plant "a PIN option with ="                      p5.sh    "tool --p@@in=$PLANTED"
plant "RFC 7512 pin-value in a URI"              p6.sh    "openssl dgst -engine pkcs11 -keyform engine -sign 'pkcs11:token=t;object=k;pin-val@@ue=$PLANTED' -out s d"
plant "softhsm2-util PIN options, even env:"     p7.sh    "softhsm2-util --init-token --free --label c --p@@in env:P --so-p@@in env:S"
plant "openssl passin, pass-colon form"          p8.sh    "openssl pkcs12 -info -in f.p12 -passin pa@@ss:$PLANTED"
plant "openssl passout, pass-colon form"         p9.sh    "openssl pkcs12 -export -in c.pem -inkey k.pem -passout pa@@ss:$PLANTED -out f.p12"
plant "openssl pass, pass-colon form"            p10.sh   "openssl enc -aes-256-cbc -pass pa@@ss:$PLANTED -in a -out b"
plant "a password option with a literal"         p11.sh   "tool --pass@@word $PLANTED"
plant "env with a PIN assignment (its argv)"     p12.sh   "env GNUTLS_P@@IN=$PLANTED p11tool --login --list-all"
plant "env -i with a PIN variable"               p13.sh   'setpriv --reuid=1000 env -i PATH=/bin P@@IN=$PIN keyshare list'
plant "a PIN variable as a program argument"     p14.sh   'grep -q "$P@@IN" store.db'
plant "a harness given the PIN as argument"      p15.sh   '"$WORK/stress" run "$MODULE" tok "$P@@IN" 4 2 40 "$WORK"'
plant "a PIN variable printed to the output"     p16.sh   'echo "the PIN was $P@@IN"'
plant "an askpass script holding the PIN"        p17.sh   "printf '#!/bin/sh\\necho %s\\n' \"\$P@@IN\" > \"\$WORK/askpass\""
plant "a continued command line"                 p18.sh   "$(printf 'pkcs11-tool --module m \\\n  --login --p@@in %s -O' "$PLANTED")"
plant "a C harness reading the PIN from argv"    p19.c    'rv = f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)argv[@@5], strlen(argv[5]));'
plant "a list of arguments (Python/Swift)"       p20.py   "subprocess.run([\"pkcs11-tool\", \"--login\", \"--p@@in\", \"$PLANTED\"])"
plant "a shell snippet in Markdown"              p21.md   "$(printf '```sh\npkcs11-tool --module m --login --p@@in %s -O\n```' "$PLANTED")" 3
plant "a Makefile recipe"                        Makefile "$(printf 'x:\n\tpkcs11-tool --module m --login --so-p@@in %s' "$PLANTED")" 3

# 3. The allowed forms pass: no false alarm on what the sweep put in place.
cat >"$WORK/clean.sh" <<'EOF'
pkcs11-tool --module m --token-label t --login --pin env:PIN -O
pkcs11-tool --module m --slot 1 --init-token --label t --so-pin "env:$so"
pkcs11-tool --module m --init-pin --login --login-type so --so-pin env:SOPIN --new-pin env:NEWPIN
openssl pkcs12 -info -noout -in f.p12 -passin env:P12PASS
openssl dgst -engine pkcs11 -keyform engine -sign "$KEY;pin-source=file:/dev/fd/3" -out s d 3< <(printf '%s' "$PIN")
keyshare token create --label t --pin-source env:PIN --so-pin-source file:/run/so-pin
KEYSHARE_TEST_PIN=$PIN "$WORK/stress" pairs "$MODULE" tok "$WORK"
grep -rqaF -f <(printf '%s\n' "$PIN") "$KEYSHARE_HOME"
certutil -K -d "$DB" -h t -f <(printf '%s\n' "$PIN")
printf '#!/bin/sh\nprintf "%%s\\n" "$KEYSHARE_TEST_PIN"\n' > "$WORK/askpass"
KEYSHARE_TEST_PIN=$PIN check "ssh-add" env SSH_ASKPASS="$WORK/askpass" DISPLAY=none ssh-add -s "$MODULE"
export GNUTLS_PIN=$PIN
[ "$PW" = "$PW2" ] && ok "password reused"
echo "$PASS passed, $FAIL failed"
PW=$(keyshare password --stdout --pin-source env:PIN)
[ ${#PW} -eq 32 ] && ok "32 characters"
EOF
got=$(python3 "$LINT" "$WORK" "$WORK/clean.sh" 2>&1)
if grep -q ' 0 lines with a secret' <<<"$got"; then ok "lint passes the allowed forms ($(grep -c . "$WORK/clean.sh") lines)"
else bad "lint passes the allowed forms" "$got"; fi

# 4. A waiver covers exactly its line: the same file with that line edited fails again.
printf '# planted\npkcs11-tool --login --p%sin "$PIN" -O\n' "" >"$WORK/w.sh"
fp=$(python3 "$LINT" "$WORK" "$WORK/w.sh" | sed -n 's/^w\.sh:2: \[\([0-9a-f]*\)\].*/\1/p')
printf 'w.sh\t%s\ttest waiver\n' "$fp" >"$WORK/waivers"
check_out "a waiver silences its own line" ' 0 lines with a secret on a command line, 1 waived' python3 "$LINT" --waivers "$WORK/waivers" "$WORK" "$WORK/w.sh"
printf '# planted\npkcs11-tool --login --p%sin "$PIN" -O -v\n' "" >"$WORK/w.sh"
out=$(python3 "$LINT" --waivers "$WORK/waivers" "$WORK" "$WORK/w.sh" 2>&1) && rc=0 || rc=$?
if [ "$rc" -ne 0 ] && grep -q '^w\.sh:2: ' <<<"$out" && grep -q '^stale waiver' <<<"$out"; then ok "an edited line loses its waiver (and the waiver is reported stale)"
else bad "an edited line loses its waiver" "$out"; fi
finish
