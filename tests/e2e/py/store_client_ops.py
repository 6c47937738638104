"""Drive an elrun store with PyTorch's own TCPStore client (Debian's torch 1.13)
through every operation that client offers, and print one line per check.

usage: store_client_ops.py PORT
Exits non-zero on the first failed check.
"""
import datetime
import sys

import torch.distributed as dist

port = int(sys.argv[1])
td = datetime.timedelta


def check(name, got, want):
    if got != want:
        print(f"FAIL {name}: got {got!r}, want {want!r}")
        sys.exit(1)
    print(f"ok {name}")


# world_size=1 makes the client send ADD init/ (the connection handshake).
s = dist.TCPStore("127.0.0.1", port, 1, False, timeout=td(seconds=10))
s.set("k1", "v1")
check("get after set", s.get("k1"), b"v1")
s.set("bin", bytes(range(256)))
check("binary value", s.get("bin"), bytes(range(256)))
s.set("empty", "")
check("empty value", s.get("empty"), b"")
check("add creates", s.add("cnt", 5), 5)
check("add adds", s.add("cnt", -2), 3)
check("add value is decimal text", s.get("cnt"), b"3")
check("compare_set match", s.compare_set("k1", "v1", "v2"), b"v2")
check("compare_set mismatch returns current", s.compare_set("k1", "zz", "v3"), b"v2")
check("compare_set missing key returns expected", s.compare_set("nokey", "a", "b"), b"a")
check("compare_set missing key did not create it", s.num_keys(), 5)  # init/ k1 bin empty cnt
check("compare_set missing key, empty expected, creates", s.compare_set("new", "", "n"), b"n")
check("num_keys counts init/", s.num_keys(), 6)
check("delete_key existing", s.delete_key("new"), True)
check("delete_key missing", s.delete_key("new"), False)
s.wait(["k1", "cnt"])
print("ok wait on existing keys")
try:
    s.wait(["never"], td(milliseconds=200))
    print("FAIL wait on a missing key returned")
    sys.exit(1)
except RuntimeError as e:
    check("wait times out", "Timeout" in str(e) or "timeout" in str(e), True)
# The timed-out WAIT must not leave a stray reply behind.
s.set("never", "now")
check("connection in sync after a timed-out wait", s.get("k1"), b"v2")
s.set_timeout(td(seconds=5))
check("get after set_timeout", s.get("never"), b"now")

# A second client sees the first one's keys; PrefixStore as the agent uses it.
t = dist.TCPStore("127.0.0.1", port, 1, False, timeout=td(seconds=10))
check("second client reads", t.get("k1"), b"v2")
p = dist.PrefixStore("/worker/attempt_0", t)
p.set("x", "1")
check("prefix store on the wire", s.get("/worker/attempt_0/x"), b"1")
print("all ok")
