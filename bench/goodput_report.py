"""goodput_report.py -- bench/goodput.sh's report of one program under one
launcher, from the logs of its fault-free and faulted runs (every line
stamped with the wall clock by goodput.sh; KEEP=1 keeps them, and this can
be run again on them):

    python3 bench/goodput_report.py PROG LAUNCHER CLEAN_DIR FAULTED_DIR TIMEOUT

The lines it reads are the C example's (and bench/train_ddp_ckpt.py's, in
the same words): "checkpoint step N saved" (periodic; rank 0), "saved
checkpoint step N" (a save on the way out), "rank 0 of W (attempt" (an
attempt's start), "resumed from checkpoint step N", "final: ...", and
elrun chaos's fault lines.
"""
import glob, re, sys
prog, launcher, clean, faulted, timeout = sys.argv[1:]
def wall(d):
    v = open(d + "/wall").read().strip()
    return None if v == "timeout" else float(v)
def final(d):
    try:
        return open(d + "/final").read().strip()
    except OSError:
        return ""
cw, fw = wall(clean), wall(faulted)
tag = f"RESULT {prog:2} {launcher:8}"
print(f"{tag} fault-free {('%.1f s' % cw) if cw else 'did not finish in %s s' % timeout}: {final(clean)}")
print(f"{tag} faulted    {('%.1f s' % fw) if fw else 'did not recover in %s s' % timeout}: {final(faulted)}")
faults = []
for line in open(faulted + "/chaos.out"):
    m = re.match(r"(\d+\.\d+)\s+[\d.]+s (worker-kill|agent-kill|agent-stop|agent-term|link-cut) pid", line)
    if m:
        faults.append((float(m.group(1)), m.group(2)))
ev = []  # (t, kind, step): ck a periodic checkpoint, exit a save on the
          # way out, start an attempt's first line, resume its resume line
for f in glob.glob(faulted + "/a*.log"):
    for line in open(f, errors="replace"):
        t = line.split(" ", 1)[0]
        try:
            t = float(t)
        except ValueError:
            continue
        if (m := re.search(r"saved checkpoint step (\d+)|checkpoint step (\d+) is saved", line)):
            ev.append((t, "exit", int(m.group(1) or m.group(2))))
        elif (m := re.search(r"checkpoint step (\d+) saved", line)):
            ev.append((t, "ck", int(m.group(1))))
        elif "rank 0 of " in line and "(attempt" in line:
            ev.append((t, "start", 0))
        elif (m := re.search(r"resumed from checkpoint step (\d+)", line)):
            ev.append((t, "resume", int(m.group(1))))
ev.sort()
if cw and fw and faults:
    lost = (fw - cw) / len(faults)
    print(f"{tag} ETTR {cw / fw:.3f} with {len(faults)} faults in {fw:.0f} s; "
          f"lost {lost:.1f} s per fault, so ETTR {60 / (60 + max(lost, 0)):.3f} at one fault a minute")
elif not fw:
    print(f"{tag} ETTR 0 (the faulted run did not finish in {timeout} s)")
for n, (tf, kind) in enumerate(faults):
    tn = faults[n + 1][0] if n + 1 < len(faults) else float("inf")
    # The next attempt: its first line (resume or start) after the fault.
    start = next((e for e in ev if e[0] > tf and e[1] in ("start", "resume")), None)
    if start and start[0] >= tn:
        start = None
    # The step reached: the newest checkpoint before the fault, or a save
    # on the way out between the fault and the next attempt.
    until = start[0] if start else tn
    sf = max([s for t, k, s in ev if (k == "ck" and t <= tf) or
              (k == "exit" and tf < t <= until)] or [0])
    res, step = None, None
    if start:
        # Its resume line: near its first line, before its first checkpoint
        # (PyTorch prints it after loading the data, seconds later).
        ck = next((e[0] for e in ev if e[1] == "ck" and e[0] > start[0]), float("inf"))
        near = [e for e in ev if e[1] == "resume" and start[0] - 2 < e[0] < ck and e[0] > tf]
        res = max([start[0]] + [e[0] for e in near])
        step = near[0][2] if near else 0
    back = next((t for t, k, s in ev if k == "ck" and t > tf and s > sf), None)
    rel = tf - faults[0][0] if faults else 0
    parts = [f"{tag} fault {kind:11} at step {sf:5}:"]
    if res is not None:
        parts.append(f"resumed after {res - tf:6.2f} s from step {step} ({max(sf - step, 0)} steps redone),")
    else:
        parts.append("no new attempt before the next fault,")
    parts.append(f"back past step {sf} after {back - tf:6.2f} s" if back else "never back past that step")
    print(" ".join(parts))
