#!/usr/bin/env python3
"""allreduce_gloo.py -- PyTorch gloo all_reduce latency and bus bandwidth,
measured exactly like bench_allreduce.c (and torchrun-baseline.md section 6)
so that bench/allreduce.sh can print the two side by side.

    python3 bench/allreduce_gloo.py [-n 2,4] [-s 4K,1M,16M,64M] [-r SCALE]

Spawns the ranks itself (torchrun crashes on Debian's Python 3.11) and joins
them with init_process_group("gloo", init_method="tcp://127.0.0.1:PORT").
OMP_NUM_THREADS=1 and one torch thread per rank, as torchrun sets up.
Prints, from rank 0, one line per size:
    RESULT gloo <ranks> <bytes> <perop_us> <perop_busbw_GBps> <b2b_us> <b2b_busbw_GBps>
"""
import argparse
import os
import socket
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")


def iters_for(nbytes, scale):
    it = 500 if nbytes <= 8 << 10 else 100 if nbytes <= 2 << 20 else \
        20 if nbytes <= 32 << 20 else 10
    return max(3, int(it * scale))


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip()
    if s[-1].upper() in mult:
        return int(float(s[:-1]) * mult[s[-1].upper()])
    return int(s)


def rank_main(rank, world, port, sizes, scale):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    for nbytes in sizes:
        x = torch.arange(nbytes // 4, dtype=torch.float32) % 7
        it = iters_for(nbytes, scale)
        for _ in range(3):
            dist.all_reduce(x)
        times = []
        for _ in range(it):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(x)
            dt = torch.tensor([(time.perf_counter() - t0) * 1e6],
                              dtype=torch.float64)
            dist.all_reduce(dt, op=dist.ReduceOp.MAX)
            times.append(dt.item())
        perop = statistics.median(times)
        batches = []
        for _ in range(3):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(it):
                dist.all_reduce(x)
            dt = torch.tensor([(time.perf_counter() - t0) * 1e6 / it],
                              dtype=torch.float64)
            dist.all_reduce(dt, op=dist.ReduceOp.MAX)
            batches.append(dt.item())
        b2b = statistics.median(batches)
        f = 2.0 * (world - 1) / world
        if rank == 0:
            print(f"RESULT gloo {world} {nbytes} {perop:.1f} "
                  f"{f * nbytes / perop / 1e3:.3f} {b2b:.1f} "
                  f"{f * nbytes / b2b / 1e3:.3f}", flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", default="2,4")
    ap.add_argument("-s", default="4K,1M,16M,64M")
    ap.add_argument("-r", type=float, default=1.0)
    a = ap.parse_args()
    sizes = [parse_size(s) & ~3 for s in a.s.split(",")]
    status = 0
    for world in [int(w) for w in a.n.split(",")]:
        port = free_port()
        pids = []
        sys.stdout.flush()
        for rank in range(world):
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    rank_main(rank, world, port, sizes, a.r)
                except BaseException as e:  # report, never hang the parent
                    print(f"gloo rank {rank}: {e!r}", file=sys.stderr)
                    code = 1
                sys.stdout.flush()
                os._exit(code)
            pids.append(pid)
        for pid in pids:
            _, st = os.waitpid(pid, 0)
            if st != 0:
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
