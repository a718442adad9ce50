#!/usr/bin/env python3
"""Lint: no PIN, password or key on a command line (the project rule).

Every local user reads every process's argv in `ps` (/proc/PID/cmdline), so a
secret must reach a program through the environment (`--pin env:VAR`,
`-passin env:VAR`, `--pin-source env:VAR`), a file or a pipe
(`pin-source=file:/dev/fd/3`, `certutil -f <(printf ...)`), never as an
argument. This scans the repository's tests, benchmarks, examples, Makefile,
.ci and the shell snippets of README.md and docs/*.md for the forms that put
one there, and prints FILE:LINE: RULE for each hit; never the line itself, so
the lint does not print the secrets it finds.

Usage: lint_argv_secrets.py [--waivers FILE] ROOT [PATH...]   (PATHs: scan
only these, relative to ROOT or absolute; the 09 test uses this for its planted
examples). Each hit is FILE:LINE: [FINGERPRINT] RULES; a waiver file lists
FILE<TAB>FINGERPRINT<TAB>WHY for hits another change owns.
Exit status: 0 when nothing is found (waived hits aside), 1 otherwise.
"""
import hashlib
import os
import re
import sys

# Shell variables that hold a secret, by the last part of their name: ...PIN
# (SOPIN, CARDPIN, DEMO_USER_PIN, PIN_A), ...PASS but not PASS itself (P12PASS;
# lib.sh's PASS counts passed checks), ...PW (PW, SPW), PASSWORD, PASSWD,
# PASSPHRASE, ...SECRET. SSH_ASKPASS names a program, not a secret.
def secret_name(name):
    low = name.lower()
    if "askpass" in low:
        return False
    parts = low.split("_")
    if len(parts) > 1 and re.fullmatch(r"[a-z]|\d+", parts[-1]):
        parts = parts[:-1]          # PIN_A, PIN_2
    last = re.sub(r"\d+$", "", parts[-1])
    return (last.endswith("pin") or (last.endswith("pass") and last != "pass") or last.endswith("pw")
            or last in ("password", "passwd", "passphrase") or last.endswith("secret"))


# --pin/--so-pin/--new-pin/--puk (pkcs11-tool; also softhsm2-util and others)
# followed by a value, in shell (`--pin 0000`, `--pin=$PIN`) or in a list of
# arguments (`"--pin", "1111"`). Only `env:VAR` is allowed (pkcs11-tool reads
# the variable); `--pin-source` and `--so-pin-source` are other options.
PIN_OPTION = re.compile(r"""--(pin|so-pin|new-pin|puk|so-puk)(?:=|\s+|["']\s*,\s*)(["']?)([^\s"',)\]]*)""")
PASSWORD_OPTION = re.compile(r"""--(password|passphrase|passwd|new-password|old-password)(?:=|\s+|["']\s*,\s*)(["']?)([^\s"',)\]]*)""")
OPENSSL_PASS = re.compile(r"""-pass(?:in|out|word)?\b["']?(?:\s*,\s*["']?|\s+|=)["']?pass:|(?:^|["'\s=(,])pass:""")
PIN_VALUE = re.compile(r"pin-value=")
SOFTHSM_PIN = re.compile(r"softhsm2-util\b.*--(pin|so-pin)\b")
SSH_KEYGEN_PASS = re.compile(r"""ssh-keygen\b.*\s-[PN]\s*(["']?)([^\s"']+)""")
ENV_COMMAND = re.compile(r"""(?:^|[\s;&|(`"'])(env|sudo|setpriv|nice|timeout|strace)\s""")
ASSIGN_WORD = re.compile(r"""^([A-Za-z_][A-Za-z0-9_]*)=""")
EXPANSION = re.compile(r"""\$\{?([A-Za-z_][A-Za-z0-9_]*)""")
C_PIN_FROM_ARGV = re.compile(r"""(?i)(C_Login\s*\([^;]*\bargv\s*\[|\b\w*pin\w*\s*=\s*argv\s*\[)""")

# Shell builtins and keywords that neither start a process nor print: a secret
# expanded in their arguments stays in the shell.
QUIET_BUILTINS = {"[", "[[", "test", "export", "local", "declare", "typeset", "readonly", "read", ":",
                  "return", "unset", "case", "shift", "exit", "wait", "kill", "trap", "for", "select"}
