"""A well-behaved PyTorch TCPStore client (Debian's torch 1.13) for the
store's limit tests: connects, runs ROUNDS set/get round trips and prints
"all ok <rounds> max_ms <slowest round trip>".  With --put KEY BYTES it
first stores a value of that size under KEY.

usage: store_good_client.py PORT ROUNDS [--put KEY BYTES]
"""
import datetime
import sys
import time

import torch.distributed as dist

port, rounds = int(sys.argv[1]), int(sys.argv[2])
s = dist.TCPStore("127.0.0.1", port, 1, False,
                  timeout=datetime.timedelta(seconds=30))
if len(sys.argv) > 3 and sys.argv[3] == "--put":
    s.set(sys.argv[4], b"v" * int(sys.argv[5]))
worst = 0.0
for i in range(rounds):
    t0 = time.monotonic()
    s.set("good", str(i))
    got = s.get("good")
    worst = max(worst, time.monotonic() - t0)
    if got != str(i).encode():
        print(f"FAIL round {i}: got {got!r}")
        sys.exit(1)
print(f"all ok {rounds} max_ms {worst * 1000:.1f}")
