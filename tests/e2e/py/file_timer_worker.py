"""file_timer_worker.py -- a worker that uses torch's file timer the way a
script does under torchrun with TORCHELASTIC_ENABLE_FILE_TIMER=1 (Debian's
torch 1.13: FileTimerClient on $TORCHELASTIC_TIMER_FILE, expires()).

usage: file_timer_worker.py MODE OUT
  hang  attempt 0: an expires(after=1) block sleeps 60 s (the agent must
        kill it); a later attempt runs "ok"
  ok    an expires(after=1) block that ends in 0.1 s, then 2.5 s past its
        deadline: a released timer must not kill
  nosig a client with signal=0 (torch: "do not kill"): an expires(after=1)
        block that sleeps 2.5 s must end
  bad   malformed requests (and an expired timer of pid 1) on the pipe
        first, then "ok"
Writes "done attempt=N pid=P" to OUT when it gets to the end, and
"sleeping pid=P" before the hanging block.
"""
import json
import os
import sys
import time

import torch.distributed.elastic.timer as timer

mode, out = sys.argv[1], sys.argv[2]
path = os.environ["TORCHELASTIC_TIMER_FILE"]
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
timer.configure(timer.FileTimerClient(path, signal=0 if mode == "nosig" else 9))


def note(line):
    with open(out, "a") as f:
        f.write(line + "\n")


if mode == "bad":
    for junk in (
        "not json at all",
        json.dumps([1, 2, 3]),
        json.dumps({"pid": os.getpid(), "scope_id": "x"}),
        json.dumps({"pid": "me", "scope_id": "x", "expiration_time": 0, "signal": 9}),
        json.dumps({"pid": os.getpid(), "scope_id": 5, "expiration_time": 0, "signal": 9}),
        "{" + "x" * 5000,
        # Valid, but pid 1 is no worker: torch would signal it.
        json.dumps({"version": 1, "pid": 1, "scope_id": "init", "expiration_time": 0, "signal": 9}),
    ):
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, (junk + "\n").encode())
        os.close(fd)
    mode = "ok"

if mode == "hang" and attempt == 0:
    note(f"sleeping pid={os.getpid()}")
    with timer.expires(after=1, scope="hang-block"):
        time.sleep(60)
    note("not killed")
    sys.exit(3)

with timer.expires(after=1, scope="quick-block"):
    time.sleep(2.5 if mode == "nosig" else 0.1)
time.sleep(2.5)
note(f"done attempt={attempt} pid={os.getpid()}")
