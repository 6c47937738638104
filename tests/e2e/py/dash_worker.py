# dash_worker.py STOPFILE: a worker that reports progress with a loss, the
# way docs/DASHBOARD.md tells a PyTorch script to (no elrun package): one
# "step N samples M loss F" line per step on $ELRUN_PROGRESS_FD, 20 steps a
# second, the loss falling as 1/step, until STOPFILE exists; then exits 0.
import os
import sys
import time

fd = int(os.environ.get("ELRUN_PROGRESS_FD", "-1"))
step = 0
while not os.path.exists(sys.argv[1]):
    step += 1
    if fd >= 0:
        try:
            os.write(fd, b"step %d samples %d loss %.5f\n" % (step, step * 32, 2.0 / step))
        except BlockingIOError:
            pass  # the agent is behind: drop this report
    time.sleep(0.05)
