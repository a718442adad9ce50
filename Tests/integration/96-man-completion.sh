#!/usr/bin/env bash
# 96-man-completion: issue 28, the manual and shell completion.
#  1. Man pages: `dist/man/generate.sh` (what `make man` runs) writes keyshare(1), a page
#     per subcommand and the concept pages keyshare-agent(1), keyshare-pkcs11(7),
#     keyshare-security(7); every page is man(7) titled "keyshare Manual", passes
#     `mandoc -Tlint` with no message at all (style included) and `groff -ww`, has a
#     whatis line (lexgrog), and has every required section: NAME, SYNOPSIS, DESCRIPTION,
#     OPTIONS, EXIT STATUS, ENVIRONMENT, FILES, EXAMPLES, SEE ALSO in section 1; NAME,
#     DESCRIPTION, ENVIRONMENT, FILES, EXAMPLES, SEE ALSO in section 7 (which describes no
#     command: no synopsis, options or exit status). `man -l` renders them.
#  2. Completion through the CLI: the generated bash script, sourced in a real bash and
#     driven as bash-completion drives it (COMP_WORDS, COMP_CWORD, COMP_LINE, COMP_POINT,
#     the completion function), completes a token label after --token and an item label
#     for show/export/delete; references once the prefix matches no label; zsh -n and
#     fish -n parse their scripts, the entry point those scripts call
#     (`keyshare ---completion ...`) answers for them, and an interactive zsh (Tab) and
#     fish (complete -C) on a pseudo-terminal complete labels with them. Completion reads public metadata
#     only: no private item, no secret on stdout or stderr, no store created, no agent
#     started, silent when the store is unreadable.
set -u
KS=${1:?keyshare binary}; MODULE=${2:?module path}
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$HERE/../.." && pwd)
new_home
WORK=$(mktemp -d /tmp/keyshare-96.XXXXXX)
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
KS=$(realpath "$KS")

# ---- 1. man pages -----------------------------------------------------------------------------
for tool in mandoc groff lexgrog man python3; do
  command -v "$tool" >/dev/null || { bad "$tool is installed (make deps)"; finish; exit 1; }
done
if out=$(bash "$ROOT/dist/man/generate.sh" "$KS" "$WORK/man" 2026-11-29 0.0.0 2>&1); then
  ok "generate.sh writes and checks the pages: $out"
else
  bad "generate.sh writes and checks the pages" "$out"
