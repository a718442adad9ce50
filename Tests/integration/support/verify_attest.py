#!/usr/bin/python3
"""An independent verifier of a TPM key attestation (issue 31, docs/tpm.md "Key attestation").

No keyshare code: the TCG structures are parsed here from their specification (TPM 2.0
Part 2) and cross-checked with tpm2-tools' `tpm2_print -t TPMS_ATTEST`; signatures and
certificates are checked with Python's `cryptography`. Prints one line per check,
`ok NAME` or `FAIL NAME: why`, and exits 1 if any failed.

Usage: verify_attest.py DIR --nonce HEX [--root CA.pem --issuer ISSUER.pem] [--imported]
       verify_attest.py --container FILE --key-pem PEM [--imported]
DIR holds the files `keyshare key attest` writes. --container takes the CKA_VALUE of the
PKCS #11 CKO_DATA attestation object (four 2-byte-length-prefixed fields: TPMS_ATTEST,
TPMT_SIGNATURE, the key's TPM2B_PUBLIC, the AK's TPM2B_PUBLIC; empty qualifying data).
"""
import argparse
import hashlib
import os
import struct
import subprocess
import sys
import tempfile

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

TPM_GENERATED_VALUE = 0xFF544347
TPM_ST_ATTEST_CERTIFY = 0x8017
TPM_RH_ENDORSEMENT = 0x4000000B
ALG_RSA, ALG_ECC, ALG_SHA256, ALG_ECDSA, ALG_NULL = 0x0001, 0x0023, 0x000B, 0x0018, 0x0010
FIXED_TPM, FIXED_PARENT, SENSITIVE_DATA_ORIGIN = 1 << 1, 1 << 4, 1 << 5
RESTRICTED, SIGN = 1 << 16, 1 << 18

results = []


def check(name, cond, why=""):
    results.append(bool(cond))
    print(("ok " + name) if cond else ("FAIL %s: %s" % (name, why)))


class Reader:
    def __init__(self, b):
        self.b, self.off = b, 0

    def take(self, n):
        if self.off + n > len(self.b):
            raise ValueError("truncated at %d (+%d of %d)" % (self.off, n, len(self.b)))
        v = self.b[self.off:self.off + n]
        self.off += n
        return v

    def u8(self):
        return self.take(1)[0]

    def u16(self):
        return struct.unpack(">H", self.take(2))[0]

    def u32(self):
        return struct.unpack(">I", self.take(4))[0]

    def u64(self):
        return struct.unpack(">Q", self.take(8))[0]

    def tpm2b(self):
        return self.take(self.u16())


def parse_attest(b):
    """TPMS_ATTEST with a TPMS_CERTIFY_INFO (Part 2, 10.12)."""
    r = Reader(b)
    a = {"magic": r.u32(), "type": r.u16(), "qualifiedSigner": r.tpm2b(), "extraData": r.tpm2b()}
    a["clock"], a["resetCount"], a["restartCount"], a["safe"] = r.u64(), r.u32(), r.u32(), r.u8()
    a["firmwareVersion"] = r.u64()
    if a["type"] == TPM_ST_ATTEST_CERTIFY:
        a["name"], a["qualifiedName"] = r.tpm2b(), r.tpm2b()
    a["rest"] = len(b) - r.off
    return a


