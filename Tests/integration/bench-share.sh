#!/usr/bin/env bash
# Not a test: measures the share tree for N generated identities (default 50):
# the size of every file and the time of `share list` and `share export-tree`.
# Usage: bench-share.sh KEYSHARE_BIN [N]
set -u
KS=${1:?keyshare binary}
N=${2:-50}
source "$(dirname "$0")/lib.sh"
new_home
export PIN=1234-user SOPIN=9876-so P12PASS=bench
W=$(mktemp -d /tmp/keyshare-bench.XXXXXX)
trap 'rm -rf "$W" "$KEYSHARE_HOME"' EXIT
CA=$FIXTURES/ca/intermediate-ca.pem CAKEY=$FIXTURES/ca/intermediate-ca.key.pem
kus=("digitalSignature,keyEncipherment" "digitalSignature,nonRepudiation" "keyEncipherment" "digitalSignature")
for i in $(seq 1 "$N"); do
  if [ $((i % 3)) = 0 ]; then openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$W/$i.key" 2>/dev/null
  else openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$W/$i.key" 2>/dev/null; fi
  ku=${kus[$((i % 4))]}
  san=$([ $((i % 4)) = 3 ] && echo "otherName:1.3.6.1.4.1.311.20.2.3;UTF8:user$i@mil" || echo "email:user$i@mail.example")
  openssl req -new -key "$W/$i.key" -subj "/CN=Bench $i" -out "$W/$i.csr" 2>/dev/null
  printf 'keyUsage=critical,%s\nsubjectAltName=%s\n' "$ku" "$san" >"$W/$i.ext"
  openssl x509 -req -in "$W/$i.csr" -CA "$CA" -CAkey "$CAKEY" -set_serial $((1000 + i)) -days $((365 + i)) \
    -extfile "$W/$i.ext" -out "$W/$i.pem" 2>/dev/null
  openssl pkcs12 -export -inkey "$W/$i.key" -in "$W/$i.pem" -passout env:P12PASS -out "$W/$i.p12"
done
"$KS" token create --label bench --pin-source env:PIN --so-pin-source env:SOPIN >/dev/null
"$KS" import "$W"/*.p12 --pin-source env:PIN --password-source env:P12PASS >/dev/null
echo "identities: $N (every third EC P-256, the rest RSA-2048)"
for profile in modern legacy; do
  t0=$(date +%s.%N)
  "$KS" share list --pin-source env:PIN --json --profile "$profile" >"$W/list.json"
  t1=$(date +%s.%N)
  "$KS" share export-tree "$W/tree-$profile" --pin-source env:PIN --profile "$profile"
  t2=$(date +%s.%N)
  printf '%s: share list %.2fs, export-tree %.2fs, tree %s on disk\n' "$profile" \
    "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t1" | bc)" "$(du -sh "$W/tree-$profile" | cut -f1)"
  python3 - "$W/list.json" <<'PY'
import json, sys
l = json.load(open(sys.argv[1]))
p12 = [i['size'] for i in l['root']] + [i['size'] for f in l['folders'] for i in f['items']]
print(f"  p12 files: {len(p12)}, {min(p12)}-{max(p12)} bytes; zips: " +
      ", ".join(f"{z['fileName']} {z['size']}" for z in l['zips']))
PY
done
