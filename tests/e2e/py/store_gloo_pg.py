"""Two processes form a gloo process group on an elrun store (client mode,
as torchrun workers do with TORCHELASTIC_USE_AGENT_STORE=True) and run
collectives on it.

usage: store_gloo_pg.py PORT
"""
import datetime
import multiprocessing as mp
import sys

import torch
import torch.distributed as dist


def worker(rank, port, q):
    store = dist.TCPStore("127.0.0.1", port, 2, False, timeout=datetime.timedelta(seconds=30))
    store = dist.PrefixStore("/worker/attempt_0", store)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=30))
    t = torch.tensor([float(rank + 1)] * 4)
    dist.all_reduce(t)
    objs = [None, None]
    dist.all_gather_object(objs, {"rank": rank})
    dist.barrier()
    q.put((rank, t.tolist(), objs))
    dist.destroy_process_group()


if __name__ == "__main__":
    port = int(sys.argv[1])
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=worker, args=(r, port, q)) for r in range(2)]
    for p in ps:
        p.start()
    results = sorted(q.get(timeout=120) for _ in ps)
    for p in ps:
        p.join(60)
    ok = all(p.exitcode == 0 for p in ps)
    for rank, t, objs in results:
        ok = ok and t == [3.0] * 4 and objs == [{"rank": 0}, {"rank": 1}]
        print(f"rank {rank}: all_reduce {t}, all_gather_object {objs}")
    print("all ok" if ok else "FAIL")
    sys.exit(0 if ok else 1)
