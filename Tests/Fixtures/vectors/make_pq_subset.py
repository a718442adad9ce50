#!/usr/bin/env python3
"""Cuts ACVP_PQ_subset.json from NIST's ACVP-Server vectors for ML-DSA (FIPS 204) and ML-KEM
(FIPS 203), as the PyPI sdists dilithium-py 1.5.1 and kyber-py 1.2.0 ship them (assets/*/
internalProjection.json, copied unchanged from usnistgov/ACVP-Server gen-val/json-files).
Nothing is computed: the first tests of each group are copied.

    make_pq_subset.py DILITHIUM_PY_SDIST_DIR KYBER_PY_SDIST_DIR > ACVP_PQ_subset.json
"""
import json
import sys

dil, kyb = sys.argv[1], sys.argv[2]


def load(base, name):
    with open(f"{base}/assets/{name}/internalProjection.json") as f:
        return json.load(f)["testGroups"]


out = {"source": "NIST ACVP-Server internalProjection.json via dilithium-py 1.5.1 / kyber-py 1.2.0 sdists",
       "mldsa_keygen": [], "mldsa_siggen": [], "mldsa_sigver": [],
       "mlkem_keygen": [], "mlkem_encap": [], "mlkem_decap": []}
for g in load(dil, "ML-DSA-keyGen-FIPS204"):
    for t in g["tests"][:2]:
        out["mldsa_keygen"].append({"set": g["parameterSet"], "tcId": t["tcId"], "seed": t["seed"], "pk": t["pk"], "sk": t["sk"]})
for g in load(dil, "ML-DSA-sigGen-FIPS204"):
    det = g["deterministic"]
    for t in g["tests"][:2 if det else 1]:
        out["mldsa_siggen"].append({"set": g["parameterSet"], "tgId": g["tgId"], "tcId": t["tcId"], "sk": t["sk"],
                                    "message": t["message"], "rnd": t.get("rnd", ""), "signature": t["signature"]})
for g in load(dil, "ML-DSA-sigVer-FIPS204"):
    for t in g["tests"][:4]:
        out["mldsa_sigver"].append({"set": g["parameterSet"], "tcId": t["tcId"], "pk": g["pk"], "message": t["message"],
                                    "signature": t["signature"], "passed": t["testPassed"]})
for g in load(kyb, "ML-KEM-keyGen-FIPS203"):
    for t in g["tests"][:2]:
        out["mlkem_keygen"].append({"set": g["parameterSet"], "tcId": t["tcId"], "d": t["d"], "z": t["z"], "ek": t["ek"], "dk": t["dk"]})
for g in load(kyb, "ML-KEM-encapDecap-FIPS203"):
    if g["function"] == "encapsulation":
        for t in g["tests"][:2]:
            out["mlkem_encap"].append({"set": g["parameterSet"], "tcId": t["tcId"], "ek": t["ek"], "m": t["m"], "c": t["c"], "k": t["k"]})
    else:
        for t in g["tests"][:3]:
            out["mlkem_decap"].append({"set": g["parameterSet"], "tcId": t["tcId"], "dk": g["dk"], "c": t["c"], "k": t["k"]})
json.dump(out, sys.stdout, indent=0)
sys.stdout.write("\n")
