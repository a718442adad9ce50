#!/usr/bin/env python3
"""dist/man/generate.py KEYSHARE OUTDIR DATE VERSION

The manual pages. keyshare(1) and one page per subcommand, in man(7), titled
"keyshare Manual":

  - NAME, SYNOPSIS, the DESCRIPTION's first part and OPTIONS come from the
    argument parser's own definitions (`keyshare --experimental-dump-help`),
    so they cannot drift from the program;
  - EXAMPLES (required: a page without one is an error), additions to the
    DESCRIPTION, ENVIRONMENT, FILES, EXIT STATUS and SEE ALSO are written by
    hand in dist/man/commands/*.man, one `@page NAME` block per page;
  - ENVIRONMENT, FILES and EXIT STATUS have a common part every command shares.

Fragment syntax (dist/man/commands/*.man): `@page keyshare-token-create`
starts a page's block; `@section EXAMPLES` starts one of its sections. Inside,
lines starting with `$ ` are commands (shown as typed, in an indented
literal block), lines starting with `.` are roff requests passed through, and
other lines are prose (roff text: \\fB...\\fR allowed; a leading hyphen of a
word becomes \\-, as option names must). Blank lines separate paragraphs.

The hand-written concept pages (keyshare-pkcs11(7), keyshare-security(7)) are
plain man(7) files in dist/man/; @DATE@ and @VERSION@ are filled in here.
Page names follow the git/Debian convention: keyshare-token-create(1).
"""
import glob
import json
import os
import re
import subprocess
import sys

TITLE = "keyshare Manual"
ORDER = ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"]
HAND_SECTIONS = {"DESCRIPTION", "EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"}
SKIP = {"keyshare help"}  # the parser's help pseudo-command: `keyshare help X` is `keyshare X --help`


def fail(msg):
    sys.exit("generate.py: " + msg)


def hyphens(text):
    """A hyphen that starts a word (an option name) is a minus sign: \\-."""
    text = re.sub(r"(?<![A-Za-z0-9\\])-", r"\\-", text)
    return re.sub(r"\\f([BIR])-", r"\\f\1\\-", text)


def escape(text):
    """Text from the parser: backslashes escaped, `code` bold, leading hyphens."""
    text = text.replace("\\", "\\e")
    text = re.sub(r"`([^`]+)`", r"\\fB\1\\fR", text)
    text = "".join(c if ord(c) < 128 else "\\[u%04X]" % ord(c) for c in text)
    return hyphens(text)


def wrap(text, width=78):
    """Prose as roff text lines of at most `width` bytes; no line starts with . or '."""
    out, line = [], ""
    for word in text.split():
        if line and len(line.encode()) + 1 + len(word.encode()) > width:
            out.append(line)
            line = word
        else:
            line = (line + " " + word) if line else word
    if line:
        out.append(line)
    return ["\\&" + l if l[:1] in (".", "'") else l for l in out]


