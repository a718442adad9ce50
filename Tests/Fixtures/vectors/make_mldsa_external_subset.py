#!/usr/bin/env python3
"""Cuts ACVP_MLDSA_external_subset.json from NIST's ACVP-Server ML-DSA sigVer vectors (FIPS 204,
gen-val/json-files/ML-DSA-sigVer-FIPS204/{prompt,expectedResults}.json, vsId 42, the version with the
external interface: pure with a context and HashML-DSA "preHash" groups). Nothing is computed: per
external group (3 parameter sets x pure/preHash) the valid test and the 2 invalid tests with the
shortest messages are copied with their hashAlg and context.

    make_mldsa_external_subset.py PROMPT_JSON EXPECTED_RESULTS_JSON > ACVP_MLDSA_external_subset.json
"""
import json
import sys

prompt = json.load(open(sys.argv[1]))
expected = {t["tcId"]: t["testPassed"] for g in json.load(open(sys.argv[2]))["testGroups"] for t in g["tests"]}
out = {"source": "NIST ACVP-Server gen-val/json-files/ML-DSA-sigVer-FIPS204 prompt.json + expectedResults.json (vsId 42)",
       "mldsa_sigver_external": []}
for g in prompt["testGroups"]:
    if g.get("signatureInterface") != "external":
        continue
    tests = sorted(g["tests"], key=lambda t: len(t["message"]))
    for want, n in ((True, 1), (False, 2)):
        for t in [t for t in tests if expected[t["tcId"]] == want][:n]:
            out["mldsa_sigver_external"].append({
                "set": g["parameterSet"], "tgId": g["tgId"], "preHash": g["preHash"], "tcId": t["tcId"],
                "hashAlg": t.get("hashAlg", ""), "pk": t["pk"], "message": t["message"], "context": t["context"],
                "signature": t["signature"], "passed": want})
out["mldsa_sigver_external"].sort(key=lambda r: r["tcId"])
json.dump(out, sys.stdout, indent=0)
sys.stdout.write("\n")
