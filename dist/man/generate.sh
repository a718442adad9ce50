#!/usr/bin/env bash
# dist/man/generate.sh KEYSHARE OUTDIR DATE VERSION
#
# The manual pages (man(7), titled "keyshare Manual"): keyshare(1) and one
# page per subcommand from dist/man/generate.py (the argument parser's
# definitions merged with the hand-written sections of dist/man/commands/),
# plus the hand-written concept pages keyshare-pkcs11(7) and
# keyshare-security(7). Every page is checked with mandoc -Tlint (nothing, not
# even a style message), groff -ww and lexgrog (what man-db's mandb and
# lintian read), then gzipped (-9n, as Debian policy asks) into OUTDIR/man1
# and OUTDIR/man7. Tests/integration/96-man-completion.sh checks the result.
set -euo pipefail
KEYSHARE=${1:?keyshare binary}
OUT=${2:?output directory}
DATE=${3:?date YYYY-MM-DD}
VERSION=${4:?version}
HERE=$(cd "$(dirname "$0")" && pwd)

rm -rf "$OUT"
read -r n1 n7 < <(python3 "$HERE/generate.py" "$KEYSHARE" "$OUT" "$DATE" "$VERSION")

bad=0
for page in "$OUT"/man1/*.1 "$OUT"/man7/*.7; do
  # mandoc also notes "outdated mandoc.db" for system pages it cannot look up: not about this page.
  lint=$(mandoc -Tlint "$page" 2>&1 | grep -v 'outdated mandoc.db' || true)
  if [ -n "$lint" ]; then echo "generate.sh: mandoc -Tlint: $lint" >&2; bad=1; fi
  if ! warn=$(LC_ALL=C.UTF-8 MANWIDTH=80 groff -mandoc -ww -z -Tutf8 "$page" 2>&1) || [ -n "$warn" ]; then
    echo "generate.sh: groff warns on $(basename "$page"): $warn" >&2; bad=1
  fi
  if ! lexgrog "$page" >/dev/null 2>&1; then
    echo "generate.sh: no whatis line in $(basename "$page")" >&2; bad=1
  fi
done
[ "$bad" -eq 0 ]
gzip -9n "$OUT"/man1/*.1 "$OUT"/man7/*.7
echo "man pages: $n1 in section 1, $n7 in section 7 ($OUT)"
