#!/usr/bin/env python3
"""Runs a command on a new pseudo-terminal and answers what appears on it, as a
person would (86-agent-prompt.sh: a real pinentry-curses on the client's
terminal). Usage: pty-answer.py STEP... -- CMD ARG...; each STEP is
MARKER=ACTION: once MARKER has appeared in the output since the previous step,
ACTION is typed: `env:NAME` types the value of $NAME and Enter (a PIN comes
from the environment, never a command line), `enter` presses Enter. Prints
the command's output (carriage returns dropped), then "timeout" when it did
not end within 40 s (it is then killed).
"""
import os
import pty
import select
import sys
import time

split = sys.argv.index("--")
steps = [s.split("=", 1) for s in sys.argv[1:split]]
cmd = sys.argv[split + 1:]
pid, fd = pty.fork()
if pid == 0:
    os.environ["TERM"] = "xterm"
    os.execv(cmd[0], cmd)
out, seen, end = b"", 0, time.time() + 40
while time.time() < end:
    if steps and steps[0][0].encode() in out[seen:]:
        time.sleep(0.5)  # let the dialog finish drawing and wait for keys
        marker, action = steps.pop(0)
        os.write(fd, (os.environ[action[4:]].encode() if action.startswith("env:") else b"") + b"\r")
        seen = len(out)
    r, _, _ = select.select([fd], [], [], 0.2)
    if r:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
late = time.time() >= end
if late:
    os.kill(pid, 9)
os.waitpid(pid, 0)
sys.stdout.write(out.replace(b"\r", b"").decode("utf-8", "replace") + "\n")
if late:
    print("timeout")
