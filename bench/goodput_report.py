"""goodput_report.py -- bench/goodput.sh's report of one program under one
launcher, from the logs of its fault-free and faulted runs (every line
stamped with the wall clock by goodput.sh; KEEP=1 keeps them, and this can
be run again on them):

    python3 bench/goodput_report.py PROG LAUNCHER CLEAN_DIR FAULTED_DIR TIMEOUT

and the medians of repeated runs (goodput.sh REPS=N), every launcher side by
side, each LAUNCHER=... a comma-separated list of CLEAN_DIR:FAULTED_DIR pairs,
one per repetition:

    python3 bench/goodput_report.py --medians PROG TIMEOUT LAUNCHER=C1:F1,C2:F2 ...

The lines it reads are the C example's (and bench/train_ddp_ckpt.py's, in
the same words): "checkpoint step N saved" (periodic; rank 0), "saved
checkpoint step N" (a save on the way out), "rank 0 of W (attempt" (an
attempt's start), "resumed from checkpoint step N", "final: ...", and
elrun chaos's fault lines.

Medians: of the wall times (a run that did not finish counts as longer than
any that did), of ETTR (0 for such a run), of the time lost per fault, and
per fault type of the time to "resumed" and to "back" over every fault of
that type in every repetition (a fault with no new attempt before the next
fault, or never back, counts as longer than any measured one); the steps
redone are summed.
"""
import glob, re, statistics, sys

KINDS = ("worker-kill", "agent-kill", "agent-stop", "agent-term", "link-cut")


def wall(d):
    v = open(d + "/wall").read().strip()
    return None if v == "timeout" else float(v)


def final(d):
    try:
        return open(d + "/final").read().strip()
    except OSError:
        return ""


def report(prog, launcher, clean, faulted, timeout, quiet=False):
    """Print the report of one pair of runs (unless quiet); return its
    figures: cw, fw (None: did not finish), ettr, lost, faults as a list of
    (kind, resumed_s, back_s, redone) with None for what never came."""
    out = [] if quiet else None
    say = (lambda s: out.append(s)) if quiet else print
    cw, fw = wall(clean), wall(faulted)
    tag = f"RESULT {prog:2} {launcher:8}"
    say(f"{tag} fault-free {('%.1f s' % cw) if cw else 'did not finish in %s s' % timeout}: {final(clean)}")
    say(f"{tag} faulted    {('%.1f s' % fw) if fw else 'did not recover in %s s' % timeout}: {final(faulted)}")
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
    res_ = {"cw": cw, "fw": fw, "nfaults": len(faults), "faults": [],
            "ettr": None, "lost": None}
    if cw and fw:
        res_["ettr"] = cw / fw
    elif cw and not fw:
        res_["ettr"] = 0.0
    if cw and fw and faults:
        lost = (fw - cw) / len(faults)
        res_["lost"] = lost
        say(f"{tag} ETTR {cw / fw:.3f} with {len(faults)} faults in {fw:.0f} s; "
            f"lost {lost:.1f} s per fault, so ETTR {60 / (60 + max(lost, 0)):.3f} at one fault a minute")
    elif cw and fw:
        say(f"{tag} ETTR {cw / fw:.3f} with no fault in {fw:.0f} s (the run ended before the first)")
    elif not fw:
        say(f"{tag} ETTR 0 (the faulted run did not finish in {timeout} s)")
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
        parts = [f"{tag} fault {kind:11} at step {sf:5}:"]
        if res is not None:
            parts.append(f"resumed after {res - tf:6.2f} s from step {step} ({max(sf - step, 0)} steps redone),")
        else:
            parts.append("no new attempt before the next fault,")
        parts.append(f"back past step {sf} after {back - tf:6.2f} s" if back else "never back past that step")
        say(" ".join(parts))
        res_["faults"].append((kind, None if res is None else res - tf,
                               None if back is None else back - tf,
                               max(sf - step, 0) if step is not None else 0))
    return res_


def med(xs, fmt="%.2f", unit="", none="never"):
    """"median (min-max, n)" of xs, where None counts as longer than any
    value and is written 'none'; '-' if xs is empty."""
    if not xs:
        return "-"
    inf = float("inf")
    v = sorted(inf if x is None else x for x in xs)
    if v[0] == inf:
        return f"{none} (all {len(v)})" if len(v) > 1 else none
    m = statistics.median(v)
    w = lambda x: none if x == inf else fmt % x
    if len(v) == 1:
        return w(m) + unit
    return f"{w(m)}{unit if m != inf else ''} ({w(v[0])}-{w(v[-1])}{unit if v[-1] != inf else ''}, n={len(v)})"


def medians(prog, timeout, specs):
    runs = {}
    for spec in specs:
        launcher, pairs = spec.split("=", 1)
        runs[launcher] = [report(prog, launcher, *p.split(":"), timeout, quiet=True)
                          for p in pairs.split(",") if p]
    ls = list(runs)
    late = f"> {timeout} s"
    print(f"MEDIANS {prog}: {len(runs[ls[0]])} repetitions each; median (min-max, n)")
    print("| | " + " | ".join(ls) + " |")
    print("|---|" + "---|" * len(ls))

    def row(name, get, fmt="%.1f", unit=" s", none=late):
        print(f"| {name} | " + " | ".join(
            med([get(r) for r in runs[l]], fmt, unit, none) for l in ls) + " |")

    def at1(r):
        return None if r["lost"] is None else 60 / (60 + max(r["lost"], 0))

    row("wall, fault-free", lambda r: r["cw"])
    row("wall, faulted", lambda r: r["fw"])
    print("| faults in each faulted run | " + " | ".join(
        ", ".join(str(r["nfaults"]) for r in runs[l]) for l in ls) + " |")
    row("ETTR (fault-free / faulted)",
        lambda r: r["ettr"] if r["ettr"] is not None else 0.0, "%.3f", "")
    # Over the runs that had a fault (one that did not finish: no recovery).
    print("| lost per fault | " + " | ".join(
        med([r["lost"] if r["fw"] else None for r in runs[l]
             if r["nfaults"] or not r["fw"]], "%.1f", " s", "no recovery")
        for l in ls) + " |")
    # A run that did not finish counts 0; one without a fault does not
    # count.  ETTR above counts every run: it is what the schedule gave.
    print("| ETTR at one fault a minute, 60 / (60 + lost) | " + " | ".join(
        med([0.0 if r["fw"] is None else at1(r) for r in runs[l]
             if r["fw"] is None or at1(r) is not None], "%.3f") for l in ls) + " |")
    print()
    print(f"PER FAULT {prog}: from the fault to the new attempt's resume line "
          "(resumed) and to the job past the step it had reached (back); "
          "median (min-max, n) over every fault of the type in every repetition")
    print("| fault | " + " | ".join(f"{l} resumed | {l} back" for l in ls) + " |")
    print("|---|" + "---|---|" * len(ls))
    for kind in KINDS:
        cells, seen = [], False
        for l in ls:
            fs = [f for r in runs[l] for f in r["faults"] if f[0] == kind]
            seen |= bool(fs)
            red = f", {sum(f[3] for f in fs)} steps redone" if fs else ""
            cells.append(med([f[1] for f in fs], "%.2f", " s", "no new attempt") + red)
            cells.append(med([f[2] for f in fs], "%.2f", " s", "never"))
        if seen:
            print(f"| {kind} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if sys.argv[1] == "--medians":
        medians(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        prog, launcher, clean, faulted, timeout = sys.argv[1:]
        report(prog, launcher, clean, faulted, timeout)
