"""Plant, or look for, what an earlier job leaves in a shared store's
attempt 1 (t0950's hung-worker case, #14): the workers' keys
/worker/attempt_<round>/ carry no run id.

usage: stale_worker_keys.py set|gone PORT
  set   the addresses of three dead ranks of the C example (127.0.0.1:1
        refuses), and two canaries
  gone  exit 1 if a canary is still there

torch's TCPStore client puts "/" before every key, so "worker/..." is
stored as "/worker/..." (what libelrun's workers read and write) and
"/worker/..." as "//worker/..." (what PyTorch workers' PrefixStore makes).
"""
import datetime
import sys

import torch.distributed as dist

what, port = sys.argv[1], int(sys.argv[2])
s = dist.TCPStore("127.0.0.1", port, 1, False, timeout=datetime.timedelta(seconds=10))
canaries = ["worker/attempt_1/canary", "/worker/attempt_1/canary"]
if what == "set":
    for k in canaries:
        s.set(k, "x")
    for r in range(3):
        s.set("worker/attempt_1/fmnist/addr/%d" % r, "127.0.0.1:1")
else:
    left = [k for k in canaries if s.delete_key(k)]  # True: it was there
    if left:
        sys.exit("an earlier job's keys are still in attempt 1: %s" % left)
