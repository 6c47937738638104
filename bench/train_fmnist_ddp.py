"""train_fmnist_ddp.py -- the same MLP as examples/train_fmnist.c in PyTorch
with DistributedDataParallel (gloo), for bench/train.sh to compare training
throughput under torchrun.

    python3 -m torch.distributed.run --standalone --nproc_per_node=2 \
        bench/train_fmnist_ddp.py [--epochs 2] [--batch 128] [--hidden 256]

Same data (Debian's gzip'd IDX files, same normalisation), same model
(784-H-10, ReLU, He init), same optimiser (SGD, momentum 0.9, weight decay
1e-4, cosine learning rate from 0.05), same global batch split over the
ranks.  Every rank holds the whole data set in memory and indexes its slice
of each global batch of a seeded per-epoch permutation, as the C program
does.  Prints per epoch (rank 0):
    RESULT torch <world> <epoch> <samples_per_s> <test_accuracy>
"""
import argparse, gzip, math, os, struct, time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    nd = magic & 0xFF
    dims = struct.unpack(">" + "I" * nd, data[4:4 + 4 * nd])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)


def load(d, split, limit=0):
    x = read_idx(f"{d}/{split}-images-idx3-ubyte.gz").reshape(-1, 784)
    y = read_idx(f"{d}/{split}-labels-idx1-ubyte.gz")
    if limit:
        x, y = x[:limit], y[:limit]
    x = (torch.from_numpy(x.astype(np.float32)) / 255.0 - 0.2860) / 0.3530
    return x, torch.from_numpy(y.astype(np.int64))


def make_model(hidden):
    """784-hidden-10 with ReLU, He init (the C program's)."""
    model = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(),
                          nn.Linear(hidden, 10))
    for m in model:
        if isinstance(m, nn.Linear):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            nn.init.zeros_(m.bias)
    return model


def train_step(ddp, opt, xtr, ytr, perm, off, batch, lr, step, total, rank,
               world):
    """One step on this rank's slice of the global batch at offset off of
    the epoch's permutation, with the cosine learning rate of step."""
    n = xtr.shape[0]
    gb = min(batch, n - off)
    q, r = divmod(gb, world)
    cnt = q + (1 if rank < r else 0)
    beg = rank * q + min(rank, r)
    idx = perm[off + beg:off + beg + cnt]
    for grp in opt.param_groups:
        grp["lr"] = lr * 0.5 * (1 + math.cos(math.pi * step / total))
    out = ddp(xtr[idx])
    # DDP averages gradients over ranks; scale so that the result is the
    # mean over the global batch, as in the C program.
    loss = F.cross_entropy(out, ytr[idx], reduction="sum") * world / gb
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--subset", type=int, default=0)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    a = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)
    xtr, ytr = load(a.data_dir, "train", a.subset)
    xte, yte = load(a.data_dir, "t10k")
    n = xtr.shape[0]

    model = make_model(a.hidden)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=0.9,
                          weight_decay=1e-4)
    steps_per_epoch = (n + a.batch - 1) // a.batch
    total = steps_per_epoch * a.epochs
    step = 0
    for epoch in range(a.epochs):
        g = torch.Generator().manual_seed(1000 + epoch)
        perm = torch.randperm(n, generator=g)
        dist.barrier()
        t0 = time.perf_counter()
        for off in range(0, n, a.batch):
            train_step(ddp, opt, xtr, ytr, perm, off, a.batch, a.lr, step,
                       total, rank, world)
            step += 1
        dt = time.perf_counter() - t0
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item() * 100
        if rank == 0:
            print(f"RESULT torch {world} {epoch + 1} {n / dt:.0f} {acc:.2f}",
                  flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
