#!/usr/bin/env python3
"""Searches a core file for a private key's bytes (75-agent-core.sh, issue 16).

usage: key_needles.py CORE KEY.pem...

The needles, for each key: its PKCS #8 DER whole, and every 32-byte window
of it (stride 16) that is not also in the key's public parts (the
SubjectPublicKeyInfo DER: a host holds the public key, and the modulus or
point sits inside the PKCS #8); and every private component of 16 bytes or
more (RSA d, p, q, dp, dq, qinv; the EC private scalar), whole, in both byte
orders (DER and OpenSSL's BIGNUM are big-endian, BIGNUM limbs in memory
little-endian). Prints "N needles, M found: names" and exits 0 when any
needle is in the core, 1 when none is, 2 on a usage error.
"""
import sys

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa


def be(n):
    return n.to_bytes((n.bit_length() + 7) // 8, "big")


def needles(path):
    key = serialization.load_pem_private_key(open(path, "rb").read(), password=None)
    name = path.rsplit("/", 1)[-1].split(".")[0]
    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    spki = key.public_key().public_bytes(serialization.Encoding.DER,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)
    out = [(f"{name} PKCS#8 DER", der)]
    for off in range(0, len(der) - 32 + 1, 16):
        w = der[off:off + 32]
        if w not in spki:
            out.append((f"{name} PKCS#8[{off}:{off + 32}]", w))
    if isinstance(key, rsa.RSAPrivateKey):
        n = key.private_numbers()
        comps = {"d": n.d, "p": n.p, "q": n.q, "dp": n.dmp1, "dq": n.dmq1, "qinv": n.iqmp}
    elif isinstance(key, ec.EllipticCurvePrivateKey):
        comps = {"scalar": key.private_numbers().private_value}
    else:
        raise SystemExit(f"{path}: not an RSA or EC key")
    for c, v in comps.items():
        b = be(v)
        if len(b) >= 16:
            out.append((f"{name} {c}", b))
            out.append((f"{name} {c} (little-endian)", b[::-1]))
    return out


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    core = open(sys.argv[1], "rb").read()
    all_needles = [n for path in sys.argv[2:] for n in needles(path)]
    found = [name for name, b in all_needles if b in core]
    print(f"{len(all_needles)} needles, {len(found)} found: {', '.join(found[:6]) or 'none'}")
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main())
