#!/usr/bin/env python3
"""imds.py DIR IP -- a fake of EC2's instance metadata service (IMDSv2)
for one simulated instance (t0821), on 127.0.0.1:80 of the instance's own
network namespace (never 169.254.169.254: the test's shim rewrites the
user data's metadata address to this host's own loopback).

IMDSv2 as the user data uses it: PUT /latest/api/token with
X-aws-ec2-metadata-token-ttl-seconds (1..21600) gives a token; every GET
needs a live token in X-aws-ec2-metadata-token, else 401.  Paths:
meta-data/local-ipv4 (IP), meta-data/instance-id, and
meta-data/spot/instance-action: 404 until the file DIR/spot-instance-action
exists (the test writes EC2's JSON there to send the interruption notice),
then its content.  Every request is one line in DIR/imds.log ("METHOD PATH
STATUS").  Writes DIR/imds.ready once it listens; SIGTERM ends it.
"""
import os
import secrets
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

D, IP = sys.argv[1], sys.argv[2]
TOKENS = {}  # token -> expiry (monotonic)


class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def answer(self, code, text=""):
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        with open(os.path.join(D, "imds.log"), "a") as f:
            f.write("%s %s %d\n" % (self.command, self.path, code))

    def do_PUT(self):
        if self.path != "/latest/api/token":
            return self.answer(404)
        try:
            ttl = int(self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"))
        except (TypeError, ValueError):
            return self.answer(400)
        if not 1 <= ttl <= 21600:
            return self.answer(400)
        tok = secrets.token_urlsafe(32)
        TOKENS[tok] = time.monotonic() + ttl
        self.answer(200, tok)

    def do_GET(self):
        tok = self.headers.get("X-aws-ec2-metadata-token", "")
        if TOKENS.get(tok, 0) < time.monotonic():
            return self.answer(401)
        p = self.path
        if p == "/latest/meta-data/local-ipv4":
            return self.answer(200, IP)
        if p == "/latest/meta-data/instance-id":
            return self.answer(200, "i-" + IP.replace(".", ""))
        if p == "/latest/meta-data/spot/instance-action":
            try:
                with open(os.path.join(D, "spot-instance-action")) as f:
                    return self.answer(200, f.read().strip())
            except OSError:
                return self.answer(404)
        self.answer(404)


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 80), H)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    open(os.path.join(D, "imds.ready"), "w").write("127.0.0.1:80\n")
    srv.serve_forever()


main()
