#!/usr/bin/env python3
"""pty_answer.py STEP... -- CMD ARG...: runs CMD on a new pseudo-terminal (its
controlling terminal, so /dev/tty is the pty) and answers what appears on it,
as a person would (86-agent-prompt: the CLI's prompts and a real
pinentry-curses; 88-cli-adoption: Enter and Ctrl-D at a PIN prompt).

Each STEP is MARKER=ACTION. Once MARKER has appeared in the output since the
previous step, and the terminal's echo is off (a no-echo prompt flushes what
was typed before it), ACTION is typed:
  env:NAME    the value of $NAME, then Enter (a PIN comes from the
              environment, never a command line);
  enter       Enter;
  keys:TEXT   TEXT with Python escapes ("\\x04" is Ctrl-D), nothing added.

Prints everything CMD wrote (carriage returns dropped). Exit status: CMD's, or
124 when it did not end within 40 s (it is then killed by its PID, and
"pty_answer: timed out" is printed)."""
import os
import pty
import select
import signal
import sys
import termios
import time


def keys(action):
    if action.startswith("env:"):
        return os.environ[action[4:]].encode() + b"\r"
    if action == "enter":
        return b"\r"
    if action.startswith("keys:"):
        return action[5:].encode().decode("unicode_escape").encode("latin-1")
    sys.exit("pty_answer: unknown action " + action)


def echo_off(fd):
    try:
        return not termios.tcgetattr(fd)[3] & termios.ECHO
    except termios.error:
        return False


def main():
    split = sys.argv.index("--")
    steps = [s.split("=", 1) for s in sys.argv[1:split]]
    cmd = sys.argv[split + 1:]
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.setdefault("TERM", "xterm")
        os.execvp(cmd[0], cmd)
    out, seen, status = b"", 0, None
    deadline = time.monotonic() + 40
    marked = None  # when the current step's marker appeared
    while time.monotonic() < deadline:
        if steps and marked is None and steps[0][0].encode() in out[seen:]:
            marked = time.monotonic()
        # Type once echo is off; a curses dialog gets half a second to finish drawing.
        if marked is not None and echo_off(fd) and time.monotonic() - marked >= (0 if steps[0][1].startswith("keys:") else 0.5):
            os.write(fd, keys(steps.pop(0)[1]))
            seen, marked = len(out), None
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                break
            out += chunk
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
            break
    # What is left in the pty, then the child's end (bounded).
    while True:
        r, _, _ = select.select([fd], [], [], 0.1)
        if not r:
            break
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    end = time.monotonic() + (2 if time.monotonic() < deadline else 0)
    while status is None:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
        elif time.monotonic() >= end:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            sys.stdout.write(out.replace(b"\r", b"").decode("utf-8", "replace") + "\n")
            print("pty_answer: timed out" + (" waiting for " + steps[0][0] if steps else ""))
            return 124
        else:
            time.sleep(0.05)
    sys.stdout.write(out.replace(b"\r", b"").decode("utf-8", "replace") + "\n")
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
