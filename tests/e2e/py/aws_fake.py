#!/usr/bin/env python3
"""aws_fake.py DIR -- a recorder that stands in for AWS in the tests.

There is no AWS here and nothing may contact it: the real `aws` CLI is
pointed at this server with --endpoint-url (elrun's ELRUN_AWS_ENDPOINT_URL),
so the CLI builds and validates every request against AWS's own service model
offline, and this server answers with the documented response shapes of AWS
Batch (REST-JSON: /v1/registerjobdefinition, /v1/submitjob, /v1/describejobs,
/v1/terminatejob), CloudWatch Logs (JSON 1.1: Logs_20140328.GetLogEvents),
and CloudFormation and Auto Scaling (the query protocol, XML answers:
CreateStack, DescribeStacks, DescribeStackResource, DeleteStack,
SetDesiredCapacity, DescribeAutoScalingGroups), and EC2's DescribeInstances
(query protocol; what the fleet's user data asks to find etcd, t0821), from
DIR/instances: one instance a line, "ID PRIVATE-IP STATE KEY=VALUE,...",
the tags last, filtered by tag:KEY and instance-state-name.
It listens on 127.0.0.1 or $AWS_FAKE_ADDR (an ephemeral port, written to
DIR/port), appends
each request as one JSON line to DIR/requests.jsonl, and is steered by files:
DIR/status (the job's status word, default RUNNING), DIR/fail (every request
gets a 400 ClientException with the file's text).  SIGTERM ends it.
"""
import json
import os
import signal
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

D = sys.argv[1]
JOBS = {}          # jobId -> {"name", "def", "nodes", "reason"}
DEFS = {}          # name -> revision
STACKS = {}        # stack name -> status
GROUPS = {}        # Auto Scaling group -> desired capacity


def read(name, default=None):
    try:
        with open(os.path.join(D, name)) as f:
            return f.read().strip()
    except OSError:
        return default


def node_job(jid, j, k, status):
    c = {"image": "img", "logStreamName": "elrun/default/%s-%d" % (jid, k),
         "networkInterfaces": [{"privateIpv4Address": "10.0.0.%d" % (10 + k)}]}
    n = {"jobId": "%s#%d" % (jid, k), "jobName": j["name"],
         "jobQueue": j["queue"], "status": status, "createdAt": 1700000000000,
         "jobDefinition": j["def"], "nodeDetails": {"nodeIndex": k,
                                                   "isMainNode": k == 0},
         "container": c, "attempts": []}
    if status in ("SUCCEEDED", "FAILED"):
        c["exitCode"] = 0 if status == "SUCCEEDED" or k != 1 else 1
        n["stoppedAt"] = 1700000100000
        if status == "FAILED" and k == 1:
            c["reason"] = "Essential container in task exited"
            n["statusReason"] = "agent on node 1: worker rank 2 exited 1"
    return n