def parse_public(tpm2b):
    """TPM2B_PUBLIC -> dict with type, nameAlg, attributes, public key, and the Name."""
    outer = Reader(tpm2b)
    area = outer.tpm2b()
    if outer.off != len(tpm2b):
        raise ValueError("trailing bytes after TPM2B_PUBLIC")
    r = Reader(area)
    p = {"type": r.u16(), "nameAlg": r.u16(), "attributes": r.u32(), "authPolicy": r.tpm2b()}
    if p["type"] == ALG_ECC:
        sym = r.u16()
        if sym != ALG_NULL:
            r.u16(); r.u16()
        p["scheme"] = r.u16()
        p["schemeHash"] = r.u16() if p["scheme"] != ALG_NULL else None
        p["curve"] = r.u16()
        kdf = r.u16()
        if kdf != ALG_NULL:
            r.u16()
        x, y = r.tpm2b(), r.tpm2b()
        curve = {0x0003: ec.SECP256R1(), 0x0004: ec.SECP384R1()}[p["curve"]]
        p["key"] = ec.EllipticCurvePublicNumbers(int.from_bytes(x, "big"), int.from_bytes(y, "big"), curve).public_key()
    elif p["type"] == ALG_RSA:
        sym = r.u16()
        if sym != ALG_NULL:
            r.u16(); r.u16()
        p["scheme"] = r.u16()
        if p["scheme"] != ALG_NULL:
            r.u16()
        p["bits"], e = r.u16(), r.u32()
        n = r.tpm2b()
        p["key"] = rsa.RSAPublicNumbers(e or 65537, int.from_bytes(n, "big")).public_key()
    else:
        raise ValueError("unknown object type 0x%x" % p["type"])
    if r.off != len(area):
        raise ValueError("trailing bytes in TPMT_PUBLIC")
    if p["nameAlg"] != ALG_SHA256:
        raise ValueError("nameAlg 0x%x, expected SHA-256" % p["nameAlg"])
    p["name"] = struct.pack(">H", ALG_SHA256) + hashlib.sha256(area).digest()
    return p


def spki(key):
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def pem_key(path):
    with open(path, "rb") as f:
        return serialization.load_pem_public_key(f.read())


def tpm2_print_attest(path):
    """tpm2-tools' own reading of the TPMS_ATTEST (5.4 prints the header, then stops at the
    certify body it cannot print: its exit status is not used)."""
    out = subprocess.run(["tpm2_print", "-t", "TPMS_ATTEST", path], capture_output=True, text=True, timeout=30).stdout
    fields = {}
    for line in out.splitlines():
        if ":" in line and not line.startswith(" "):
            k, v = line.split(":", 1)
            fields[k.strip()] = v.strip()
    return fields


def verify_signature(ak, sig, attest):
    """TPMT_SIGNATURE (Part 2, 11.3.4): ECDSA with SHA-256 over the TPMS_ATTEST."""
    r = Reader(sig)
    alg, h = r.u16(), r.u16()
    if alg != ALG_ECDSA or h != ALG_SHA256:
        return False, "signature scheme 0x%x/0x%x, expected ECDSA/SHA-256" % (alg, h)
    sr, ss = r.tpm2b(), r.tpm2b()
    if r.off != len(sig):
        return False, "trailing bytes in TPMT_SIGNATURE"
    der = encode_dss_signature(int.from_bytes(sr, "big"), int.from_bytes(ss, "big"))
    try:
        ak["key"].verify(der, attest, ec.ECDSA(hashes.SHA256()))
        return True, ""
    except InvalidSignature:
        return False, "the AK's signature does not verify over certify.attest"


def verify_cert_signature(cert, issuer):
    pub = issuer.public_key()
    if isinstance(pub, rsa.RSAPublicKey):
        pub.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), cert.signature_hash_algorithm)
    else:
        pub.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))


