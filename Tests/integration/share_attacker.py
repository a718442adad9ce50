#!/usr/bin/env python3
"""Attacks on the password service's caller check (issue 12, item 2), for
21-share-hardening.sh and Tests/stress. Never prints the password: only
whether one was handed out.

exec-race SOCK EXE RUNS [--flood N] [--stop PID] [--inherit]
    RUNS times: connect, send the request, fork a child that keeps the socket
    and reads the reply, and exec EXE (an allowed program) under the
    connecting pid. The server must judge the program that connected, not
    the one the pid runs by the time it looks:
    --flood N   first holds N silent connections open (a server that accepts
                late then sees the exec'd program);
    --stop PID  stops the server (SIGSTOP, by its pid) from before the
                connect until the exec is done, then resumes it: a server
                that was not scheduled in time, made deterministic;
    --inherit   leaves the socket open across the exec (not close-on-exec).
    --timers N  makes the exec slow first: N POSIX timers are deleted by the
                kernel between the moment the new program shows in
                /proc/PID/exe and the closing of the close-on-exec
                descriptors (tens of ms); with --stop the service resumes at
                the start of that window.
    Prints "handed-out H/RUNS" (H must be 0) and the states the children saw.
idle SOCK N SECONDS
    holds N silent connections for SECONDS, prints "idle N" once they are open.
"""
import json, os, signal, socket, sys, time

REQ = b'{"v":1,"service":"red.hound.KeySharingPassword-v1.0.0","call":"fetchPassword"}\n'


def silent(path, n):
    held = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(path)
        except BlockingIOError:
            pass  # a full listen queue: the connection is still pending
        except OSError:
            s.close()
            break
        held.append(s)
    return held


def exe_of(pid):
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def make_timers(n):
    """N POSIX timers (SIGEV_NONE), which exec must delete while half done."""
    import ctypes
    librt = ctypes.CDLL("librt.so.1", use_errno=True)

    class SigEvent(ctypes.Structure):
        _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                    ("pad", ctypes.c_byte * 48)]

    ev = SigEvent()
    ev.notify = 1  # SIGEV_NONE
    made = 0
    for _ in range(n):
        t = ctypes.c_void_p()
        if librt.timer_create(1, ctypes.byref(ev), ctypes.byref(t)) != 0:
            break
        made += 1
    return made


def one_race(path, exe, inherit, stop, timers=0):
    """One attempt; returns the state the forked child saw."""
    r, w = os.pipe()
    attacker = os.fork()
    if attacker == 0:
        os.close(r)
        if timers:
            make_timers(timers)
        if stop:
            os.kill(stop, signal.SIGSTOP)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(REQ)
        if inherit:
            s.set_inheritable(True)
        if os.fork() == 0:  # the child that keeps the socket
            os.set_inheritable(w, False)
            s.settimeout(15)
            data = b""
            try:
                while not data.endswith(b"\n"):
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
            try:
                reply = json.loads(data)
                state = reply.get("state", "?")
                if reply.get("password"):
                    state = "PASSWORD"
            except ValueError:
                state = "no-reply"
            os.write(w, state.encode() + b"\n")
            os._exit(0)
        # The connecting process becomes the allowed program, same pid.
        os.close(w)
        os.execv(exe, [exe, "4"])
    os.close(w)
    if stop:
        deadline = time.time() + 5
        while exe_of(attacker) != exe and time.time() < deadline:
            time.sleep(0.001)
        os.kill(stop, signal.SIGCONT)
    out = b""
    while True:
        chunk = os.read(r, 256)
        if not chunk:
            break
        out += chunk
    os.close(r)
    # The exec'd program (sleep) outlives the reply: stop it now, by its pid.
    try:
        os.kill(attacker, 9)
    except ProcessLookupError:
        pass
    os.waitpid(attacker, 0)
    return out.decode().strip() or "no-reply"


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "exec-race":
        exe, runs = sys.argv[3], int(sys.argv[4])
        rest = sys.argv[5:]
        flood = int(rest[rest.index("--flood") + 1]) if "--flood" in rest else 0
        stop = int(rest[rest.index("--stop") + 1]) if "--stop" in rest else 0
        timers = int(rest[rest.index("--timers") + 1]) if "--timers" in rest else 0
        inherit = "--inherit" in rest
        states, handed = {}, 0
        for _ in range(runs):
            held = silent(path, flood) if flood else []
            state = one_race(path, exe, inherit, stop, timers)
            for s in held:
                s.close()
            handed += state == "PASSWORD"
            states[state] = states.get(state, 0) + 1
        print(f"handed-out {handed}/{runs} states " + " ".join(f"{k}={v}" for k, v in sorted(states.items())))
    elif mode == "idle":
        n, secs = int(sys.argv[3]), float(sys.argv[4])
        held = silent(path, n)
        print(f"idle {len(held)}", flush=True)
        time.sleep(secs)
    else:
        sys.exit("unknown mode")


main()
