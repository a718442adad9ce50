#!/usr/bin/env python3
"""check_copyright.py COPYRIGHT OPENSSL_DEB_VERSION [--static-openssl] [--icu] [--zipfoundation]

Checks a Debian copyright file as keyshare ships it (issue 28): machine-readable
(DEP-5: the Format URI, paragraphs of Field: value lines with continuation lines),
keyshare itself (Files: *) under Apache-2.0 by "keyshare developers", every
license short name used by a Files paragraph defined by a stand-alone License
paragraph, no license left unstated, and one paragraph per component linked in
statically: OpenSSL (Apache-2.0, naming the bundled Debian version and saying it
is linked statically, when --static-openssl), the Swift runtime (Apache-2.0 with
the Swift exception), swift-argument-parser; ICU (Unicode-3.0) and ZIPFoundation
(MIT) exactly when the binary links them (--icu, --zipfoundation: the CLI links
neither since issue 28's size work, and the file must not name what is not in it).
Prints one "ok"/"FAIL" line per check; exit status 1 if any failed.
"""
import re
import sys


def paragraphs(text):
    out, cur, last = [], {}, None
    for line in text.split("\n"):
        if not line.strip():
            if cur:
                out.append(cur)
            cur, last = {}, None
        elif line[0] in " \t":
            if last is None:
                raise ValueError(f"continuation line outside a field: {line!r}")
            cur[last] += "\n" + line.strip()
        else:
            m = re.match(r"^([A-Za-z][A-Za-z0-9-]*):\s?(.*)$", line)
            if not m:
                raise ValueError(f"not a field: {line!r}")
            last = m.group(1)
            if last in cur:
                raise ValueError(f"field {last} twice in one paragraph")
            cur[last] = m.group(2)
    if cur:
        out.append(cur)
    return out


def main():
    path, version = sys.argv[1], sys.argv[2]
    static = "--static-openssl" in sys.argv[3:]
    has_icu = "--icu" in sys.argv[3:]
    has_zipfoundation = "--zipfoundation" in sys.argv[3:]
    failed = 0

    def check(name, cond, detail=""):
        nonlocal failed
        print(("ok   - " if cond else "FAIL - ") + name + ("" if cond else f": {str(detail)[:300]}"))
        failed += 0 if cond else 1

    text = open(path, encoding="utf-8").read()
    try:
        paras = paragraphs(text)
    except ValueError as e:
        check("copyright parses as DEP-5 paragraphs", False, str(e))
        return 1
    header = paras[0]
    check("DEP-5 Format line", header.get("Format") == "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/",
          header.get("Format"))
    files = [p for p in paras[1:] if "Files" in p]
    licenses = {p["License"].split("\n")[0].strip(): p for p in paras[1:] if "Files" not in p and "License" in p}
    own = [p for p in files if p["Files"].strip() == "*"]
    check("Files: * is keyshare, Apache-2.0, by the keyshare developers",
          len(own) == 1 and own[0].get("License") == "Apache-2.0" and "keyshare developers" in own[0].get("Copyright", ""),
          own)
    used = {p.get("License", "").split("\n")[0].strip() for p in files}
    check("every license used has its own License paragraph", used <= set(licenses) and "" not in used,
          sorted(used - set(licenses)))
    check("no license left unstated", "unstated" not in text.lower())

    def component(needle):
        return [p for p in files if needle.lower() in (p["Files"] + " " + p.get("Comment", "")).lower()]

    ossl = component("openssl")
    check("OpenSSL has its paragraph, Apache-2.0, with its copyright", len(ossl) == 1 and ossl[0].get("License") == "Apache-2.0"
          and "OpenSSL Project Authors" in ossl[0].get("Copyright", ""), ossl)
    if ossl:
        comment = ossl[0].get("Comment", "").replace("\n", " ")
        check(f"OpenSSL: the bundled Debian version {version} is named", version in comment, comment)
        if static:
            check("OpenSSL: linked statically, as this build is", "linked statically" in comment
                  and "linked dynamically from" not in text, comment)
    swift = component("swift_static/*")
    check("the Swift runtime and Foundation: Apache-2.0 with Swift exception",
          len(swift) == 1 and swift[0].get("License") == "Apache-2.0 with Swift exception", swift)
    icu = component("FoundationICU")
    if has_icu:
        check("ICU: Unicode-3.0", len(icu) == 1 and icu[0].get("License") == "Unicode-3.0", icu)
    else:
        check("ICU is not linked and not named", not icu, icu)
    sap = component("swift-argument-parser")
    check("swift-argument-parser: Apache-2.0 with Swift exception",
          len(sap) == 1 and sap[0].get("License") == "Apache-2.0 with Swift exception", sap)
    zf = component("ZIPFoundation")
    if has_zipfoundation:
        check("ZIPFoundation: MIT", len(zf) == 1 and zf[0].get("License") == "MIT", zf)
    else:
        check("ZIPFoundation is not linked and not named", not zf, zf)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
