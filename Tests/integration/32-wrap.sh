#!/usr/bin/env bash
# keyshare wrap / unwrap: round trips (empty, one byte, segment-sized, several
# segments), the wrong group refused, tampering and truncation detected with
# no plaintext left behind, and the "not wrapped: use as is" case (exit 3).
set -u
KS=${1:?keyshare binary}
source "$(dirname "$0")/lib.sh"
new_home
export PIN=1234-user SOPIN=9876-so
W=$(mktemp -d)
ks() { "$KS" "$@"; }
P=(--pin-source env:PIN)

check_out "token create" "created token" ks token create --label wrap --pin-source env:PIN --so-pin-source env:SOPIN
: >"$W/empty"; printf 'x' >"$W/one"; head -c 65536 /dev/urandom >"$W/seg"; head -c 300000 /dev/urandom >"$W/multi"
for f in empty one seg multi; do
  ks wrap --group team-a "$W/$f" "$W/$f.wrapped" "${P[@]}" >/dev/null && ks unwrap "$W/$f.wrapped" "$W/$f.out" "${P[@]}" >/dev/null \
    && cmp -s "$W/$f" "$W/$f.out" && ok "round trip: $f ($(stat -c %s "$W/$f") bytes)" || bad "round trip: $f"
done
check_out "header names the group and file" "unwrapped multi \(group team-a\)" ks unwrap "$W/multi.wrapped" "$W/m2" "${P[@]}"
[ "$(stat -c %a "$W/multi.wrapped")" = 600 ] && ok "wrapped file is 0600" || bad "wrapped file is 0600"
if cmp -s <(head -c 300000 "$W/multi.wrapped" | tail -c 1000) <(tail -c 1000 "$W/multi"); then bad "ciphertext differs"; else ok "ciphertext differs"; fi
mkdir "$W/dir"
check_out "unwrap into a directory uses the original name" "to $W/dir/one" ks unwrap "$W/one.wrapped" "$W/dir" "${P[@]}"
ks wrap --group team-a "$W/one" "$W/one.again" "${P[@]}" >/dev/null
cmp -s "$W/one.wrapped" "$W/one.again" && bad "two wraps of one file differ" || ok "two wraps of one file differ"

# Groups: a member of another group cannot unwrap (and is told so, before any PIN prompt).
check_fail "wrong group refused" "not a member of access group team-a" ks unwrap "$W/multi.wrapped" "$W/x" --access-group team-b </dev/null
check_fail "cannot wrap for a group one is not in" "not a member of access group team-a" \
  ks wrap --group team-a "$W/one" "$W/x" --access-group team-b "${P[@]}"
check_out "a team-b member wraps for team-b" "wrapped" ks wrap --group team-b "$W/one" "$W/b.wrapped" --access-group team-b "${P[@]}"
check_fail "team-a member cannot open team-b's file" "not a member of access group team-b" \
  ks unwrap "$W/b.wrapped" "$W/x" --access-group team-a "${P[@]}"
check_out "member of both groups opens it" "unwrapped" ks unwrap "$W/b.wrapped" "$W/x" --access-group team-a --access-group team-b "${P[@]}"
check_fail "already wrapped" "already wrapped" ks wrap --group team-a "$W/multi.wrapped" "$W/x" "${P[@]}"

# Not wrapped: a distinct exit status and message.
err=$(ks unwrap "$W/multi" "$W/x" "${P[@]}" 2>&1 >/dev/null) && rc=0 || rc=$?
[ "$rc" -eq 3 ] && grep -q "not wrapped: use as is" <<<"$err" && ok "plain file: exit 3, not wrapped: use as is" \
  || bad "plain file: exit 3, not wrapped: use as is" "exit $rc: $err"
err=$(ks unwrap "$W/empty" "$W/x" "${P[@]}" 2>&1 >/dev/null) && rc=0 || rc=$?
[ "$rc" -eq 3 ] && ok "empty plain file: exit 3" || bad "empty plain file: exit 3" "exit $rc: $err"

# Tampering and truncation: every one rejected, and no output file appears.
size=$(stat -c %s "$W/multi.wrapped")
flip() {  # OFFSET OUT
  python3 -c "import sys; d=bytearray(open(sys.argv[1],'rb').read()); d[int(sys.argv[2])]^=1; open(sys.argv[3],'wb').write(d)" \
    "$W/multi.wrapped" "$1" "$2"
}
flip 20 "$W/t-header"; flip 200 "$W/t-first"; flip $((size - 3)) "$W/t-last"
head -c $((size - 1)) "$W/multi.wrapped" >"$W/t-short1"
python3 -c "
import sys
d=open(sys.argv[1],'rb').read(); h=10+int.from_bytes(d[8:10],'big')
open(sys.argv[2],'wb').write(d[:h+2*(65536+16)])" "$W/multi.wrapped" "$W/t-boundary"   # at a segment boundary
cat "$W/multi.wrapped" "$W/one" >"$W/t-extended"
python3 -c "
import sys
d=open(sys.argv[1],'rb').read()
h=10+int.from_bytes(d[8:10],'big'); s=65536+16
open(sys.argv[2],'wb').write(d[:h]+d[h+s:h+2*s]+d[h:h+s]+d[h+2*s:])" "$W/multi.wrapped" "$W/t-swapped"
for t in header first last short1 boundary extended swapped; do
  rm -f "$W/out.$t"
  check_fail "tampered: $t" "damaged or was altered|malformed|truncated" ks unwrap "$W/t-$t" "$W/out.$t" "${P[@]}"
  [ -e "$W/out.$t" ] && bad "tampered: $t leaves no output" || ok "tampered: $t leaves no output"
done
head -c 9 "$W/multi.wrapped" >"$W/t-stub"
check_fail "truncated header" "truncated header" ks unwrap "$W/t-stub" "$W/x" "${P[@]}"
rm -rf "$W"
finish
