"""store_torch_server.py -- PyTorch's own TCPStore server, for bench/store.sh.

Starts torch.distributed.TCPStore as the master (PyTorch 1.13 from Debian's
python3-torch: a single daemon thread that poll()s every socket), on
127.0.0.1 and the port given (0 picks a free one), prints
"listening on 127.0.0.1:PORT" like `elrun store` does, then sleeps until it
is killed or --max-seconds pass (so it never outlives the benchmark).

    /usr/bin/python3 bench/store_torch_server.py [PORT] [--max-seconds S]
"""
import sys
import time

import torch.distributed as dist


def main():
    args = sys.argv[1:]
    max_seconds = 3600.0
    if "--max-seconds" in args:
        i = args.index("--max-seconds")
        max_seconds = float(args[i + 1])
        del args[i:i + 2]
    port = int(args[0]) if args else 0
    store = dist.TCPStore("127.0.0.1", port, None, True,
                          wait_for_workers=False)
    print(f"listening on 127.0.0.1:{store.port}", flush=True)
    time.sleep(max_seconds)


if __name__ == "__main__":
    main()
