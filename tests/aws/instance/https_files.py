#!/usr/bin/env python3
"""https_files.py DIR ADDR CERT KEY -- serve the files of DIR over HTTPS on
ADDR (an ephemeral port; "PORT" is written to DIR/../https.port), in
t0821 the place the user data downloads elrun from (--elrun-url must be
https://; curl trusts the test's CA through CURL_CA_BUNDLE).  GET only, no
listing.  SIGTERM ends it.
"""
import os
import signal
import ssl
import sys
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

D, ADDR, CERT, KEY = sys.argv[1:5]


class H(SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def list_directory(self, path):
        self.send_error(403)


srv = ThreadingHTTPServer((ADDR, 0), partial(H, directory=D))
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(CERT, KEY)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
port_file = os.path.join(os.path.dirname(os.path.abspath(D)), "https.port")
with open(port_file + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(port_file + ".tmp", port_file)
srv.serve_forever()
