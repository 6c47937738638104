#!/bin/sh
# A rendezvous-test worker that uses the workers' store first: every worker of
# the round checks in through PyTorch's TCPStore client at
# MASTER_ADDR:MASTER_PORT (key t0700/<round>/<rank> = its host name) and
# waits for all WORLD_SIZE check-ins, then writes the outcome to
# DIR/s.<round>.<rank> ("store=ok hosts=elh1,elh2" or "... store=FAIL") and
# goes on as rdzv_worker.sh (DIR/w.<round>.<rank>; runs until DIR/finish).
# RDZV_PYTHON: a python3 with torch (default /usr/bin/python3); without
# torch the file says "store=skipped".
dir=$1
py=${RDZV_PYTHON:-/usr/bin/python3}
out="$dir/s.$TORCHELASTIC_RESTART_COUNT.$RANK"
if "$py" -c 'import torch.distributed' 2>/dev/null; then
    "$py" - >"$out.tmp" 2>&1 <<'EOF' || echo "store=FAIL" >>"$out.tmp"
import datetime, os, socket
import torch.distributed as dist
r, rank, n = (os.environ[k] for k in ("TORCHELASTIC_RESTART_COUNT", "RANK", "WORLD_SIZE"))
s = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), int(n), False,
                  timeout=datetime.timedelta(seconds=30))
key = lambda i: "t0700/%s/%s" % (r, i)
s.set(key(rank), socket.gethostname())
s.wait([key(i) for i in range(int(n))])
print("store=ok hosts=" + ",".join(sorted({s.get(key(i)).decode() for i in range(int(n))})))
EOF
else
    echo "store=skipped (no torch in $py)" >"$out.tmp"
fi
mv "$out.tmp" "$out"
exec sh "$(dirname "$0")/rdzv_worker.sh" "$dir"
