"""PyKCS11 against the module's PKCS #11 3.2 post-quantum mechanisms with raw numbers (33-pq.sh, issue 18).

Debian 12's python3-pykcs11 (1.5.12) is a 2.40/3.0-level binding: it knows no CKK_ML_DSA, CKM_ML_DSA or
CKA_PARAMETER_SET, but takes any integer as a mechanism or key type, and sends an attribute it does not
know as bytes: CKA_PARAMETER_SET therefore goes in as the native CK_ULONG's bytes. Verification and
the private CKA_VALUE are checked through its low-level C_Verify / C_GetAttributeValue so the exact
CK_RV (CKR_SIGNATURE_INVALID, CKR_ATTRIBUTE_SENSITIVE) is seen. It has no C_EncapsulateKey /
C_DecapsulateKey (3.2 functions), so ML-KEM stops at key generation and says so.
Usage: pq_pykcs11.py MODULE TOKEN_LABEL; the user PIN in KS_TEST_PIN (never argv). Prints ok/FAIL
lines, "# ..." notes and "N passed, M failed"; "skip: REASON" when the binding is missing.
"""
import os
import struct
import sys

try:
    import PyKCS11
    from PyKCS11 import LowLevel
except Exception as e:  # the binding's own absence
    print(f"skip: PyKCS11 not importable ({e})")
    sys.exit(0)

# PKCS #11 3.2 numbers (pkcs11/types), none of which PyKCS11 1.5.12 defines.
CKA_PARAMETER_SET, CKA_ENCAPSULATE, CKA_DECAPSULATE = 0x61D, 0x633, 0x634
CKK_ML_KEM, CKK_ML_DSA = 0x49, 0x4A
CKM_ML_KEM_KEY_PAIR_GEN, CKM_ML_DSA_KEY_PAIR_GEN, CKM_ML_DSA = 0x0F, 0x1C, 0x1D
CKP_ML_DSA_65, CKP_ML_KEM_768 = 2, 2
ULONG = struct.Struct("L")  # native unsigned long = CK_ULONG on Linux

passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok   - PyKCS11: {name}")
    else:
        failed += 1
        print(f"FAIL - PyKCS11: {name}" + (f" ({detail})" if detail else ""))


def ulong(v):
    return ULONG.pack(v)


def get_rv(session, handle, attr):
    """C_GetAttributeValue for one attribute: (CK_RV, bytes or None)."""
    t = LowLevel.ckattrlist(1)
    t[0].SetType(attr)
    rv = session.lib.C_GetAttributeValue(session.session, handle, t)
    if rv != PyKCS11.CKR_OK:
        return rv, None
    rv = session.lib.C_GetAttributeValue(session.session, handle, t)
    return rv, bytes(t[0].GetBin()) if rv == PyKCS11.CKR_OK else None


def verify_rv(session, key, data, sig):
    m = PyKCS11.Mechanism(CKM_ML_DSA).to_native()
    rv = session.lib.C_VerifyInit(session.session, m, key)
    if rv != PyKCS11.CKR_OK:
        return rv
    return session.lib.C_Verify(session.session, PyKCS11.ckbytelist(data), PyKCS11.ckbytelist(sig))


def name(rv):
    return PyKCS11.CKR.get(rv, hex(rv))


lib = PyKCS11.PyKCS11Lib()
lib.load(sys.argv[1])
label = sys.argv[2]
slots = [s for s in lib.getSlotList(tokenPresent=True) if lib.getTokenInfo(s).label.strip() == label]
if not slots:
    print(f"FAIL - PyKCS11: token {label!r} present")
    print(f"{passed} passed, {failed + 1} failed")
    sys.exit(0)