def paragraphs(text):
    """The parser's discussion: paragraphs split at blank lines, lines joined."""
    paras = [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    return [wrap(escape(" ".join(p.split()))) for p in paras]


def shell_lines(command, width=76):
    """One example command as literal lines of at most `width` bytes: a long one
    is broken at spaces into shell continuation lines (\\ at the end, indented)."""
    words, lines, line = command.split(" "), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width - 2:
            lines.append(line + " \\")
            line = "    " + word
        else:
            line = (line + " " + word) if line else word
    lines.append(line)
    out = []
    for l in lines:
        l = l.replace("\\", "\\e").replace("-", "\\-")
        out.append(("\\&" + l) if l[:1] in (".", "'") else l)
    return out


def tidy(lines):
    """No empty paragraph: a .PP right before another paragraph or section macro,
    right after a heading, or at a section's end is dropped."""
    out = []
    for i, l in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ".SH"
        if l == ".PP" and (nxt.split(" ")[0] in (".PP", ".SS", ".SH", ".TP", ".IP")
                           or (out and out[-1].split(" ")[0] in (".SH", ".SS", ".PP"))):
            continue
        out.append(l)
    return out


def render_fragment(lines):
    """A hand-written section body (see the module's doc) as roff lines."""
    out, in_example = [], False
    for raw in lines:
        if raw.startswith("$ "):
            if not in_example:
                out += [".PP", ".RS 4", ".EX"]
                in_example = True
            out += shell_lines(raw[2:])
            continue
        if in_example:
            out += [".EE", ".RE"]
            in_example = False
        if not raw.strip():
            if out and out[-1] not in (".PP", ""):
                out.append(".PP")
        elif raw.startswith("."):
            out.append(raw)
        else:
            # A page reference is never hyphenated at a line end (\\%).
            out += wrap(re.sub(r"(?<!\\%)(\\fB(?:[^\\ ]|\\-)+\\fR\(\d\))", r"\\%\1", hyphens(raw)))
    if in_example:
        out += [".EE", ".RE"]
    while out and out[-1] == ".PP":
        out.pop()
    while out and out[0] == ".PP":
        out.pop(0)
    return out


def load_fragments(directory):
    """{page: {SECTION: [lines]}} from every *.man file of `directory`."""
    pages, page, section = {}, None, None
    for path in sorted(glob.glob(os.path.join(directory, "*.man"))):
        for n, line in enumerate(open(path, encoding="utf-8").read().split("\n"), 1):
            if line.startswith("@page "):
                page = line.split()[1]
                if page in pages:
                    fail(f"{path}:{n}: page {page} twice")
                pages[page], section = {}, None
            elif line.startswith("@section "):
                section = line[len("@section "):].strip()
                if page is None or section not in HAND_SECTIONS:
                    fail(f"{path}:{n}: section {section!r} outside a page or not hand-written")
                pages[page].setdefault(section, [])
            elif line.startswith("#"):
                continue  # a comment for the writer
            elif page is not None and section is not None:
                pages[page][section].append(line)
            elif line.strip():
                fail(f"{path}:{n}: text outside a section")
    return pages


def names_of(arg):
    return ", ".join(("-" if n["kind"] == "short" else "--") + n["name"] for n in arg.get("names") or [])


def visible(args, root):
    """The arguments a page lists: --version only on keyshare(1)."""
    return [a for a in args if a.get("shouldDisplay", True) and (root or names_of(a) != "--version")]


def synopsis_item(arg):
    value = arg.get("valueName") or "value"
    if arg["kind"] == "positional":
        item = f"\\fI{escape(value)}\\fR"
    else:
        pref = arg.get("preferredName") or arg["names"][0]
        name = ("\\-" if pref["kind"] == "short" else "\\-\\-") + escape(pref["name"]).replace("\\-", "-").replace("-", "\\-")
        item = f"\\fB{name}\\fR" + (f" \\fI{escape(value)}\\fR" if arg["kind"] == "option" else "")
    if arg.get("isRepeating"):
        item += " \\&..."
    return f"[{item}]" if arg.get("isOptional") else item


def option_entry(arg):
    if arg["kind"] == "positional":
        head = f"\\fI{escape(arg.get('valueName') or 'value')}\\fR"
    else:
        head = ", ".join(f"\\fB{hyphens(n)}\\fR" for n in names_of(arg).split(", "))
        if arg["kind"] == "option":
            head += f" \\fI{escape(arg.get('valueName') or 'value')}\\fR"
    body = []
    text = arg.get("abstract") or ""
    if arg.get("allValues") and arg["kind"] == "option":
        text += (" " if text else "") + "One of: " + ", ".join(arg["allValues"]) + "."
    if arg.get("defaultValue") not in (None, ""):
        text += (" " if text else "") + f"Default: {arg['defaultValue']}."
    body += wrap(escape(text)) if text else []
    for p in paragraphs(arg.get("discussion") or "") if isinstance(arg.get("discussion"), str) else []:
        body += [".IP"] + p
    return [".TP", head] + (body or ["(no description)"])


def xref(name, section=1):
    return f"\\%\\fB{hyphens(name)}\\fR({section})"  # \\%: never hyphenated at a line end


COMMON_EXIT = [
    ".TP", "0", "Success.",
    ".TP", "1", "The command failed; one line on standard error says why.",
    ".TP", "64",
    "A usage error: an unknown option, a missing argument or a mistyped",
    "subcommand (the line suggests the right one).",
]

COMMON_ENV = [
    ".TP", ".B KEYSHARE_HOME",
    "The store's directory (default: \\fI$XDG_DATA_HOME/keyshare\\fR, else",
    "\\fI~/.local/share/keyshare\\fR).",
]

COMMON_FILES = [
    ".TP", ".I $KEYSHARE_HOME/keychain.db",
    "The store: tokens, items and policy (SQLite, mode 0600, in a 0700 directory).",
]


def page_for(cmd, path, parent, fragments, date, version):
    typed = " ".join(path)
    name = "-".join(path)
    root = len(path) == 1
    hand = fragments.pop(name, None)
    if hand is None or not hand.get("EXAMPLES"):
        fail(f"{name}: no hand-written EXAMPLES (dist/man/commands/*.man, @page {name})")
    subs = [s for s in cmd.get("subcommands") or [] if s.get("shouldDisplay", True)
            and " ".join(path + [s["commandName"]]) not in SKIP]
    args = visible(cmd.get("arguments") or [], root)
    out = [f'.\\" Generated by dist/man/generate.py from `{typed} --experimental-dump-help`',
           '.\\" and dist/man/commands/*.man; do not edit.',
           '.TH %s 1 "%s" "keyshare %s" "%s"' % (name.upper().replace("-", "\\-"), date, version, TITLE),
           ".SH NAME"] + wrap(f"{hyphens(name)} \\- {escape((cmd.get('abstract') or typed).rstrip('.'))}") + [
           ".SH SYNOPSIS", ".nh", ".ad l"]
    if subs:
        out.append(f"\\fB{hyphens(typed)}\\fR \\fIcommand\\fR [\\fIoptions\\fR]")
    else:
        syn = " ".join([f"\\fB{hyphens(typed)}\\fR"] + [synopsis_item(a) for a in args if names_of(a) not in ("-h, --help", "--version")])
        out += wrap(syn)
    out += [".ad", ".hy"]
    out += [".SH DESCRIPTION"] + wrap(escape(cmd.get("abstract") or ""))
    for p in paragraphs(cmd.get("discussion") or ""):
        out += [".PP"] + p
    if hand.get("DESCRIPTION"):
        out += [".PP"] + render_fragment(hand["DESCRIPTION"])
    if subs:
        # After subsections of the hand-written part, the list needs a heading of its own.
        titled = any(l.startswith(".SS") for l in hand.get("DESCRIPTION", []))
        out += [".SS Commands"] if titled else [".PP", "The commands:"]
        for s in subs:
            out += [".TP", f"\\fB{hyphens(s['commandName'])}\\fR", *wrap(escape(s.get("abstract") or "")),
                    f"See {xref(name + '-' + s['commandName'])}."]
    out.append(".SH OPTIONS")
    for a in args:
        out += option_entry(a)
    out += [".SH EXIT STATUS"] + (render_fragment(hand["EXIT STATUS"]) if hand.get("EXIT STATUS") else COMMON_EXIT)
    out += [".SH ENVIRONMENT"] + COMMON_ENV + render_fragment(hand.get("ENVIRONMENT", []))
    if not root:
        out += [".PP", f"The other variables are in {xref('keyshare')}."]
    out += [".SH FILES"] + COMMON_FILES + render_fragment(hand.get("FILES", []))
    out += [".SH EXAMPLES"] + render_fragment(hand["EXAMPLES"])
    see = ([] if root else ["keyshare"]) + ([parent] if parent and parent != "keyshare" else [])
    see += [name + "-" + s["commandName"] for s in subs]
    refs = [xref(s) for s in see]
    extra = " ".join(l.strip() for l in hand.get("SEE ALSO", []) if l.strip())
    for m in re.finditer(r"([A-Za-z0-9_.+-]+)\((\d[a-z]*)\)", extra):
        if m.group(1) not in see:
            refs.append(xref(m.group(1), m.group(2)))
    out += [".SH SEE ALSO"] + wrap(", ".join(refs))
    pages = [(name, "\n".join(tidy(out)) + "\n")]
    for s in subs:
        pages += page_for(s, path + [s["commandName"]], name, fragments, date, version)
    return pages


def main():
    if len(sys.argv) != 5:
        fail("usage: generate.py KEYSHARE OUTDIR DATE VERSION")
    keyshare, outdir, date, version = sys.argv[1:]
    here = os.path.dirname(os.path.abspath(__file__))
    dump = json.loads(subprocess.run([keyshare, "--experimental-dump-help"], check=True,
                                     capture_output=True, text=True).stdout)
    fragments = load_fragments(os.path.join(here, "commands"))
    pages = page_for(dump["command"], ["keyshare"], None, fragments, date, version)
    if fragments:
        fail("hand-written blocks for pages that do not exist: " + ", ".join(sorted(fragments)))
    os.makedirs(os.path.join(outdir, "man1"), exist_ok=True)
    os.makedirs(os.path.join(outdir, "man7"), exist_ok=True)
    for name, text in pages:
        with open(os.path.join(outdir, "man1", name + ".1"), "w", encoding="utf-8") as f:
            f.write(text)
    concept = 0
    for src in sorted(glob.glob(os.path.join(here, "keyshare-*.7"))):
        text = open(src, encoding="utf-8").read().replace("@DATE@", date).replace("@VERSION@", version)
        with open(os.path.join(outdir, "man7", os.path.basename(src)), "w", encoding="utf-8") as f:
            f.write(text)
        concept += 1
    print(f"{len(pages)} {concept}")


if __name__ == "__main__":
    main()
