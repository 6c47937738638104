"""An outsider against a c10d job's store (tests/e2e/t0310): with raw
TCPStore 2.x frames, as any local or network peer could, it tries to end
the job (compare_set of `closed`, a `closed` events line), forge an agent's
death (`dead <id>` for a real member, read from the store), and move the
round.  Prints one line per attempt, "<what>: refused" when the store
closed the connection instead of doing it, "<what>: ACCEPTED" otherwise.

usage: store_outsider.py PORT JOB
"""
import socket
import struct
import sys

port, job = int(sys.argv[1]), sys.argv[2]
P = f"/elrun/{job}/".encode()


def s(b):
    return struct.pack("<Q", len(b)) + b


def conn():
    c = socket.create_connection(("127.0.0.1", port), timeout=5)
    c.sendall(b"\x00" + struct.pack("<I", 0x3C85F7CE))
    return c


def recv_n(c, n):
    b = b""
    while len(b) < n:
        part = c.recv(n - len(b))
        if not part:
            raise ConnectionError("closed")
        b += part
    return b


def recv_str(c):
    return recv_n(c, struct.unpack("<Q", recv_n(c, 8))[0])


def attempt(what, frame, reply):
    """Send frame, then a PING; 'refused' if the connection closes."""
    c = conn()
    try:
        c.sendall(frame + b"\x0d" + struct.pack("<I", 7))
        if reply:
            reply(c)
        recv_n(c, 4)
        print(f"{what}: ACCEPTED", flush=True)
    except (ConnectionError, OSError):
        print(f"{what}: refused", flush=True)
    finally:
        c.close()


# What the job looks like (reading is allowed): a member's id.
c = conn()
c.sendall(b"\x03" + s(P + b"round"))
rnd = recv_str(c).decode()
c.sendall(b"\x03" + s(P + f"r{rnd}/members".encode()))
members = recv_str(c).decode().splitlines()
c.close()
victim = members[1].split()[0]
print(f"round {rnd}, member {victim}", flush=True)

attempt("compare_set closed", b"\x02" + s(P + b"closed") + s(b"") + s(b"ok"),
        recv_str)
attempt("append closed event", b"\x09" + s(P + b"events") +
        s(b"closed outsider\n"), None)
attempt("forge a death", b"\x09" + s(P + b"events") +
        s(f"dead {victim}\n".encode()), None)
attempt("set the round", b"\x01" + s(P + b"round") + s(b"99"), None)
attempt("delete the job's keys", b"\x44" + s(b"/elrun/"),
        lambda c: recv_n(c, 8))