KEYWORDS = {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "}", "time", "fi", "done", "&&", "||"}
# echo and printf print; so do ok and bad (Tests/integration/lib.sh).
PRINTERS = {"echo", "printf", "ok", "bad"}


def allowed_value(quote, value):
    """A pin/password option's value that is not a secret: env:VAR, or nothing
    (the next word is another option: the program prompts)."""
    return value.startswith("env:") or value == "" or (value.startswith("-") and not quote)


def split_commands(line):
    """Rough simple-command split of one shell line (good enough for a lint):
    [(segment, delimiter before it, delimiter after it)], split on pipes and
    lists, with command and process substitutions and parentheses as nested
    segments; single-quoted text is opaque."""
    segs, stack, sq, i = [], [{"buf": "", "before": "", "dq": False}], False, 0

    def close(after):
        top = stack[-1]
        segs.append((top["buf"], top["before"], after))

    while i < len(line):
        c, top = line[i], stack[-1]
        if sq:
            top["buf"] += c
            sq = c != "'"
            i += 1
            continue
        if c == "\\":
            top["buf"] += line[i:i + 2]
            i += 2
            continue
        if c == "'" and not top["dq"]:
            sq = True
        elif c == '"':
            top["dq"] = not top["dq"]
        two = line[i:i + 2]
        if two in ("$(", "<(", ">(") or (c == "(" and not top["dq"]):
            opener = two if two in ("$(", "<(", ">(") else "("
            top["buf"] += " "
            stack.append({"buf": "", "before": opener, "dq": False})
            i += len(opener)
            continue
        if c == ")" and len(stack) > 1 and not top["dq"]:
            close(")")
            stack.pop()
            i += 1
            continue
        if not top["dq"]:
            d = next((d for d in ("||", "&&", ";;", "|", ";", "`") if line.startswith(d, i)), None)
            if d:
                close(d)
                top["buf"], top["before"] = "", d
                i += len(d)
                continue
        top["buf"] += c
        i += 1
    while stack:
        close("")
        stack.pop()
    return [s for s in segs if s[0].strip()]


def unquoted_expansions(text, start=0):
    """Names of the variables the shell expands in text from index start on
    (not those in single quotes: `printf '...$VAR...'` writes the name, not
    the value)."""
    names, sq = [], False
    for i, c in enumerate(text):
        if c == "'":
            sq = not sq
        elif c == "$" and not sq and i >= start:
            m = EXPANSION.match(text, i)
            if m:
                names.append(m.group(1))
    return names


def words(segment):
    return segment.replace('"', "").replace("'", "").split()


# A case label (`pin)`, `pin/"exit 0")`, `a|b)`) before a command.
_W = r"""(?:[^\s()"']|"[^"]*"|'[^']*')+"""
CASE_LABEL = re.compile(r"^\s*" + _W + r"(?:\|" + _W + r")*\)(?=\s|$)")
FUNC_DEF = re.compile(r"^\s*(?:function\s+)?([A-Za-z_][\w-]*)\s*\(\)\s*\{?(.*)$")


def functions(text):
    """name -> body of the shell functions defined in text (one-line bodies, or
    up to a line that is a lone closing brace)."""
    out, lines = {}, text.split("\n")
    for n, l in enumerate(lines):
        m = FUNC_DEF.match(l)
        if not m:
            continue
        body = m.group(2)
        if not re.search(r"\}\s*(#.*)?$", body):
            for more in lines[n + 1:]:
                if re.match(r"^\s*\}\s*$", more):
                    break
                body += "\n" + more
        out[m.group(1)] = body
    return out


class Shell:
    """What the shell rules know of one file: its functions (and lib.sh's)."""

    def __init__(self, funcs):
        self.funcs, self.memo = funcs, {}

    def passes_on(self, name, seen=()):
        """True when function name hands its arguments ("$@", "$*") to a
        program (ks, check): its callers' arguments end up in an argv."""
        if name in self.memo:
            return self.memo[name]
        if name in seen:
            return False
        result = False
        for line in self.funcs[name].split("\n"):
            for seg, _, _ in split_commands(line):
                if not re.search(r"\$\{?[@*]", seg):
                    continue
                cmd = self.command(words(seg))
                if cmd is None or cmd in QUIET_BUILTINS or cmd in PRINTERS:
                    continue
                if cmd in self.funcs and not self.passes_on(cmd, seen + (name,)):
                    continue
                result = True
        self.memo[name] = result
        return result

    @staticmethod
    def command(ws):
        k = 0
        while k < len(ws) and (ws[k] in KEYWORDS or ws[k].endswith("()") or ASSIGN_WORD.match(ws[k])):
            k += 1
        return ws[k] if k < len(ws) else None


