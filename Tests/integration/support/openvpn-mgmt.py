#!/usr/bin/env python3
"""Answers an OpenVPN client's token PIN request over its management socket.

OpenVPN asks for a PKCS #11 token PIN on the console or, with
--management-query-passwords, on the management interface: this is the
non-interactive way (the PIN never touches argv or a file). Usage:
openvpn-mgmt.py SOCKET SECONDS; the PIN comes from the environment variable
KS_TEST_PIN. Releases the --management-hold, answers ">PASSWORD:Need '<token>
token' password", exits 0 once the client reports CONNECTED, 1 on timeout or
when the PIN is refused. Prints the management lines it saw (never the PIN).
"""
import os
import socket
import sys
import time

path, seconds = sys.argv[1], float(sys.argv[2])
deadline = time.time() + seconds
sock = socket.socket(socket.AF_UNIX)
while True:
    try:
        sock.connect(path)
        break
    except OSError:
        if time.time() > deadline:
            print("management socket never appeared")
            sys.exit(1)
        time.sleep(0.05)
sock.settimeout(max(0.1, deadline - time.time()))
stream = sock.makefile("rw", newline="\n")
stream.write("state on\nhold release\n")
stream.flush()
try:
    for line in stream:
        line = line.rstrip("\r\n")
        print("mgmt:", line)
        if line.startswith(">PASSWORD:Need '") and line.endswith("' password"):
            name = line.split("'")[1]
            pin = os.environ["KS_TEST_PIN"].replace("\\", "\\\\").replace('"', '\\"')
            stream.write('password "%s" "%s"\n' % (name, pin))
            stream.flush()
        elif line.startswith(">PASSWORD:Verification Failed"):
            sys.exit(1)
        elif line.startswith(">STATE:") and ",CONNECTED,SUCCESS," in line:
            sys.exit(0)
        if time.time() > deadline:
            break
except (socket.timeout, OSError):
    pass
print("no CONNECTED state before the deadline")
sys.exit(1)
