"""A PyTorch worker for tests/e2e/t0310: joins the gloo process group on the
agent's store (TORCHELASTIC_USE_AGENT_STORE, unauthenticated: workers keep
their own keys), allreduces its rank, records the result in
DIR/w.<round>.<rank> and runs until DIR/finish exists.

usage: secret_worker.py DIR
"""
import os
import sys
import time

import torch
import torch.distributed as dist

d = sys.argv[1]
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank())])
dist.all_reduce(t)
f = f"{d}/w.{os.environ['TORCHELASTIC_RESTART_COUNT']}.{dist.get_rank()}"
with open(f + ".tmp", "w") as out:
    out.write(f"rank={dist.get_rank()} world={dist.get_world_size()} "
              f"sum={int(t.item())}\n")
os.rename(f + ".tmp", f)
while not os.path.exists(f"{d}/finish"):
    time.sleep(0.05)