def verify(attest_b, sig_b, key_b, ak_b, nonce, imported, attest_path, key_pem_path, ak_pem_path):
    try:
        key, ak = parse_public(key_b), parse_public(ak_b)
        a = parse_attest(attest_b)
    except (ValueError, KeyError) as e:
        check("parse", False, str(e))
        return None
    check("parse", True)
    t = tpm2_print_attest(attest_path)
    check("magic", a["magic"] == TPM_GENERATED_VALUE and t.get("magic") == "ff544347",
          "magic %x, tpm2_print %s" % (a["magic"], t.get("magic")))
    check("type", a["type"] == TPM_ST_ATTEST_CERTIFY and t.get("type") == "8017",
          "type %x, tpm2_print %s" % (a["type"], t.get("type")))
    check("nonce", a["extraData"] == nonce and t.get("extraData", "") == nonce.hex(),
          "extraData %s, tpm2_print %s, expected %s" % (a["extraData"].hex(), t.get("extraData"), nonce.hex()))
    check("certified name", a.get("name") == key["name"] and a["rest"] == 0,
          "attested Name %s, Name(key.tpm2b_public) %s" % (a.get("name", b"").hex(), key["name"].hex()))
    # The AK is a primary in the endorsement hierarchy: its qualified name is
    # H(handle of TPM_RH_ENDORSEMENT || Name(AK)).
    qn = struct.pack(">H", ALG_SHA256) + hashlib.sha256(struct.pack(">I", TPM_RH_ENDORSEMENT) + ak["name"]).digest()
    check("signer name", a["qualifiedSigner"] == qn and t.get("qualifiedSigner") == qn.hex(),
          "qualifiedSigner %s, QN(AK) %s" % (a["qualifiedSigner"].hex(), qn.hex()))
    want_ak = FIXED_TPM | FIXED_PARENT | SENSITIVE_DATA_ORIGIN | RESTRICTED | SIGN
    check("ak attributes", ak["attributes"] & want_ak == want_ak and ak["type"] == ALG_ECC and ak["scheme"] == ALG_ECDSA,
          "AK attributes 0x%x" % ak["attributes"])
    good, why = verify_signature(ak, sig_b, attest_b)
    check("signature", good, why)
    born = FIXED_TPM | FIXED_PARENT | SENSITIVE_DATA_ORIGIN
    if imported:
        check("key attributes", key["attributes"] & SENSITIVE_DATA_ORIGIN == 0,
              "sensitiveDataOrigin set on an imported key (0x%x)" % key["attributes"])
    else:
        check("key attributes", key["attributes"] & born == born,
              "key attributes 0x%x lack fixedTPM|fixedParent|sensitiveDataOrigin" % key["attributes"])
    if key_pem_path:
        check("key pem", spki(pem_key(key_pem_path)) == spki(key["key"]), "key.pub.pem is not the TPM object's public key")
    if ak_pem_path:
        check("ak pem", spki(pem_key(ak_pem_path)) == spki(ak["key"]), "ak.pub.pem is not the AK's public key")
    return ak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--nonce", default="")
    ap.add_argument("--root")
    ap.add_argument("--issuer")
    ap.add_argument("--imported", action="store_true")
    ap.add_argument("--container")
    ap.add_argument("--key-pem")
    o = ap.parse_args()
    nonce = bytes.fromhex(o.nonce)
    if o.container:
        with open(o.container, "rb") as f:
            r = Reader(f.read())
        try:
            parts = [r.tpm2b() for _ in range(4)]
            ok = r.off == len(r.b)
        except ValueError:
            ok = False
        check("container", ok, "not four length-prefixed fields")
        if not ok:
            return 1
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "certify.attest")
            with open(path, "wb") as f:
                f.write(parts[0])
            verify(parts[0], parts[1], parts[2], parts[3], nonce, o.imported, path, o.key_pem, None)
        return 0 if all(results) else 1
    d = o.dir
    rd = lambda n: open(os.path.join(d, n), "rb").read()
    ak = verify(rd("certify.attest"), rd("certify.sig"), rd("key.tpm2b_public"), rd("ak.tpm2b_public"), nonce, o.imported,
                os.path.join(d, "certify.attest"), os.path.join(d, "key.pub.pem"), os.path.join(d, "ak.pub.pem"))
    if o.root:
        try:
            with open(os.path.join(d, "ek.crt.pem"), "rb") as f:
                ek_cert = x509.load_pem_x509_certificate(f.read())
            root = x509.load_pem_x509_certificate(open(o.root, "rb").read())
            issuer = x509.load_pem_x509_certificate(open(o.issuer, "rb").read())
            chained = ek_cert.issuer == issuer.subject and issuer.issuer == root.subject
            verify_cert_signature(ek_cert, issuer)
            verify_cert_signature(issuer, root)
            verify_cert_signature(root, root)
            check("ek chain", chained, "issuer names do not chain")
        except (OSError, ValueError, InvalidSignature) as e:
            check("ek chain", False, repr(e))
            ek_cert = None
        if ek_cert is not None:
            check("ek pem", spki(ek_cert.public_key()) == spki(pem_key(os.path.join(d, "ek.pub.pem"))),
                  "ek.crt.pem does not certify ek.pub.pem")
    return 0 if all(results) and ak is not None else 1


if __name__ == "__main__":
    sys.exit(main())
