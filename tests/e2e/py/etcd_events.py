"""etcd_events.py HOST:PORT RUN_ID COUNT [LOST_SEQ...]: write COUNT events
into the etcd history of job RUN_ID as the agents write them (docs/EVENTS.md:
/elrun/<run_id>/ev/<slot>, slot = seq - 1, then ev/n = COUNT), over one
HTTP connection to etcd's JSON gateway.  A LOST_SEQ is counted but never
written (its writer died between its two requests).  The events are failure
events of a 256-node job (about 330 bytes each).  Used by t0910 and
bench/events.sh."""
import base64
import http.client
import json
import sys

host, port = sys.argv[1].rsplit(":", 1)
run_id, count = sys.argv[2], int(sys.argv[3])
lost = {int(s) for s in sys.argv[4:]}
conn = http.client.HTTPConnection(host, int(port))


def b64(s):
    return base64.b64encode(s.encode()).decode()


def put(key, value):
    body = json.dumps({"key": b64("/elrun/%s/ev/%s" % (run_id, key)), "value": b64(value)})
    conn.request("POST", "/v3/kv/put", body)
    r = conn.getresponse()
    r.read()
    assert r.status == 200, (key, r.status)


for seq in range(1, count + 1):
    if seq in lost:
        continue
    node = "node%d" % (seq % 256)
    put(str(seq - 1), json.dumps({
        "seq": seq, "time": "2026-12-01T00:00:00.000Z", "time_ms": seq, "kind": "failure",
        "node": node, "label": node + "/3f2a", "round": seq // 8,
        "fields": {"rank": seq % 2048, "local_rank": seq % 8, "pid": 30000 + seq,
                   "host": node + ".example", "exitcode": 1, "signal": 0, "signal_name": "",
                   "message": "ValueError: boom", "ran_ms": 1234, "root_cause": True}}))
put("n", str(count))
