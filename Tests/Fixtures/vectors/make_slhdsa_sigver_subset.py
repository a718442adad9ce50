#!/usr/bin/env python3
"""Cuts ACVP_SLHDSA_sigver_subset.json from NIST's ACVP-Server SLH-DSA sigVer vectors (FIPS 205,
gen-val/json-files/SLH-DSA-sigVer-FIPS205/internalProjection.json: prompt + expectedResults in one
file, vsId 53, the internal interface slh_verify_internal), as RustCrypto/signatures ships it
unchanged (slh-dsa/tests/acvp/SLH-DSA-sigVer-FIPS205/internalProjection.json, last changed in
commit cf34cd2ffdbf5579b3fa2d1a5361464484e86ee3, read at 5595c3b). Nothing is computed: the tests
named below are copied. Per parameter set the valid test with the shortest message and an invalid
one (R or SIGHT modified: caught only by the hash-tree computation, not by a length check) with a
short message, a second invalid one for SHAKE-128f; SHA2-256f only its valid test (its
signatures are 49,856 bytes: the file stays about 500 KB). 5 valid, 5 invalid.

    make_slhdsa_sigver_subset.py internalProjection.json > ACVP_SLHDSA_sigver_subset.json
"""
import json
import sys

WANT = {5, 9,         # SHA2-192s: valid; R modified
        14,           # SHA2-256f: valid
        24, 22,       # SHAKE-192s: valid; SIGHT modified
        30, 35,       # SHAKE-256f: valid; R modified
        37, 41, 43}   # SHAKE-128f: valid; R modified; SIGHT modified
src = json.load(open(sys.argv[1]))
out = {"source": "NIST ACVP-Server SLH-DSA-sigVer-FIPS205 internalProjection.json (vsId 53) via RustCrypto/signatures "
                 "slh-dsa/tests/acvp (cf34cd2ffdbf5579b3fa2d1a5361464484e86ee3)", "slhdsa_sigver": []}
for g in src["testGroups"]:
    for t in g["tests"]:
        if t["tcId"] in WANT:
            out["slhdsa_sigver"].append({
                "set": g["parameterSet"], "tgId": g["tgId"], "tcId": t["tcId"], "testPassed": t["testPassed"],
                "reason": t["reason"], "pk": t["pk"], "message": t["message"], "signature": t["signature"]})
assert len(out["slhdsa_sigver"]) == len(WANT)
json.dump(out, sys.stdout, indent=0)
sys.stdout.write("\n")
