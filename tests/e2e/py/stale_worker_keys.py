"""Plant, or look for, what an earlier job leaves in a shared store's
attempt 1 (t0950's hung-worker case, #14): torch's worker keys
/worker/attempt_<round>/ carry no run id.

usage: stale_worker_keys.py set|gone PORT
  set   the addresses of three dead ranks (127.0.0.1:1 refuses) and a canary
  gone  exit 1 if the canary is still there
"""
import datetime
import sys

import torch.distributed as dist

what, port = sys.argv[1], int(sys.argv[2])
s = dist.TCPStore("127.0.0.1", port, 1, False, timeout=datetime.timedelta(seconds=10))
if what == "set":
    s.set("/worker/attempt_1/canary", "x")
    for r in range(3):
        s.set("/worker/attempt_1/fmnist/addr/%d" % r, "127.0.0.1:1")
elif s.delete_key("/worker/attempt_1/canary"):  # True: it was there
    sys.exit("an earlier job's key is still in /worker/attempt_1/")