class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def reply(self, code, obj, ctype="application/json", etype=None):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if etype:
            self.send_header("x-amzn-ErrorType", etype)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        target = self.headers.get("X-Amz-Target", "")
        form = "x-www-form-urlencoded" in self.headers.get("Content-Type", "")
        try:
            body = ({k: v[0] for k, v in parse_qs(raw.decode()).items()}
                    if form else json.loads(raw) if raw else {})
        except ValueError:
            body = {"_raw": raw.decode(errors="replace")}
        with open(os.path.join(D, "requests.jsonl"), "a") as f:
            f.write(json.dumps({"path": self.path, "target": target,
                                "body": body}) + "\n")
        fail = read("fail")
        if fail is not None:
            t = "application/x-amz-json-1.1" if target else "application/json"
            return self.reply(400, {"__type": "ClientException",
                                    "message": fail}, t, "ClientException")
        if form:
            return self.query(body)
        if target == "Logs_20140328.GetLogEvents":
            return self.logs(body)
        op = self.path.rstrip("/").split("/")[-1]
        if op == "registerjobdefinition":
            name = body["jobDefinitionName"]
            DEFS[name] = DEFS.get(name, 0) + 1
            arn = "arn:aws:batch:us-east-1:123456789012:job-definition/%s:%d" % (
                name, DEFS[name])
            return self.reply(200, {"jobDefinitionName": name,
                                    "jobDefinitionArn": arn,
                                    "revision": DEFS[name]})
        if op == "submitjob":
            jid = str(uuid.uuid4())
            nodes = 1
            JOBS[jid] = {"name": body["jobName"], "queue": body["jobQueue"],
                         "def": body["jobDefinition"], "nodes": nodes,
                         "reason": ""}
            # the node count is the registered definition's
            req = [json.loads(l) for l in open(os.path.join(
                D, "requests.jsonl"))]
            for r in req:
                if r["path"].endswith("registerjobdefinition"):
                    JOBS[jid]["nodes"] = r["body"]["nodeProperties"]["numNodes"]
            return self.reply(200, {"jobArn": "arn:aws:batch:us-east-1:"
                                    "123456789012:job/" + jid,
                                    "jobName": body["jobName"], "jobId": jid})
        if op == "describejobs":
            out = []
            status = read("status", "RUNNING")
            for want in body.get("jobs", []):
                jid, _, k = want.partition("#")
                j = JOBS.get(jid)
                if not j:
                    continue
                st = "FAILED" if j["reason"] else status
                if k:
                    out.append(node_job(jid, j, int(k), st))
                    continue
                out.append({"jobId": jid, "jobName": j["name"],
                            "jobQueue": j["queue"], "status": st,
                            "statusReason": j["reason"] or (
                                "Essential container in main node exited"
                                if st == "FAILED" else ""),
                            "createdAt": 1700000000000,
                            "jobDefinition": j["def"],
                            "attempts": [{}] if st in ("FAILED",
                                                      "SUCCEEDED") else [],
                            "nodeProperties": {"numNodes": j["nodes"],
                                               "mainNode": 0},
                            "tags": {"elrun:name": j["name"]}})
            return self.reply(200, {"jobs": out})
        if op == "terminatejob":
            j = JOBS.get(body.get("jobId"))
            if not j:
                return self.reply(400, {"message": "no such job"},
                                  etype="ClientException")
            j["reason"] = body.get("reason", "terminated")
            return self.reply(200, {})
        return self.reply(400, {"message": "the recorder does not know "
                                + self.path + " " + target},
                          etype="ClientException")

    def xml(self, action, result):
        ns = ("autoscaling.amazonaws.com/doc/2011-01-01" if action in (
            "SetDesiredCapacity", "DescribeAutoScalingGroups") else
            "cloudformation.amazonaws.com/doc/2010-05-15")
        r = ("<%sResult>%s</%sResult>" % (action, result, action)
             if result is not None else "")
        body = ('<%sResponse xmlns="http://%s/">%s<ResponseMetadata>'
                '<RequestId>r1</RequestId></ResponseMetadata></%sResponse>'
                % (action, ns, r, action)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def instances(self, q):
        want = {}
        i = 1
        while "Filter.%d.Name" % i in q:
            vals, j = [], 1
            while "Filter.%d.Value.%d" % (i, j) in q:
                vals.append(q["Filter.%d.Value.%d" % (i, j)])
                j += 1
            want[q["Filter.%d.Name" % i]] = vals
            i += 1
        items = []
        for line in (read("instances", "") or "").splitlines():
            iid, ip, st, tags = (line.split() + [""])[:4]
            tags = dict(t.split("=", 1) for t in tags.split(",") if t)
            ok = True
            for k, vals in want.items():
                if k == "instance-state-name":
                    ok = ok and st in vals
                elif k.startswith("tag:"):
                    ok = ok and tags.get(k[4:]) in vals
                else:
                    return self.reply(400, {"message": "the recorder does not "
                                            "filter on %s" % k},
                                      etype="InvalidParameterValue")
            if ok:
                items.append("<item><instanceId>%s</instanceId><instanceState>"
                             "<code>16</code><name>%s</name></instanceState>"
                             "<privateIpAddress>%s</privateIpAddress></item>"
                             % (iid, st, ip))
        body = ('<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/'
                'doc/2016-11-15/"><requestId>r1</requestId><reservationSet>%s'
                '</reservationSet></DescribeInstancesResponse>' % "".join(
                    "<item><reservationId>r-%d</reservationId><ownerId>"
                    "123456789012</ownerId><instancesSet>%s</instancesSet>"
                    "</item>" % (n, it) for n, it in enumerate(items))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def query(self, q):
        a, name = q.get("Action"), q.get("StackName", "")
        if a == "DescribeInstances":
            return self.instances(q)
        sid = "arn:aws:cloudformation:us-east-1:123456789012:stack/%s/1" % name
        if a == "CreateStack":
            STACKS[name] = "CREATE_COMPLETE"
            return self.xml(a, "<StackId>%s</StackId>" % sid)
        if a == "DescribeStacks":
            return self.xml(a, "<Stacks><member><StackName>%s</StackName>"
                            "<StackId>%s</StackId><CreationTime>2024-01-01T00:"
                            "00:00Z</CreationTime><StackStatus>%s</StackStatus>"
                            "</member></Stacks>" % (name, sid, STACKS.get(
                                name, "DELETE_COMPLETE")))
        if a == "DescribeStackResource":
            return self.xml(a, "<StackResourceDetail><StackName>%s</StackName>"
                            "<LogicalResourceId>%s</LogicalResourceId>"
                            "<PhysicalResourceId>%s-WorkerGroup-X1</Physical"
                            "ResourceId><ResourceType>AWS::AutoScaling::"
                            "AutoScalingGroup</ResourceType><LastUpdated"
                            "Timestamp>2024-01-01T00:00:00Z</LastUpdated"
                            "Timestamp><ResourceStatus>CREATE_COMPLETE"
                            "</ResourceStatus></StackResourceDetail>" % (
                                name, q.get("LogicalResourceId"), name))
        if a == "DeleteStack":
            STACKS[name] = "DELETE_IN_PROGRESS"
            return self.xml(a, None)
        if a == "SetDesiredCapacity":
            GROUPS[q["AutoScalingGroupName"]] = int(q["DesiredCapacity"])
            return self.xml(a, None)
        if a == "DescribeAutoScalingGroups":
            g = q.get("AutoScalingGroupNames.member.1", "")
            n = GROUPS.get(g, 2)
            inst = "".join("<member><InstanceId>i-%d</InstanceId><Availability"
                           "Zone>us-east-1a</AvailabilityZone><LifecycleState>"
                           "InService</LifecycleState><HealthStatus>Healthy"
                           "</HealthStatus><ProtectedFromScaleIn>false</"
                           "ProtectedFromScaleIn></member>" % i
                           for i in range(n))
            return self.xml(a, "<AutoScalingGroups><member><AutoScalingGroup"
                            "Name>%s</AutoScalingGroupName><MinSize>2</MinSize>"
                            "<MaxSize>4</MaxSize><DesiredCapacity>%d</Desired"
                            "Capacity><DefaultCooldown>300</DefaultCooldown>"
                            "<AvailabilityZones><member>us-east-1a</member>"
                            "</AvailabilityZones><HealthCheckType>EC2</Health"
                            "CheckType><CreatedTime>2024-01-01T00:00:00Z</"
                            "CreatedTime><Instances>%s</Instances></member>"
                            "</AutoScalingGroups>" % (g, n, inst))
        return self.reply(400, {"message": "the recorder does not know %s" % a},
                          etype="ClientException")

    def logs(self, body):
        stream = body.get("logStreamName", "")
        if body.get("nextToken"):
            return self.reply(200, {"events": [], "nextForwardToken":
                                    body["nextToken"], "nextBackwardToken":
                                    "b/0"}, "application/x-amz-json-1.1")
        k = stream.rsplit("-", 1)[-1]
        ev = [{"timestamp": 1700000000000 + i, "message":
               "node %s line %d" % (k, i), "ingestionTime": 1700000000001 + i}
              for i in range(3)]
        if body.get("limit"):
            ev = ev[-int(body["limit"]):]
        return self.reply(200, {"events": ev, "nextForwardToken": "f/3",
                                "nextBackwardToken": "b/0"},
                          "application/x-amz-json-1.1")


def main():
    srv = ThreadingHTTPServer((os.environ.get("AWS_FAKE_ADDR", "127.0.0.1"),
                               0), H)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    tmp = os.path.join(D, "port.tmp")
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, os.path.join(D, "port"))
    srv.serve_forever()


main()