def shell_rules(line, hits, shell):
    """Rules that need the shell's command structure: secret-named variables
    expanded into a program's argv, printed to the output, or written into a
    script."""
    if "#!" in line and any(secret_name(n) for n in unquoted_expansions(line, line.index("#!"))):
        hits.append("a secret written into a script file (let the script print an environment variable)")
        return
    for seg, before, after in split_commands(line):
        seg = CASE_LABEL.sub("", seg, count=1)
        ws = words(seg)
        # Leading keywords, function heads and assignments (`A=$PIN cmd` is an
        # environment entry of cmd, not an argument).
        k = 0
        while k < len(ws) and (ws[k] in KEYWORDS or ws[k].endswith("()") or ASSIGN_WORD.match(ws[k])):
            k += 1
        if k >= len(ws):
            continue
        cmd, rest = ws[k], " ".join(ws[k + 1:])
        if cmd in QUIET_BUILTINS or cmd.startswith("#"):
            continue
        if cmd in shell.funcs and cmd not in PRINTERS and not shell.passes_on(cmd):
            continue  # a function of the script: its body is checked where it uses its arguments
        # `${#PW}` is a length, `${!name}` an indirection, `${s//$PIN/****}` a mask.
        names = [n for n in EXPANSION.findall(rest) if secret_name(n)
                 and not re.search(r"\$\{[#!]" + re.escape(n) + r"\b", rest)
                 and not re.search(r"\$\{\w+//?[^}]*\$\{?" + re.escape(n) + r"\b", rest)]
        if not names:
            continue
        if cmd in PRINTERS:
            # Into a file, a pipe, a variable or a process substitution is not the output.
            if re.search(r"(^|[^<0-9&])>{1,2}", seg) or after == "|" or before in ("<(", "$("):
                continue
            hits.append(f"a secret variable printed to the output (${names[0]})")
            continue
        hits.append(f"a secret variable on a command line (${names[0]} in the arguments of {cmd})")


def env_rule(line, hits):
    """`env VAR=secret cmd`, `setpriv ... env -i PIN=...`: the assignments are env's argv."""
    for m in ENV_COMMAND.finditer(line):
        if m.group(1) != "env":
            continue
        for w in line[m.end():].split():
            w = w.strip("\"'")
            if w.startswith("-"):
                continue
            a = ASSIGN_WORD.match(w)
            if not a:
                break
            if secret_name(a.group(1)):
                hits.append(f"a secret in env's arguments ({a.group(1)}=...)")
                return


def line_rules(path, line, kind, shell=None):
    hits = []
    for m in PIN_OPTION.finditer(line):
        if not allowed_value(m.group(2), m.group(3)):
            hits.append(f"--{m.group(1)} with a value on the command line (use --{m.group(1)} env:VAR)")
    for m in PASSWORD_OPTION.finditer(line):
        v = m.group(3)
        if not (allowed_value(m.group(2), v) or v.startswith(("file:", "fd:", "stdin"))):
            hits.append(f"--{m.group(1)} with a value on the command line")
    if OPENSSL_PASS.search(line):
        hits.append("an openssl pass: password on the command line (use -passin/-passout env:VAR)")
    if PIN_VALUE.search(line):
        hits.append("a PKCS #11 URI with pin-value (use pin-source=file:/dev/fd/N and a pipe)")
    m = SOFTHSM_PIN.search(line)
    if m:
        hits.append(f"softhsm2-util takes --{m.group(1)} only on its command line (initialise with pkcs11-tool --so-pin env:VAR)")
    m = SSH_KEYGEN_PASS.search(line)
    if m and m.group(2) not in ("''", '""'):
        hits.append("an ssh-keygen passphrase on the command line")
    if kind == "c":
        if C_PIN_FROM_ARGV.search(line):
            hits.append("a PIN taken from argv (read it from the environment)")
    if kind in ("sh", "make", "md"):
        env_rule(line, hits)
    if kind in ("sh", "make"):
        shell_rules(line, hits, shell)
    return hits


