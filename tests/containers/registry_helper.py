#!/usr/bin/env python3
"""Loopback servers for registry_test.sh (stdlib only; the product never needs Python).

  registry_helper.py token PORTFILE KEY.pem ISSUER SERVICE USER PASSWORD
      A bearer-token server: GET /token?service=…&scope=… with Basic USER:PASSWORD answers
      {"token": JWT} granting the requested scopes (RS256, signed with `openssl dgst`, header
      "kid" = the libtrust key ID the registry derives from its rootcertbundle); other
      credentials get 401.
  registry_helper.py proxy PORTFILE UPSTREAM_PORT MODE
      A forwarding proxy in front of the registry that injects faults:
        blob-put-500       every blob upload PUT answers 500 (never reaches the registry)
        blob-put-500-once  only the first one does
  registry_helper.py keyid KEY.pem
      Prints the libtrust key ID of the key's public half.
Each server binds 127.0.0.1 port 0 and writes the port it got to PORTFILE.
"""
import base64
import hashlib
import http.client
import http.server
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse


def write_port(path, port):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(port))
    os.rename(tmp, path)


def libtrust_key_id(key_pem):
    der = subprocess.run(["openssl", "pkey", "-in", key_pem, "-pubout", "-outform", "DER"],
                         check=True, capture_output=True).stdout
    b32 = base64.b32encode(hashlib.sha256(der).digest()[:30]).decode().rstrip("=")
    return ":".join(b32[i:i + 4] for i in range(0, len(b32), 4))


def b64url(data):
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def token_server(port_file, key_pem, issuer, service, user, password):
    kid = libtrust_key_id(key_pem)
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            sys.stderr.write("token: " + (args[0] % args[1:]) + "\n")

        def do_GET(self):
            url = urllib.parse.urlparse(self.path)
            query = urllib.parse.parse_qs(url.query)
            if url.path != "/token" or self.headers.get("Authorization") != expected:
                self.send_response(401)
                body = b'{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}'
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            access = []
            for scope in query.get("scope", []):
                kind, _, rest = scope.partition(":")
                name, _, actions = rest.rpartition(":")
                access.append({"type": kind, "name": name, "actions": actions.split(",")})
            now = int(time.time())
            header = {"typ": "JWT", "alg": "RS256", "kid": kid}
            claims = {"iss": issuer, "sub": user, "aud": query.get("service", [service])[0], "exp": now + 300,
                      "nbf": now - 10, "iat": now, "jti": str(now) + os.urandom(4).hex(), "access": access}
            signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
            signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key_pem], input=signing_input.encode(),
                                       check=True, capture_output=True).stdout
            body = json.dumps({"token": signing_input + "." + b64url(signature), "expires_in": 300}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    write_port(port_file, server.server_address[1])
    server.serve_forever()


def fault_proxy(port_file, upstream_port, mode):
    lock = threading.Lock()
    failures = {"left": 1 if mode == "blob-put-500-once" else -1}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            sys.stderr.write("proxy: " + (args[0] % args[1:]) + "\n")

        def inject(self):
            if self.command != "PUT" or "/blobs/uploads/" not in self.path:
                return False
            with lock:
                if failures["left"] == 0:
                    return False
                failures["left"] -= 1
            length = int(self.headers.get("Content-Length", "0"))
            while length > 0:  # drain the upload so the client reads the answer
                length -= len(self.rfile.read(min(length, 1 << 20)))
            body = b'{"errors":[{"code":"UNKNOWN","message":"injected fault: storage backend unavailable"}]}'
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return True

        def forward(self):
            if self.inject():
                return
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length) if length else None
            conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "transfer-encoding")}
            conn.request(self.command, self.path, body=body, headers=headers)  # Host kept: Locations point here
            response = conn.getresponse()
            data = response.read()
            self.send_response(response.status)
            for k, v in response.getheaders():
                if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)) if self.command != "HEAD" else
                             response.getheader("Content-Length", "0"))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            conn.close()

        do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = forward

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    write_port(port_file, server.server_address[1])
    server.serve_forever()


if __name__ == "__main__":
    if sys.argv[1] == "token":
        token_server(*sys.argv[2:8])
    elif sys.argv[1] == "proxy":
        fault_proxy(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif sys.argv[1] == "keyid":
        print(libtrust_key_id(sys.argv[2]))
    else:
        sys.exit(f"unknown mode {sys.argv[1]}")
