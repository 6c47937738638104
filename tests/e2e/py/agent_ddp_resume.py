"""agent_ddp_resume.py -- a small DDP training job (gloo, CPU) that survives
a rank dying: it checkpoints every step, and on a restart resumes from the
last checkpoint.

    python3 agent_ddp_resume.py CKPT_DIR STEPS DIE_AT_STEP

Every rank reads its place from the environment the launcher sets
(init_process_group("gloo") with env://).  On attempt 0
(TORCHELASTIC_RESTART_COUNT=0) rank 1 kills itself with SIGKILL after
DIE_AT_STEP steps.  Rank 0 writes CKPT_DIR/result: the step it resumed
from, the final step, the attempt, and the final loss.
"""
import os
import signal
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

ckpt_dir, steps, die_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DDP(nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
path = os.path.join(ckpt_dir, "ckpt.pt")
start = 0
if os.path.exists(path):
    state = torch.load(path)
    model.module.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    start = state["step"]

g = torch.Generator().manual_seed(1234 + rank)
w_true = torch.arange(8, dtype=torch.float32).unsqueeze(1) / 8
loss = None
for step in range(start, steps):
    x = torch.randn(32, 8, generator=g)
    y = x @ w_true
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    if rank == 0:
        tmp = path + ".tmp"
        torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(),
                    "step": step + 1}, tmp)
        os.replace(tmp, path)
    dist.barrier()
    if attempt == 0 and rank == 1 and step + 1 == die_at:
        os.kill(os.getpid(), signal.SIGKILL)

if rank == 0:
    with open(os.path.join(ckpt_dir, "result"), "w") as f:
        f.write(f"resumed_from={start} final={steps} attempt={attempt} "
                f"world={world} loss={loss.item():.4f}\n")
dist.destroy_process_group()
