#!/usr/bin/env python3
"""The independent side of 34-pq-cli.sh's cross-checks (issue 18): dilithium-py (ML-DSA, FIPS 204)
and kyber-py (ML-KEM, FIPS 203), pure Python, installed pinned by hash into a venv
(pq-crosscheck-requirements.txt). Keys travel as SubjectPublicKeyInfo PEM, the form
`keyshare key public` prints and `keyshare key verify/encapsulate --public-key` read; this file
has its own small DER reader and writer so that no other library stands between the two sides.

  pq_crosscheck.py check-fips                      the packages are FIPS 204/203 final (exit 1 if not)
  pq_crosscheck.py mldsa-verify PUB MSG SIG [CTX]   exit 0 when valid, 1 when not (PUB: SPKI PEM or
                                                    the raw FIPS 204 key, as the module's CKA_VALUE)
  pq_crosscheck.py mldsa-sign SET PUB.pem MSG SIG [CTX] new key of SET (44/65/87): writes its
                                                         public key and a signature of MSG
  pq_crosscheck.py mlkem-keygen SET PUB.pem DK          new key of SET (512/768/1024)
  pq_crosscheck.py mlkem-encaps PUB.pem CT SS           encapsulates to PUB
  pq_crosscheck.py mlkem-decaps SET DK CT SS            decapsulates CT with DK
CTX is a file holding the context string. Output files are created, never overwritten.
"""
import base64
import os
import sys

from dilithium_py.ml_dsa import ML_DSA_44, ML_DSA_65, ML_DSA_87
from kyber_py.ml_kem import ML_KEM_512, ML_KEM_768, ML_KEM_1024

NIST = "2.16.840.1.101.3.4"
MLDSA = {f"{NIST}.3.17": ("ML-DSA-44", ML_DSA_44), f"{NIST}.3.18": ("ML-DSA-65", ML_DSA_65),
         f"{NIST}.3.19": ("ML-DSA-87", ML_DSA_87)}
MLKEM = {f"{NIST}.4.1": ("ML-KEM-512", ML_KEM_512), f"{NIST}.4.2": ("ML-KEM-768", ML_KEM_768),
         f"{NIST}.4.3": ("ML-KEM-1024", ML_KEM_1024)}
BY_SET = {"44": f"{NIST}.3.17", "65": f"{NIST}.3.18", "87": f"{NIST}.3.19",
          "512": f"{NIST}.4.1", "768": f"{NIST}.4.2", "1024": f"{NIST}.4.3"}


def die(msg):
    print(f"pq_crosscheck: {msg}", file=sys.stderr)
    sys.exit(2)


def der_read(b, i, tag):
    if i >= len(b) or b[i] != tag:
        die(f"DER: expected tag {tag:#x} at {i}")
    n = b[i + 1]
    i += 2
    if n & 0x80:
        k = n & 0x7F
        n = int.from_bytes(b[i:i + k], "big")
        i += k
    if i + n > len(b):
        die("DER: truncated")
    return b[i:i + n], i + n


def der_len(n):
    if n < 0x80:
        return bytes([n])
    s = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(s)]) + s


def der(tag, body):
    return bytes([tag]) + der_len(len(body)) + body


def oid_decode(b):
    first = b[0]
    parts = [first // 40, first % 40]
    v = 0
    for c in b[1:]:
        v = (v << 7) | (c & 0x7F)
        if not c & 0x80:
            parts.append(v)
            v = 0
    return ".".join(map(str, parts))


def oid_encode(s):
    p = [int(x) for x in s.split(".")]
    out = bytes([p[0] * 40 + p[1]])
    for v in p[2:]:
        chunk = [v & 0x7F]
        v >>= 7
        while v:
            chunk.append(0x80 | (v & 0x7F))
            v >>= 7
        out += bytes(reversed(chunk))
    return out


def read_spki(path):
    """(oid, key bytes) of a PUBLIC KEY PEM: SEQUENCE { SEQUENCE { OID } (no parameters), BIT STRING }."""
    text = open(path).read()
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("-----")]
    if "-----BEGIN PUBLIC KEY-----" not in text:
        die(f"{path}: not a PUBLIC KEY PEM")
    b = base64.b64decode("".join(lines))
    spki, end = der_read(b, 0, 0x30)
    if end != len(b):
        die(f"{path}: trailing data")
    alg, i = der_read(spki, 0, 0x30)
    oid, j = der_read(alg, 0, 0x06)
    if j != len(alg):
        die(f"{path}: the algorithm has parameters (FIPS 204/203 SPKIs have none)")
    bits, i = der_read(spki, i, 0x03)
    if i != len(spki) or bits[0] != 0:
        die(f"{path}: bad BIT STRING")
    return oid_decode(oid), bits[1:]


