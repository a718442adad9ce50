#!/usr/bin/env python3
"""Cuts ACVP_SLHDSA_subset.json from NIST's ACVP-Server SLH-DSA sigGen vectors (FIPS 205,
gen-val/json-files/SLH-DSA-sigGen-FIPS205/internalProjection.json, vsId 53, external interface),
as blackshirt/pslhdsa ships them reduced to one test per group with lower-cased keys
(kat/siggen_fips205_mini.json, commit 16b967a84563d76db55a226c7ad3958d4a1b8e47). Nothing is
computed: the tests named below are copied (SLH-DSA-SHA2-128s, -SHA2-128f and -SHAKE-128f;
deterministic and hedged with ACVP's additionalRandomness; pure with a context and HashSLH-DSA).

    make_slhdsa_subset.py siggen_fips205_mini.json > ACVP_SLHDSA_subset.json
"""
import json
import sys

WANT = {164, 473, 476,  # SHA2-128s: deterministic preHash SHA2-224; hedged pure; hedged preHash SHA2-512
        8, 320,         # SHA2-128f: deterministic preHash SHA2-512/224; hedged preHash SHA2-256
        58, 76, 377}    # SHAKE-128f: deterministic pure; deterministic preHash SHA3-384; hedged preHash SHA3-256
src = json.load(open(sys.argv[1]))
out = {"source": "NIST ACVP-Server SLH-DSA-sigGen-FIPS205 internalProjection.json (vsId 53) via blackshirt/pslhdsa "
                 "kat/siggen_fips205_mini.json", "slhdsa_siggen": []}
for g in src["testgroups"]:
    for t in g["tests"]:
        if t["tcid"] in WANT:
            out["slhdsa_siggen"].append({
                "set": g["parameterset"], "tgId": g["tgid"], "tcId": t["tcid"], "deterministic": g["deterministic"],
                "preHash": g["prehash"], "hashAlg": t["hashalg"], "sk": t["sk"], "pk": t["pk"],
                "message": t["message"], "context": t["context"], "rnd": t.get("additionalrandomness", ""),
                "signature": t["signature"]})
assert len(out["slhdsa_siggen"]) == len(WANT)
json.dump(out, sys.stdout, indent=0)
sys.stdout.write("\n")
