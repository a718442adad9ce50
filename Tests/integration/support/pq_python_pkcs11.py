"""python-pkcs11 against the module's PKCS #11 3.2 post-quantum mechanisms (33-pq.sh, issue 18).

python-pkcs11 0.9.4 knows none of the 3.2 numbers; it takes raw mechanism and key-type numbers,
and an AttributeMapper can be taught CKA_PARAMETER_SET (0x61d, a CK_ULONG) and CKA_ENCAPSULATE /
CKA_DECAPSULATE. It has no C_EncapsulateKey (3.0 API), so only ML-DSA and SLH-DSA are exercised.
Usage: pq_python_pkcs11.py MODULE TOKEN_LABEL; the PIN in KS_TEST_PIN. Prints ok/FAIL lines and
"N passed, M failed"; "skip: REASON" when the binding cannot do it.
"""
import os
import sys

try:
    import pkcs11
    from pkcs11.attributes import AttributeMapper, handle_bool, handle_ulong  # noqa: F401
except Exception as e:  # pragma: no cover - the binding's own absence
    print(f"skip: python-pkcs11 not importable ({e})")
    sys.exit(0)

CKA_PARAMETER_SET, CKA_ENCAPSULATE, CKA_DECAPSULATE = 0x61D, 0x633, 0x634
CKK_ML_DSA, CKK_SLH_DSA = 0x4A, 0x4B
CKM_ML_DSA_KEY_PAIR_GEN, CKM_ML_DSA, CKM_SLH_DSA_KEY_PAIR_GEN, CKM_SLH_DSA = 0x1C, 0x1D, 0x2D, 0x2E

passed = failed = 0


def check(name, cond):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok   - python-pkcs11: {name}")
    else:
        failed += 1
        print(f"FAIL - python-pkcs11: {name}")


mapper = AttributeMapper()
mapper.register_handler(CKA_PARAMETER_SET, *handle_ulong)
mapper.register_handler(CKA_ENCAPSULATE, *handle_bool)
mapper.register_handler(CKA_DECAPSULATE, *handle_bool)

lib = pkcs11.lib(sys.argv[1])
token = lib.get_token(token_label=sys.argv[2])
msg = b"keyshare post-quantum via python-pkcs11"
with token.open(user_pin=os.environ["KS_TEST_PIN"], rw=True, attribute_mapper=mapper) as s:
    for name, ckk, gen, mech, pset, siglen in [("ML-DSA-65", CKK_ML_DSA, CKM_ML_DSA_KEY_PAIR_GEN, CKM_ML_DSA, 2, 3309),
                                                ("SLH-DSA-SHA2-128f", CKK_SLH_DSA, CKM_SLH_DSA_KEY_PAIR_GEN, CKM_SLH_DSA, 3, 17088)]:
        try:
            pub, priv = s.generate_keypair(ckk, mechanism=gen, public_template={CKA_PARAMETER_SET: pset},
                                           private_template={CKA_PARAMETER_SET: pset})
        except Exception as e:
            print(f"skip: python-pkcs11 cannot generate a key of raw type 0x{ckk:x} ({type(e).__name__}: {e})")
            sys.exit(0)
        check(f"{name}: generate_keypair with raw CKK/CKM numbers", True)
        check(f"{name}: CKA_PARAMETER_SET reads back {pset}", priv[CKA_PARAMETER_SET] == pset)
        sig = priv.sign(msg, mechanism=mech)
        check(f"{name}: sign gives a {siglen}-byte signature", len(sig) == siglen)
        check(f"{name}: verify accepts it", pub.verify(msg, sig, mechanism=mech))
        check(f"{name}: verify refuses another message", not pub.verify(msg + b"!", sig, mechanism=mech))
        try:
            priv[pkcs11.Attribute.VALUE]
            check(f"{name}: private CKA_VALUE unreadable", False)
        except pkcs11.exceptions.AttributeSensitive:
            check(f"{name}: private CKA_VALUE unreadable (AttributeSensitive)", True)
print(f"{passed} passed, {failed} failed")
