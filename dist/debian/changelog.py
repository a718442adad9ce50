#!/usr/bin/env python3
"""CHANGELOG.md -> debian/changelog (the package's /usr/share/doc/keyshare/changelog.gz).

CHANGELOG.md is the one record of user-visible changes; this only re-formats
it, so the two never disagree. Each `## X.Y.Z` section becomes one entry: its
paragraphs become `  * ` items and its list items `    - ` items under the
paragraph before them, wrapped at 78 columns. An entry's date is that of the
commit that added its heading (else DATE).

usage: changelog.py CHANGELOG.md VERSION DEB_VERSION MAINTAINER DATE
  VERSION      KeyshareVersion; CHANGELOG.md must have a section for it.
  DEB_VERSION  the package's version; when it differs (VERSION_OVERRIDE, the
               upgrade test), a first entry says it is a test build.
  DATE         RFC 2822 date (the last commit's).
"""
import re
import subprocess
import sys
import textwrap


def sections(text):
    """[(version, [blocks])]: a block is ('para', text) or ('item', text)."""
    out = []
    current = None
    block = None
    for line in text.splitlines():
        heading = re.match(r"^## +(\S+)\s*$", line)
        if heading:
            current = (heading.group(1), [])
            out.append(current)
            block = None
            continue
        if current is None or line.startswith("#"):
            continue
        if not line.strip():
            block = None
            continue
        item = re.match(r"^[-*] +(.*)$", line)
        if item:
            block = ["item", item.group(1)]
            current[1].append(block)
        elif block is None:
            block = ["para", line.strip()]
            current[1].append(block)
        else:
            block[1] += " " + line.strip()
    return out


def heading_date(path, version, fallback):
    try:
        dates = subprocess.run(
            ["git", "log", "--reverse", "--format=%aD", "-S", "## " + version, "--", path],
            capture_output=True, text=True, check=True).stdout.split("\n")
        return dates[0] if dates[0] else fallback
    except (OSError, subprocess.CalledProcessError):
        return fallback


# Never split a word (`keyshare-token-create`, URLs) across lines.
WRAP = {"break_on_hyphens": False, "break_long_words": False}


def entry(version, blocks, maintainer, date):
    lines = [f"keyshare ({version}) unstable; urgency=medium", ""]
    under_para = False
    for kind, text in blocks:
        if kind == "para" or not under_para:
            lines += textwrap.wrap(text, 78, initial_indent="  * ", subsequent_indent="    ", **WRAP)
            under_para = kind == "para"
        else:
            lines += textwrap.wrap(text, 78, initial_indent="    - ", subsequent_indent="      ", **WRAP)
    lines += ["", f" -- {maintainer}  {date}", ""]
    return "\n".join(lines)


def main():
    path, version, deb_version, maintainer, date = sys.argv[1:6]
    found = sections(open(path, encoding="utf-8").read())
    if not any(v == version for v, _ in found):
        sys.exit(f"changelog.py: {path} has no '## {version}' section: record the release's changes first")
    out = []
    if deb_version != version:
        out.append(entry(deb_version, [("para",
            f"Test build of keyshare {version}, packaged as {deb_version} (make deb "
            f"VERSION_OVERRIDE={deb_version}) for the upgrade test; never released.")],
            maintainer, date))
    for v, blocks in found:
        if not blocks:
            sys.exit(f"changelog.py: the '## {v}' section of {path} is empty")
        out.append(entry(v, blocks, maintainer, heading_date(path, v, date)))
    sys.stdout.write("\n".join(out))


if __name__ == "__main__":
    main()
