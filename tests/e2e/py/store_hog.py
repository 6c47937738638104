"""Clients that misbehave against a store, for tests/e2e/t0300 and t0310.

usage: store_hog.py noread PORT CONNS KEY GETS
           CONNS connections each send GETS TCPStore 1.13 GETs of KEY at once
           and never read a reply.
       store_hog.py hold PORT CONNS
           CONNS connections that never send a byte.
Prints "ready N" (connections made) and then holds them until killed.
"""
import socket
import struct
import sys
import time

mode, port, conns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
held = []
for _ in range(conns):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError:
        continue
    if mode == "noread":
        key = sys.argv[4].encode()
        get = b"\x02" + struct.pack("<Q", len(key)) + key
        s.setblocking(False)
        try:
            s.send(get * int(sys.argv[5]))
        except OSError:
            pass
    held.append(s)
print("ready", len(held), flush=True)
while True:
    time.sleep(3600)
