#!/usr/bin/env python3
"""A scripted pinentry for 86-agent-prompt.sh: speaks Assuan on stdin and
stdout as the GnuPG pinentries do, and does what DIR/mode says:

  pin     GETPIN answers DIR/pin's first line (the PIN comes from a file,
          never a command line); CONFIRM answers OK
  wrong   GETPIN answers DIR/wrong's first line
  cancel  GETPIN and CONFIRM answer "Operation cancelled" (GPG_ERR_CANCELED)
  hang    GETPIN and CONFIRM never answer (the agent's timeout must end it)
  allow   CONFIRM answers OK (the "Allow once" button)
  always  CONFIRM answers "Not confirmed" (GPG_ERR_NOT_CONFIRMED: the SETNOTOK
          button, "Always allow")
  deny    CONFIRM answers "Operation cancelled" (the SETCANCEL button, "Deny")
  gated   GETPIN waits until DIR/go exists (at most 60 s), then answers as pin:
          a test looks at the screen while the program waits (89-browsers)

Usage: fake-pinentry.py DIR [pinentry options...]. DIR/log gets one line per
start (its pid and options), its environment (ENV NAME=VALUE), each command
with its text decoded (never a PIN: GETPIN is logged with the mode only), BYE
when the agent said it, and END when the agent closed the connection.
"""
import os
import sys
import time

d = sys.argv[1]


def log(s):
    with open(os.path.join(d, "log"), "a", encoding="utf-8") as f:
        f.write(s + "\n")


def mode():
    try:
        with open(os.path.join(d, "mode"), encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return "pin"


def unescape(s):
    out, i = bytearray(), 0
    b = s.encode("utf-8")
    while i < len(b):
        if b[i] == 0x25 and i + 2 < len(b):
            out.append(int(b[i + 1:i + 3], 16))
            i += 3
        else:
            out.append(b[i])
            i += 1
    return out.decode("utf-8", "replace")


def escape(s):
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def say(s):
    sys.stdout.buffer.write(s.encode("utf-8") + b"\n")
    sys.stdout.buffer.flush()


def read_first_line(name):
    with open(os.path.join(d, name), encoding="utf-8") as f:
        return f.readline().rstrip("\n")


log(f"START pid={os.getpid()} args={' '.join(sys.argv[2:])}")
for k in sorted(os.environ):
    log(f"ENV {k}={os.environ[k]}")
say("OK Pleased to meet you")
for raw in sys.stdin.buffer:
    line = raw.rstrip(b"\n").decode("utf-8", "replace")
    cmd, _, arg = line.partition(" ")
    if cmd == "GETPIN":
        m = mode()
        log("GETPIN " + m)
        if m == "hang":
            time.sleep(600)
        elif m == "cancel":
            say("ERR 83886179 Operation cancelled <Pinentry>")
        elif m in ("pin", "wrong"):
            say("D " + escape(read_first_line(m)))
            say("OK")
        elif m == "gated":
            for _ in range(600):
                if os.path.exists(os.path.join(d, "go")):
                    break
                time.sleep(0.1)
            say("D " + escape(read_first_line("pin")))
            say("OK")
        else:
            say("ERR 83886179 Operation cancelled <Pinentry>")
    elif cmd == "CONFIRM":
        m = mode()
        log("CONFIRM " + m)
        if m == "hang":
            time.sleep(600)
        elif m in ("allow", "pin", "gated"):
            say("OK")
        elif m == "always":
            say("ERR 83886194 Not confirmed <Pinentry>")
        else:
            say("ERR 83886179 Operation cancelled <Pinentry>")
    elif cmd == "BYE":
        log("BYE")  # before the answer: the agent may close at once
        try:
            say("OK closing connection")
        except OSError:
            pass
        break
    else:
        log(f"{cmd} {unescape(arg)}")
        say("OK")
log("END")
