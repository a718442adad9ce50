"""A PKCS #11 host (ctypes) whose debug log is a pipe nobody reads (84-agent-flood).

Usage: log_pipe_host.py closed|full MODULE CALLS
  closed: stderr is a pipe whose read end is already closed (a `| head` that
          exited); the host ignores SIGPIPE, as Python and many servers do.
  full:   stderr is a pipe whose read end this process holds and never reads.
Run with KEYSHARE_DEBUG=1: the module sends its stderr to the agent, which
writes each call's log line there. Prints "init RV", then "done N" after N
C_GetInfo calls, or "getinfo I RV" at the first that fails.
"""
import ctypes
import os
import sys

mode, module, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
r, w = os.pipe()
if mode == "closed":
    os.close(r)
os.dup2(w, 2)
lib = ctypes.CDLL(module)
table = ctypes.POINTER(ctypes.c_void_p)()
lib.C_GetFunctionList(ctypes.byref(table))
entry = ctypes.cast(table, ctypes.POINTER(ctypes.c_void_p))
# CK_FUNCTION_LIST: the version (padded to a pointer), then C_Initialize, C_Finalize, C_GetInfo.
fn = lambda i: ctypes.CFUNCTYPE(ctypes.c_ulong, ctypes.c_void_p)(entry[i])
print("init", hex(fn(1)(None)), flush=True)
info = ctypes.create_string_buffer(256)
for i in range(calls):
    rv = fn(3)(info)
    if rv:
        print("getinfo", i, hex(rv), flush=True)
        sys.exit(1)
print("done", calls, flush=True)
