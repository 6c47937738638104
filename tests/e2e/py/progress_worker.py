# progress_worker.py STOPFILE [--loss]: a worker that reports its progress
# to the agent the way docs/METRICS.md tells a PyTorch script to, with no
# elrun package: one "step N samples M" line per step on $ELRUN_PROGRESS_FD
# (with --loss, "step N samples M loss F", the loss falling as 2/step: the
# dashboard's optional field).  Runs 20 steps a second until STOPFILE
# exists, then exits 0.
import os
import sys
import time

fd = int(os.environ.get("ELRUN_PROGRESS_FD", "-1"))
loss = "--loss" in sys.argv[2:]
step = 0
while not os.path.exists(sys.argv[1]):
    step += 1
    if fd >= 0:
        line = b"step %d samples %d" % (step, step * 32)
        if loss:
            line += b" loss %.5f" % (2.0 / step)
        try:
            os.write(fd, line + b"\n")
        except BlockingIOError:
            pass  # the agent is behind: drop this report
    time.sleep(0.05)
