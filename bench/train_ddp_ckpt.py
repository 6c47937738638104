"""train_ddp_ckpt.py -- bench/train_fmnist_ddp.py's model and data with
checkpoints and resume, for bench/goodput.sh: the PyTorch DDP (gloo) job
that runs under torchrun and under elrun on the same fault schedule.

    torchrun --nnodes=2:3 ... bench/train_ddp_ckpt.py --epochs 6 \
        --ckpt-dir /tmp/ck1 --ckpt-every 100

Written as a PyTorch user writes it: every rank saves its state into its
node's --ckpt-dir every --ckpt-every steps (torch.save to a temporary file,
then os.replace); at start the ranks agree (all_reduce MAX) on the newest
step any directory holds and the lowest rank that has it broadcasts it.  A
stop (SIGTERM, a peer's death) saves nothing more: the steps since the last
checkpoint are redone.  The collective timeout is 60 s, as the C example's
(PyTorch's default is 30 min).  Rank 0 prints, flushed, the lines
bench/goodput.sh reads (the C example's wording):
    rank 0 of W (attempt A, run R)
    resumed from checkpoint step S (epoch E)
    checkpoint step S saved
    epoch E/N: ... test accuracy X%
    final: test accuracy X% after N epochs (S steps), world W
"""
import argparse, datetime, os, sys

import torch
import torch.distributed as dist
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_fmnist_ddp import load, make_model, train_step  # noqa: E402


def say(rank, msg):
    if rank == 0:
        print(msg, flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--ckpt-dir", required=True)
    p.add_argument("--ckpt-every", type=int, default=100)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    a = p.parse_args()

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    say(rank, f"rank 0 of {world} (attempt "
        f"{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}, run "
        f"{os.environ.get('TORCHELASTIC_RUN_ID', 'none')})")
    torch.manual_seed(1)
    xtr, ytr = load(a.data_dir, "train")
    xte, yte = load(a.data_dir, "t10k")
    n = xtr.shape[0]
    model = make_model(a.hidden)
    params = list(model.parameters())
    mom = [torch.zeros_like(q) for q in params]

    # Resume: the newest step any node's directory holds.
    os.makedirs(a.ckpt_dir, exist_ok=True)
    path = os.path.join(a.ckpt_dir, "ckpt.pt")
    mine, step = None, 0
    if os.path.exists(path):
        mine = torch.load(path)
    have = torch.tensor([mine["step"] if mine else 0], dtype=torch.int64)
    dist.all_reduce(have, op=dist.ReduceOp.MAX)
    step = int(have.item())
    if step > 0:
        src = torch.tensor([rank if mine and mine["step"] == step else world])
        dist.all_reduce(src, op=dist.ReduceOp.MIN)
        src = int(src.item())
        with torch.no_grad():
            for i, t in enumerate(params + mom):
                if rank == src:
                    t.copy_(mine["state"][i])
                dist.broadcast(t, src)
        say(rank, f"resumed from checkpoint step {step} "
            f"(epoch {step // ((n + a.batch - 1) // a.batch) + 1})")

    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=0.9,
                          weight_decay=1e-4)
    for q, b in zip(params, mom):
        opt.state[q]["momentum_buffer"] = b
    spe = (n + a.batch - 1) // a.batch
    total = spe * a.epochs
    while step < total:
        epoch = step // spe
        g = torch.Generator().manual_seed(1000 + epoch)
        perm = torch.randperm(n, generator=g)
        while step < total and step // spe == epoch:
            train_step(ddp, opt, xtr, ytr, perm, (step % spe) * a.batch,
                       a.batch, a.lr, step, total, rank, world)
            step += 1
            if step % a.ckpt_every == 0 or step == total:
                state = [t.detach().clone() for t in params] + [
                    opt.state[t]["momentum_buffer"].clone() for t in params]
                torch.save({"step": step, "state": state}, path + ".tmp")
                os.replace(path + ".tmp", path)
                say(rank, f"checkpoint step {step} saved")
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item() * 100
        say(rank, f"epoch {epoch + 1}/{a.epochs}: test accuracy {acc:.2f}%")
    with torch.no_grad():
        acc = (model(xte).argmax(1) == yte).float().mean().item() * 100
    say(rank, f"final: test accuracy {acc:.2f}% after {a.epochs} epochs "
        f"({total} steps), world {world}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