fi
mkdir -p "$WORK/pages"
n1=0; n7=0
for gz in "$WORK"/man/man1/*.gz "$WORK"/man/man7/*.gz; do
  [ -e "$gz" ] || continue
  page=$WORK/pages/$(basename "$gz" .gz)
  gzip -dc "$gz" > "$page"
  case $page in *.1) n1=$((n1 + 1)) ;; *.7) n7=$((n7 + 1)) ;; esac
done
commands=$(python3 -c '
import json, sys
def walk(c, p):
    n = p + [c["commandName"]]
    if c.get("shouldDisplay", True) and n[1:] != ["help"]:
        print("-".join(n))
        for s in c.get("subcommands") or []: walk(s, n)
walk(json.load(sys.stdin)["command"], [])' < <("$KS" --experimental-dump-help) | sort)
want1=$(printf '%s\n' "$commands" | wc -l)
[ "$n1" -eq "$want1" ] && [ "$want1" -gt 60 ] && ok "one page per visible command: $n1 in section 1" \
  || bad "one page per visible command" "section 1: $n1 pages, $want1 commands"
missing=""
for c in $commands; do [ -e "$WORK/pages/$c.1" ] || missing="$missing $c"; done
[ -z "$missing" ] && ok "every command has its page (keyshare-token-create(1) for 'keyshare token create')" \
  || bad "every command has its page" "missing:$missing"
for p in keyshare-agent.1 keyshare-pkcs11.7 keyshare-security.7; do
  [ -s "$WORK/pages/$p" ] && ok "concept page $p" || bad "concept page $p"
done
[ "$n7" -eq 2 ] && ok "section 7: keyshare-pkcs11, keyshare-security" || bad "section 7 has 2 pages" "$(ls "$WORK/pages")"

lint_bad=""; title_bad=""; sect_bad=""; groff_bad=""; whatis_bad=""
for page in "$WORK"/pages/*; do
  name=$(basename "$page")
  lint=$(mandoc -Tlint "$page" 2>&1 | grep -v 'outdated mandoc.db') && lint_bad="$lint_bad
$lint"
  grep -Eq '^\.TH "?[A-Z0-9\\-]+"? "?[17]"? "[^"]+" "keyshare [0-9.]+" "keyshare Manual"$' "$page" || title_bad="$title_bad $name"
  case $name in
    *.1) need="NAME|SYNOPSIS|DESCRIPTION|OPTIONS|EXIT STATUS|ENVIRONMENT|FILES|EXAMPLES|SEE ALSO" ;;
    *)   need="NAME|DESCRIPTION|ENVIRONMENT|FILES|EXAMPLES|SEE ALSO" ;;
  esac
  IFS='|' read -ra sections <<<"$need"
  for s in "${sections[@]}"; do
    grep -Eq "^\\.SH \"?$s\"?\$" "$page" || sect_bad="$sect_bad $name:$s"
  done
  # EXAMPLES is not empty: at least one literal example block.
  sed -n '/^\.SH "\{0,1\}EXAMPLES/,/^\.SH/p' "$page" | grep -q '^\.EX' || sect_bad="$sect_bad $name:EXAMPLES-empty"
  w=$(LC_ALL=C.UTF-8 MANWIDTH=80 groff -mandoc -ww -z -Tutf8 "$page" 2>&1); [ -z "$w" ] || groff_bad="$groff_bad $name: $w"
  lexgrog "$page" >/dev/null 2>&1 || whatis_bad="$whatis_bad $name"
done
total=$((n1 + n7))
[ -z "$(printf '%s' "$lint_bad" | tr -d '\n')" ] && ok "mandoc -Tlint: no message on any of the $total pages (style included)" \
  || bad "mandoc -Tlint: no message" "$lint_bad"
[ -z "$title_bad" ] && ok "every page's .TH names the manual 'keyshare Manual' and 'keyshare VERSION'" || bad "title 'keyshare Manual'" "$title_bad"
[ -z "$sect_bad" ] && ok "every page has the required sections, with an example" || bad "required sections" "$sect_bad"
[ -z "$groff_bad" ] && ok "groff -ww: no warning" || bad "groff -ww: no warning" "$groff_bad"
[ -z "$whatis_bad" ] && ok "lexgrog: every page has a whatis line" || bad "lexgrog" "$whatis_bad"
check_out "man -l renders keyshare-token-create(1) with the header 'keyshare Manual'" \
  '^KEYSHARE-TOKEN-CREATE\(1\) +keyshare Manual +KEYSHARE-TOKEN-CREATE\(1\)' \
  env MANWIDTH=100 man -l "$WORK/pages/keyshare-token-create.1"
check_out "keyshare-agent(1) gives the socket path, one agent per store and KEYSHARE_AGENT_TIMEOUT" \
  'KEYSHARE_AGENT_TIMEOUT' bash -c "MANWIDTH=100 man -l '$WORK/pages/keyshare-agent.1' | grep -q 'keyshare/agent.sock' && MANWIDTH=100 man -l '$WORK/pages/keyshare-agent.1' | grep -q 'One agent per store' && MANWIDTH=100 man -l '$WORK/pages/keyshare-agent.1'"
see=$(sed -n '/^\.SH "\{0,1\}SEE ALSO/,$p' "$WORK/pages/keyshare.1" | tr '\n' ' ' | sed 's/\\f[BIR]//g; s/\\%//g; s/\\-/-/g')
for p in 'keyshare-agent(1)' 'keyshare-pkcs11(7)' 'keyshare-security(7)'; do
  grep -qF -- "$p" <<<"$see" || { bad "keyshare(1)'s SEE ALSO names $p" "$see"; continue; }
  ok "keyshare(1)'s SEE ALSO names $p"
done
docrefs=$("$KS" --experimental-dump-help | grep -o '[a-z/]*docs/[A-Za-z0-9_.-]*' | sort -u)
[ -z "$docrefs" ] && ok "help texts name no docs/ path" || bad "help texts name no docs/ path" "$docrefs"

# ---- 2. completion ----------------------------------------------------------------------------
mkdir -p "$WORK/comp"
"$KS" --generate-completion-script bash | sed '1{/^#!/d}' > "$WORK/comp/keyshare"
"$KS" --generate-completion-script zsh > "$WORK/comp/_keyshare"
"$KS" --generate-completion-script fish > "$WORK/comp/keyshare.fish"
check "bash -n parses the bash script" bash -n "$WORK/comp/keyshare"
if command -v zsh >/dev/null; then check "zsh -n parses the zsh script" zsh -n "$WORK/comp/_keyshare"; else bad "zsh is installed (make deps)"; fi
if command -v fish >/dev/null; then check "fish -n parses the fish script" fish -n "$WORK/comp/keyshare.fish"; else bad "fish is installed (make deps)"; fi
check_out "the scripts call the CLI's completion entry point for --token and items" '---completion' \
  bash -c "grep -c -- '---completion' '$WORK/comp/keyshare' '$WORK/comp/_keyshare' '$WORK/comp/keyshare.fish' | grep -v ':0\$' | wc -l | grep -qx 3 && echo ---completion"

# A store: a token with an identity (public certificate, private key) and a second token.
export PIN=1234-user SOPIN=9876-so P12PASS=keyshare-test
"$KS" token create --label "comp-tok" --pin-source env:PIN --so-pin-source env:SOPIN >/dev/null 2>&1 \
  && "$KS" token create --label "other-tok" --pin-source env:PIN --so-pin-source env:SOPIN >/dev/null 2>&1 \
  && "$KS" import --token comp-tok --pin-source env:PIN --password-source env:P12PASS --label comp-ident \
       "$FIXTURES/identities/device-ds-ke.modern.p12" >/dev/null 2>&1 \
  && ok "store: tokens comp-tok, other-tok; identity comp-ident" || bad "store set up" "$("$KS" list 2>&1)"
SHARED=$("$KS" password show --stdout --token comp-tok --pin-source env:PIN 2>/dev/null)
REF=$("$KS" list --json | python3 -c 'import json,sys; print([i["reference"] for i in json.load(sys.stdin) if i["label"] == "comp-ident"][0])' 2>/dev/null)
PRIV_LABEL=comp-secret-key
"$KS" key generate --type ec --curve P-256 --label "$PRIV_LABEL" --tag comp.tag --token other-tok --pin-source env:PIN >/dev/null 2>&1 || true
# The pair's public half is a public item: delete it (by reference) so that only the private
# key carries the label.
PUB_REF=$("$KS" list --token other-tok --json | python3 -c 'import json,sys; print([i["reference"] for i in json.load(sys.stdin) if i["label"] == sys.argv[1]][0])' "$PRIV_LABEL" 2>/dev/null)
[ -n "$PUB_REF" ] && "$KS" delete --token other-tok --pin-source env:PIN "$PUB_REF" >/dev/null 2>&1
"$KS" list --token other-tok --private --pin-source env:PIN 2>/dev/null | grep -q "^private-key  *$PRIV_LABEL " \
  && ! "$KS" list --token other-tok | grep -q "$PRIV_LABEL" \
  && ok "a private item labelled $PRIV_LABEL exists (listed only with the PIN)" \
  || bad "a private item exists" "$("$KS" list --token other-tok --private --pin-source env:PIN 2>&1)"

# From here on no agent may run: completion must not start one.
stop_agent "$XDG_RUNTIME_DIR"
ADIR=$("$KS" agent socket --dir 2>/dev/null)
agent_running() { [ -S "$ADIR/agent.sock" ] || pgrep -u "$(id -u)" -f "^$KS agent" >/dev/null; }
agent_running && bad "no agent before the completion checks" "$(ls -la "$ADIR" 2>&1)"

# bash_complete WORD...: the completions bash-completion would offer with the cursor at the
# end of the last word, through the generated script's own function in a fresh bash.
bash_complete() {
  bash --norc --noprofile -c '
    source "$1"
    COMP_WORDS=("${@:2}")
    COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
    COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
    COMPREPLY=()
    _keyshare "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf "%s\n" "${COMPREPLY[@]}"' _ "$WORK/comp/keyshare" "$@" 2>"$WORK/comp/stderr"
}
all_out=""
out=$(bash_complete "$KS" list --token ''); all_out+=$out
grep -qx comp-tok <<<"$out" && grep -qx other-tok <<<"$out" \
  && ok "bash: keyshare list --token <Tab> offers the token labels" || bad "bash: --token completes token labels" "$out"
out=$(bash_complete "$KS" list --token co); all_out+=$out
[ "$out" = comp-tok ] && ok "bash: keyshare list --token co<Tab> completes comp-tok" || bad "bash: --token prefix" "$out"
out=$(bash_complete "$KS" token delete oth); all_out+=$out
[ "$out" = other-tok ] && ok "bash: keyshare token delete oth<Tab> completes other-tok (token argument)" || bad "bash: token argument" "$out"
out=$(bash_complete "$KS" show comp-); all_out+=$out
[ "$out" = comp-ident ] && ok "bash: keyshare show comp-<Tab> completes the item label comp-ident" || bad "bash: item label" "$out"
out=$(bash_complete "$KS" export ''); all_out+=$out
grep -qx comp-ident <<<"$out" && ok "bash: keyshare export <Tab> offers comp-ident" || bad "bash: export item" "$out"
out=$(bash_complete "$KS" delete --token other-tok ''); all_out+=$out
grep -q comp-ident <<<"$out" && bad "bash: delete --token other-tok <Tab>: only other-tok's items" "$out" \
  || ok "bash: with --token other-tok on the line, comp-tok's items are not offered"
if [ -n "$REF" ]; then
  out=$(bash_complete "$KS" show "${REF:0:6}"); all_out+=$out
  grep -qx -- "$REF" <<<"$out" && ok "bash: a reference prefix completes the persistent reference" || bad "bash: reference" "ref $REF, got: $out"
else
  bad "the identity's reference from list --json"
fi
grep -q "$PRIV_LABEL" <<<"$all_out" && bad "bash: a private item's label is never offered" "$all_out" \
  || ok "bash: the private item's label is never offered (public metadata only)"
[ -s "$WORK/comp/stderr" ] && bad "bash completion wrote nothing on stderr" "$(cat "$WORK/comp/stderr")" \
  || ok "bash completion wrote nothing on stderr"

# zsh and fish call the same entry point with their shell's name in the environment.
# Format: keyshare ---completion [SUBCOMMAND...] -- ARGUMENT ARGUMENT-INDEX CURSOR-INDEX WORDS...
out=$(SAP_SHELL=zsh "$KS" ---completion list -- --token 3 0 "$KS" list --token '' 2>"$WORK/comp/zerr"); all_out+=$out
grep -qx comp-tok <<<"$out" && grep -qx other-tok <<<"$out" && [ ! -s "$WORK/comp/zerr" ] \
  && ok "zsh's entry point: ---completion list -- --token gives the token labels" || bad "zsh entry point" "$out $(cat "$WORK/comp/zerr")"
out=$(SAP_SHELL=fish "$KS" ---completion show -- positional@0 2 5 "$KS" show comp- 2>"$WORK/comp/ferr"); all_out+=$out
grep -qx comp-ident <<<"$out" && [ ! -s "$WORK/comp/ferr" ] \
  && ok "fish's entry point: ---completion show -- positional@0 gives comp-ident" || bad "fish entry point" "$out $(cat "$WORK/comp/ferr")"
# The real zsh and fish, interactive, on a pseudo-terminal (zsh's zpty): zsh's own Tab with the
# generated _keyshare in fpath (compinit); fish's `complete -C` after sourcing keyshare.fish
# (its script reads the command line, which only an interactive fish has). `keyshare` on
# PATH is this binary. Each driver ends by its marker, so a hung shell fails after 20 s.
mkdir -p "$WORK/bin" && ln -sf "$KS" "$WORK/bin/keyshare"
cat > "$WORK/comp/zsh-drive.zsh" <<'DRIVE'
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PS1='>'; fpath=($COMPDIR \$fpath); path=($BINDIR \$path); autoload -Uz compinit; compinit -u -D; LISTMAX=1000; print RE''ADY"
zpty -r z line '*READY*'
zpty -w -n z "$LINE"$'\t'
sleep 2
zpty -w -n z $'\x15print EN""DX\n'
zpty -r z out '*ENDX*'
print -r -- "$out"
zpty -d z
DRIVE
cat > "$WORK/comp/fish-drive.zsh" <<'DRIVE'
zmodload zsh/zpty
zpty f env TERM=dumb PATH="$BINDIR:$PATH" fish --no-config -i
zpty -w f "source $COMPDIR/keyshare.fish; printf '%s%s\n' RE ADY"
zpty -r f line '*READY*'
zpty -w f "printf '%s%s\n' BE GIN; complete -C '$LINE' | string replace -r '\t.*' ''; printf '%s%s\n' EN DX"
zpty -r f out '*ENDX*'
print -r -- "${${out##*BEGIN}%%ENDX*}"
zpty -d f
DRIVE
shell_complete() {  # shell_complete zsh|fish LINE
  COMPDIR=$WORK/comp BINDIR=$WORK/bin LINE=$2 timeout 20 zsh -f "$WORK/comp/$1-drive.zsh" 2>&1 | tr -d '\r'
}
if command -v zsh >/dev/null; then
  out=$(shell_complete zsh 'keyshare list --token '); all_out+=$out
  grep -q 'comp-tok' <<<"$out" && grep -q 'other-tok' <<<"$out" \
    && ok "zsh (interactive, Tab): keyshare list --token <Tab> lists comp-tok and other-tok" || bad "zsh: --token <Tab>" "$out"
  out=$(shell_complete zsh 'keyshare show comp-'); all_out+=$out
  grep -q 'comp-ident' <<<"$out" && ! grep -q "$PRIV_LABEL" <<<"$out" \
    && ok "zsh (interactive, Tab): keyshare show comp-<Tab> completes comp-ident, not the private label" || bad "zsh: show comp-<Tab>" "$out"
fi
if command -v fish >/dev/null; then
  out=$(shell_complete fish 'keyshare list --token '); all_out+=$out
  grep -qx 'comp-tok' <<<"$out" && grep -qx 'other-tok' <<<"$out" \
    && ok "fish (interactive, complete -C): keyshare list --token offers comp-tok and other-tok" || bad "fish: --token" "$out"
  out=$(shell_complete fish 'keyshare export comp-'); all_out+=$out
  [ "$(grep -c . <<<"$out")" -eq 1 ] && grep -qx 'comp-ident' <<<"$out" \
    && ok "fish (interactive, complete -C): keyshare export comp- offers exactly comp-ident" || bad "fish: export comp-" "$out"
fi

# Nothing secret, no agent, nothing created, silent on a broken store.
leak=""
for s in "$PIN" "$SOPIN" "$P12PASS" "$SHARED"; do
  [ -n "$s" ] && grep -qF -- "$s" <<<"$all_out" && leak="$leak (a secret of ${#s} bytes)"
done
[ -n "$SHARED" ] || bad "the shared password was read for the leak check"
[ -z "$leak" ] && ok "no PIN, PKCS #12 password or shared password in any completion" || bad "no secret in completions" "$leak"
agent_running && bad "completion started no agent" "$(ls -la "$ADIR" 2>&1)" || ok "completion started no agent (no socket, no process)"
EMPTY_HOME=$WORK/none/store
out=$(KEYSHARE_HOME=$EMPTY_HOME "$KS" ---completion list -- --token 3 0 "$KS" list --token '' 2>&1)
[ -z "$out" ] && [ ! -e "$WORK/none" ] && ok "no store: no completion, nothing created" || bad "no store: nothing created" "$out $(ls -R "$WORK/none" 2>&1)"
mkdir -p "$WORK/broken" && chmod 0700 "$WORK/broken" && head -c 4096 /dev/urandom > "$WORK/broken/keychain.db" && chmod 0600 "$WORK/broken/keychain.db"
out=$(KEYSHARE_HOME=$WORK/broken "$KS" ---completion show -- positional@0 2 0 "$KS" show '' 2>&1); rc=$?
[ -z "$out" ] && [ "$rc" -eq 0 ] && ok "a broken store: no completion, no message, exit 0" || bad "broken store: silent" "exit $rc: $out"
start=$(date +%s%N)
for i in 1 2 3 4 5; do "$KS" ---completion show -- positional@0 2 0 "$KS" show '' >/dev/null 2>&1; done
ms=$(( ($(date +%s%N) - start) / 5000000 ))
[ "$ms" -lt 500 ] && ok "an item completion takes $ms ms" || bad "item completion is fast (< 500 ms)" "$ms ms"

finish