def kind_of(path):
    base = os.path.basename(path)
    if base == "Makefile" or base.endswith(".mk"):
        return "make"
    ext = os.path.splitext(base)[1]
    return {".sh": "sh", ".bash": "sh", ".py": "py", ".c": "c", ".h": "c", ".swift": "swift",
            ".md": "md", ".service": "sh", ".yml": "sh", ".yaml": "sh"}.get(ext, "sh" if base == "run" else None)


def code_lines(path, kind):
    """(number, text) of the lines to check: every line, or for Markdown the
    fenced blocks and `inline code` spans."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    if kind != "md":
        joined = []
        for n, text in enumerate(lines, 1):
            joined.append((n, text))
        return joined
    out, fenced = [], False
    for n, text in enumerate(lines, 1):
        if text.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            out.append((n, text))
        else:
            for span in re.findall(r"`([^`]+)`", text):
                out.append((n, span))
    return out


# What is scanned: tests, benchmarks, examples, CI, Makefile, README and docs.
SCAN_DIRS = ("Tests", "Benchmarks", "Examples", ".ci", "docs")
SCAN_FILES = ("Makefile", "README.md")
SKIP_DIRS = {".build", ".git", "corpus", "crashes"}
# The lint's own source spells the forms it looks for.
SELF = os.path.abspath(__file__)


def targets(root, paths):
    if paths:
        for p in paths:
            yield p if os.path.isabs(p) else os.path.join(root, p)
        return
    for name in SCAN_FILES:
        p = os.path.join(root, name)
        if os.path.isfile(p):
            yield p
    for d in SCAN_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, d)):
            dirnames[:] = sorted(x for x in dirnames if x not in SKIP_DIRS and not x.startswith(".build"))
            for fn in sorted(filenames):
                yield os.path.join(dirpath, fn)


def load_waivers(path):
    """{(file, fingerprint): why}: hits another change owns, listed so they stay
    visible until that file is fixed (a fingerprint is the SHA-256 of the
    command's text, so any edit of that line ends its waiver)."""
    out = {}
    if path and os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    file, fp, why = (line.rstrip("\n").split("\t") + ["", ""])[:3]
                    out[(file, fp)] = why
    return out


def fingerprint(text):
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()[:12]


def main():
    args = sys.argv[1:]
    waiver_file = None
    if len(args) >= 2 and args[0] == "--waivers":
        waiver_file, args = args[1], args[2:]
    root = os.path.abspath(args[0] if args else ".")
    waivers, used = load_waivers(waiver_file), set()
    files = hits = waived = 0
    for path in targets(root, args[1:]):
        kind = kind_of(path)
        if kind is None or os.path.abspath(path) == SELF:
            continue
        files += 1
        rel = os.path.relpath(path, root)
        shell = None
        if kind in ("sh", "make"):
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            lib = os.path.join(root, "Tests", "integration", "lib.sh")
            if os.path.isfile(lib) and "lib.sh" in text:
                with open(lib, encoding="utf-8", errors="replace") as f:
                    text = f.read() + "\n" + text
            shell = Shell(functions(text))
        # Shell continuation lines are one command: join them, report the first line.
        pending, first = "", None
        for n, text in code_lines(path, kind):
            if kind in ("sh", "make") and text.rstrip().endswith("\\") and not text.lstrip().startswith("#"):
                pending += text.rstrip()[:-1] + " "
                first = first or n
                continue
            if pending:
                text, n, pending, first = pending + text, first, "", None
            if kind in ("sh", "make") and text.lstrip().startswith("#"):
                continue
            found = list(dict.fromkeys(line_rules(path, text, kind, shell)))
            if not found:
                continue
            fp = fingerprint(text)
            if (rel, fp) in waivers:
                waived += 1
                used.add((rel, fp))
                print(f"waived: {rel}:{n}: [{fp}] " + "; ".join(found) + f" ({waivers[(rel, fp)]})")
                continue
            hits += 1
            print(f"{rel}:{n}: [{fp}] " + "; ".join(found))
    for (file, fp), why in waivers.items():
        if (file, fp) not in used:
            print(f"stale waiver (that line is gone or fixed: remove the waiver): {file} [{fp}]")
    print(f"lint: {files} files scanned, {hits} lines with a secret on a command line, {waived} waived")
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main())