s = lib.openSession(slots[0], PyKCS11.CKF_SERIAL_SESSION | PyKCS11.CKF_RW_SESSION)
s.login(os.environ["KS_TEST_PIN"])
try:
    # ML-DSA-65: generate with raw CKM/CKK/CKA/CKP numbers.
    # CKA_PARAMETER_SET goes in the public template (3.2 §6.67.4); the private key gets it from there.
    common = [(PyKCS11.CKA_TOKEN, PyKCS11.CK_FALSE), (PyKCS11.CKA_KEY_TYPE, CKK_ML_DSA), (PyKCS11.CKA_LABEL, "pykcs11-mldsa")]
    pub, priv = s.generateKeyPair(common + [(CKA_PARAMETER_SET, ulong(CKP_ML_DSA_65)), (PyKCS11.CKA_VERIFY, PyKCS11.CK_TRUE)],
                                  common + [(PyKCS11.CKA_SIGN, PyKCS11.CK_TRUE), (PyKCS11.CKA_SENSITIVE, PyKCS11.CK_TRUE)],
                                  PyKCS11.Mechanism(CKM_ML_DSA_KEY_PAIR_GEN))
    check("ML-DSA-65 C_GenerateKeyPair with CKM 0x1c, CKK 0x4a, CKA_PARAMETER_SET 0x61d = CKP 2", True)
    rv, ps = get_rv(s, priv, CKA_PARAMETER_SET)
    check("ML-DSA-65 private key's CKA_PARAMETER_SET reads back 2", ps == ulong(CKP_ML_DSA_65), f"{name(rv)} {ps!r}")
    rv, kt = get_rv(s, pub, PyKCS11.CKA_KEY_TYPE)
    check("ML-DSA-65 public key's CKA_KEY_TYPE is 0x4a", kt == ulong(CKK_ML_DSA), f"{name(rv)} {kt!r}")
    rv, value = get_rv(s, pub, PyKCS11.CKA_VALUE)
    check("ML-DSA-65 public CKA_VALUE reads (1952 bytes)", rv == PyKCS11.CKR_OK and len(value) == 1952,
          f"{name(rv)} {len(value or b'')}")
    rv, secret = get_rv(s, priv, PyKCS11.CKA_VALUE)
    check("ML-DSA-65 private CKA_VALUE unreadable (CKR_ATTRIBUTE_SENSITIVE)",
          rv == PyKCS11.CKR_ATTRIBUTE_SENSITIVE and secret is None, name(rv))

    msg = b"keyshare post-quantum via PyKCS11"
    sig = bytes(s.sign(priv, msg, PyKCS11.Mechanism(CKM_ML_DSA)))
    check("ML-DSA-65 C_Sign with CKM_ML_DSA (0x1d) gives 3309 bytes", len(sig) == 3309, str(len(sig)))
    rv = verify_rv(s, pub, msg, sig)
    check("ML-DSA-65 C_Verify accepts it", rv == PyKCS11.CKR_OK, name(rv))
    bad = bytearray(sig)
    bad[100] ^= 1
    rv = verify_rv(s, pub, msg, bytes(bad))
    check("ML-DSA-65 tampered signature: CKR_SIGNATURE_INVALID", rv == PyKCS11.CKR_SIGNATURE_INVALID, name(rv))
    rv = verify_rv(s, pub, msg + b"!", sig)
    check("ML-DSA-65 other message: CKR_SIGNATURE_INVALID", rv == PyKCS11.CKR_SIGNATURE_INVALID, name(rv))

    # ML-KEM-768: key generation only.
    kc = [(PyKCS11.CKA_TOKEN, PyKCS11.CK_FALSE), (PyKCS11.CKA_KEY_TYPE, CKK_ML_KEM)]
    kpub, kpriv = s.generateKeyPair(kc + [(CKA_PARAMETER_SET, ulong(CKP_ML_KEM_768)), (CKA_ENCAPSULATE, b"\x01")],
                                    kc + [(CKA_DECAPSULATE, b"\x01"), (PyKCS11.CKA_SENSITIVE, PyKCS11.CK_TRUE)],
                                    PyKCS11.Mechanism(CKM_ML_KEM_KEY_PAIR_GEN))
    rv, ek = get_rv(s, kpub, PyKCS11.CKA_VALUE)
    check("ML-KEM-768 C_GenerateKeyPair (CKM 0xf, CKK 0x49); encapsulation key reads (1184 bytes)",
          rv == PyKCS11.CKR_OK and len(ek) == 1184, f"{name(rv)} {len(ek or b'')}")
    rv, dk = get_rv(s, kpriv, PyKCS11.CKA_VALUE)
    check("ML-KEM-768 decapsulation key's CKA_VALUE unreadable", rv == PyKCS11.CKR_ATTRIBUTE_SENSITIVE, name(rv))
    if not hasattr(LowLevel.CPKCS11Lib, "C_EncapsulateKey"):
        print(f"# PyKCS11 {getattr(PyKCS11, '__version__', '1.5.12')}: encapsulate/decapsulate skipped: the binding has "
              "no C_EncapsulateKey / C_DecapsulateKey (PKCS #11 3.2 functions; it wraps the 2.40 function list)")
    else:  # pragma: no cover - a later PyKCS11 would need this written against its API
        check("PyKCS11 grew C_EncapsulateKey: extend this script", False)
except PyKCS11.PyKCS11Error as e:
    check("no unexpected PyKCS11Error", False, str(e))
finally:
    s.logout()
    s.closeSession()
print(f"{passed} passed, {failed} failed")
