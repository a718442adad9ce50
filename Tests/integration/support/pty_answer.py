#!/usr/bin/env python3
"""pty_answer.py PROMPT ANSWER CMD...: runs CMD on a new pseudo-terminal (its
controlling terminal, so /dev/tty is the pty), waits for PROMPT in its output,
and for the terminal's echo to be off (a no-echo prompt flushes what was
typed before it), then types ANSWER (Python escapes: "\\r" is Enter,
"\\x04" is Ctrl-D) and prints
everything CMD wrote. Exit status: CMD's, or 124 when the prompt or the end
did not come within 20 s (the child is then killed by its PID)."""
import os
import pty
import select
import signal
import sys
import termios
import time


def main():
    prompt = sys.argv[1].encode()
    answer = sys.argv[2].encode().decode("unicode_escape").encode("latin-1")
    cmd = sys.argv[3:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(cmd[0], cmd)
    out = b""
    sent = False
    deadline = time.monotonic() + 20
    status = None
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                break
            out += chunk
        if not sent and prompt in out and not termios.tcgetattr(fd)[3] & termios.ECHO:
            os.write(fd, answer)
            sent = True
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
            # what is left in the pty
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
            break
    if status is None:
        # The pty closed (the child is exiting) or the time ran out.
        end = time.monotonic() + (2 if time.monotonic() < deadline else 0)
        while status is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
            elif time.monotonic() >= end:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                sys.stdout.write(out.decode(errors="replace"))
                print("pty_answer: timed out" + ("" if sent else " waiting for the prompt"))
                return 124
            else:
                time.sleep(0.05)
    sys.stdout.write(out.decode(errors="replace"))
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
