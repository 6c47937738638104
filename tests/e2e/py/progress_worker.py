# progress_worker.py STOPFILE: a worker that reports its progress to the
# agent the way docs/METRICS.md tells a PyTorch script to, with no elrun
# package: one "step N samples M" line per step on $ELRUN_PROGRESS_FD.
# Runs 20 steps a second until STOPFILE exists, then exits 0.
import os
import sys
import time

fd = int(os.environ.get("ELRUN_PROGRESS_FD", "-1"))
step = 0
while not os.path.exists(sys.argv[1]):
    step += 1
    if fd >= 0:
        try:
            os.write(fd, b"step %d samples %d\n" % (step, step * 32))
        except BlockingIOError:
            pass  # the agent is behind: drop this report
    time.sleep(0.05)
