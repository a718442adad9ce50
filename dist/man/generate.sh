#!/usr/bin/env bash
# dist/man/generate.sh GENERATE-MANUAL KEYSHARE OUTDIR DATE VERSION
#
# The manual pages, from the argument parser's own definitions: swift-argument-
# parser's `generate-manual` tool (the program its GenerateManual plugin runs)
# reads `keyshare --experimental-dump-help` and writes one mdoc page per
# command. This script only renames them to the git/Debian convention
# (keyshare-token-create.1, not keyshare.token.create.1: `man keyshare-token-create`),
# points keyshare(1) at keyshare-pkcs11(7), adds the hand-written
# keyshare-pkcs11(7), checks every page with groff and lexgrog (what man-db's
# mandb and lintian read), and gzips them (-9n, as Debian policy asks) into
# OUTDIR/man1 and OUTDIR/man7.
set -euo pipefail
GENMAN=${1:?generate-manual tool}
KEYSHARE=${2:?keyshare binary}
OUT=${3:?output directory}
DATE=${4:?date YYYY-MM-DD}
VERSION=${5:?version}
HERE=$(cd "$(dirname "$0")" && pwd)

raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
"$GENMAN" "$KEYSHARE" --multi-page --date "$DATE" --section 1 --output-directory "$raw"

rm -rf "$OUT"
mkdir -p "$OUT/man1" "$OUT/man7"
count=0
for page in "$raw"/*.1; do
  base=$(basename "$page" .1)            # keyshare.token.create
  name=${base//./-}                       # keyshare-token-create
  awk -v fname="$name" -v version="$VERSION" -f "$HERE/rename.awk" "$page" > "$OUT/man1/$name.1"
  count=$((count + 1))
done
[ "$count" -gt 1 ] || { echo "generate.sh: generate-manual wrote $count page(s)" >&2; exit 1; }
grep -q '^\.Xr keyshare-pkcs11 7$' "$OUT/man1/keyshare.1" ||
  { echo "generate.sh: keyshare(1)'s SEE ALSO does not name keyshare-pkcs11(7)" >&2; exit 1; }

sed -e "s/@DATE@/$(date -u -d "$DATE" '+%B %-d, %Y')/" -e "s/@VERSION@/$VERSION/" \
  "$HERE/keyshare-pkcs11.7" > "$OUT/man7/keyshare-pkcs11.7"

# Every page must render without a warning and give man-db a whatis line.
bad=0
for page in "$OUT"/man1/*.1 "$OUT"/man7/*.7; do
  if ! warn=$(LC_ALL=C.UTF-8 MANWIDTH=80 groff -mandoc -ww -z -Tutf8 "$page" 2>&1) || [ -n "$warn" ]; then
    echo "generate.sh: groff warns on $(basename "$page"): $warn" >&2; bad=1
  fi
  if ! lexgrog "$page" >/dev/null 2>&1; then
    echo "generate.sh: no whatis line in $(basename "$page")" >&2; bad=1
  fi
  if grep -n '^\.Xr keyshare\.' "$page" >&2; then bad=1; fi
done
[ "$bad" -eq 0 ]
gzip -9n "$OUT"/man1/*.1 "$OUT"/man7/*.7
echo "man pages: $count in section 1, 1 in section 7 ($OUT)"
