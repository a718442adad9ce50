"""Clients past the hello that announce a 16 MiB call and stall (84-agent-flood).

Usage: stalled_calls.py SOCKET N SECONDS
Opens N connections to the agent at SOCKET, each a new client (a protocol 5
hello, no fields: allowed when the store has no policy), then on each sends
the 4-byte header of a 16 MiB call and 4 bytes of it, prints "ready N" and
holds them for SECONDS; then prints "closed K": how many the agent had
closed by then (the frame deadline is 10 s).
"""
import socket
import struct
import sys
import time

path, count, hold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
conns = []
for i in range(count):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    hello = struct.pack("<IHH", 0x3141534B, 5, 0) + bytes(16) + struct.pack("<H", 0)
    s.sendall(struct.pack("<I", len(hello)) + hello)
    (length,) = struct.unpack("<I", s.recv(4, socket.MSG_WAITALL))
    reply = s.recv(length, socket.MSG_WAITALL)
    (status,) = struct.unpack("<H", reply[6:8])
    if status != 0:
        print("refused", i, reply[26:].decode(errors="replace"), flush=True)
        sys.exit(1)
    s.sendall(struct.pack("<I", 16 << 20) + b"\0\0\0\0")
    conns.append(s)
print("ready", len(conns), flush=True)
time.sleep(hold)
closed = 0
for s in conns:
    s.setblocking(False)
    try:
        closed += s.recv(1) == b""
    except BlockingIOError:
        pass
print("closed", closed, flush=True)