def write_spki(path, oid, key):
    body = der(0x30, der(0x30, der(0x06, oid_encode(oid))) + der(0x03, b"\0" + key))
    b64 = base64.b64encode(body).decode()
    pem = "-----BEGIN PUBLIC KEY-----\n" + "\n".join(b64[i:i + 64] for i in range(0, len(b64), 64)) \
        + "\n-----END PUBLIC KEY-----\n"
    create(path, pem.encode())


def create(path, data, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def check_fips():
    """FIPS 204 final signs M' = 0 || |ctx| || ctx || M and FIPS 203 final derives K without hashing
    the ciphertext in (round-3 Kyber/Dilithium did neither): both show in the packages' own code."""
    import inspect
    import dilithium_py.ml_dsa.ml_dsa as d
    import kyber_py.ml_kem.ml_kem as k
    src_d = inspect.getsource(d.ML_DSA.sign)
    src_k = inspect.getsource(k.ML_KEM)
    ok = "bytes([0]) + bytes([len(ctx)]) + ctx + m" in src_d and "def _decaps_internal" in src_k
    # The sizes of FIPS 204 table 2 / FIPS 203 table 3 (round-3 Dilithium3 signatures were 3293 bytes).
    pk, sk = ML_DSA_65.keygen()
    sig = ML_DSA_65.sign(sk, b"x")
    ek, dk = ML_KEM_768.keygen()
    key, ct = ML_KEM_768.encaps(ek)
    sizes = (len(pk), len(sk), len(sig), len(ek), len(dk), len(ct), len(key))
    ok = ok and sizes == (1952, 4032, 3309, 1184, 2400, 1088, 32)
    print(f"dilithium-py/kyber-py FIPS 204/203 final: {'yes' if ok else 'no'} (sizes {sizes})")
    return 0 if ok else 1


def main(argv):
    if len(argv) < 2:
        die(__doc__)
    cmd, a = argv[1], argv[2:]
    if cmd == "check-fips":
        return check_fips()
    if cmd == "mldsa-verify":
        if read(a[0]).startswith(b"-----BEGIN"):
            oid, pk = read_spki(a[0])
        else:  # a raw FIPS 204 public key (the module's CKA_VALUE): the set by its length
            pk = read(a[0])
            oid = {1312: BY_SET["44"], 1952: BY_SET["65"], 2592: BY_SET["87"]}.get(len(pk), "raw key of unknown length")
        if oid not in MLDSA:
            die(f"{a[0]}: not an ML-DSA key ({oid})")
        ctx = read(a[3]) if len(a) > 3 else b""
        valid = MLDSA[oid][1].verify(pk, read(a[1]), read(a[2]), ctx=ctx)
        print(f"{MLDSA[oid][0]} signature {'valid' if valid else 'invalid'}")
        return 0 if valid else 1
    if cmd == "mldsa-sign":
        oid = BY_SET[a[0]]
        alg = MLDSA[oid][1]
        pk, sk = alg.keygen()
        ctx = read(a[4]) if len(a) > 4 else b""
        write_spki(a[1], oid, pk)
        create(a[3], alg.sign(sk, read(a[2]), ctx=ctx))
        return 0
    if cmd == "mlkem-keygen":
        oid = BY_SET[a[0]]
        ek, dk = MLKEM[oid][1].keygen()
        write_spki(a[1], oid, ek)
        create(a[2], dk, 0o600)
        return 0
    if cmd == "mlkem-encaps":
        oid, ek = read_spki(a[0])
        if oid not in MLKEM:
            die(f"{a[0]}: not an ML-KEM key ({oid})")
        key, ct = MLKEM[oid][1].encaps(ek)
        create(a[1], ct)
        create(a[2], key, 0o600)
        return 0
    if cmd == "mlkem-decaps":
        oid = BY_SET[a[0]]
        create(a[3], MLKEM[oid][1].decaps(read(a[1]), read(a[2])), 0o600)
        return 0
    die(f"unknown command {cmd}")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
