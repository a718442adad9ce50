#!/usr/bin/env python3
"""A small client of the keyshare password service for 20-share.sh.

fetch SOCK            one well-formed request; prints the reply's state
fanout SOCK N         N concurrent clients, a mix of good, malformed, oversized,
                      partial and silent ones; checks every good one got the
                      password in $KEYSHARE_SHARE_PASSWORD (the environment, not
                      argv: `ps` shows every argument to every local user)
"""
import json, os, socket, sys, threading

REQ = b'{"v":1,"service":"red.hound.KeySharingPassword-v1.0.0","call":"fetchPassword"}\n'


def talk(path, payload, shut=True, timeout=10):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        if payload:
            try:
                s.sendall(payload)
            except OSError:
                pass
        if shut:
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        return data
    finally:
        s.close()


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "fetch":
        reply = json.loads(talk(path, REQ))
        print(reply["state"], reply.get("error", ""))
        return
    n = int(sys.argv[3])
    expected = os.environ.get("KEYSHARE_SHARE_PASSWORD")
    if not expected:
        sys.exit("share_client.py: set KEYSHARE_SHARE_PASSWORD to the password the service should answer")
    kinds = ["good", "malformed", "oversized", "partial", "silent"]
    results, lock = {"good": 0, "good_ok": 0, "bad_handled": 0, "bad": 0}, threading.Lock()

    def client(i):
        kind = kinds[i % len(kinds)]
        try:
            if kind == "good":
                reply = json.loads(talk(path, REQ))
                ok = reply.get("state") == "not-blocked" and reply.get("password") == expected
            elif kind == "malformed":
                ok = b"no-request" in talk(path, b"\x00\xffnot json\n")
            elif kind == "oversized":
                ok = b"too large" in talk(path, b"{" * 70000) or True  # a close is fine too
            elif kind == "partial":
                ok = b"incomplete" in talk(path, REQ[:20], shut=True)
            else:  # silent: connects, says nothing, waits for the timeout reply
                ok = b"timeout" in talk(path, b"", shut=False)
        except OSError:
            ok = kind != "good" and kind != "malformed"
        with lock:
            if kind == "good":
                results["good"] += 1
                results["good_ok"] += ok
            else:
                results["bad"] += 1
                results["bad_handled"] += ok

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"good {results['good_ok']}/{results['good']} bad-handled {results['bad_handled']}/{results['bad']}")


main()
