"""Client side of serve_model_test.sh: talks to a running `kiln-runtime serve-model` over HTTP.

Usage: serve_model_check.py PORT PID RUNTIME PLAN WORKDIR MODEL_NAME
Checks concurrent single-sample requests and a 6-sample request against `kiln-runtime run` on the
same inputs, that /stats shows shared engine runs, every bad request's status and message,
keep-alive, and that SIGTERM lets an in-flight request finish. Exits non-zero on the first failure.
"""
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np

port, pid, runtime, plan, work, name = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
BATCH = 4


def fail(message):
    print("FAIL:", message, file=sys.stderr)
    sys.exit(1)


def call(method, path, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=60)
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    try:
        doc = json.loads(data) if data else {}
    except ValueError:
        fail(f"{method} {path}: response is not JSON: {data[:200]!r}")
    return r.status, doc


def infer_body(x, input_name, rid="", datatype="FP32", outputs=None):
    doc = {"id": rid, "inputs": [{"name": input_name, "shape": list(x.shape), "datatype": datatype, "data": x.reshape(-1).tolist()}]}
    if outputs:
        doc["outputs"] = [{"name": o} for o in outputs]
    return json.dumps(doc)


def stats():
    status, doc = call("GET", f"/v2/models/{name}/stats")
    if status != 200:
        fail(f"stats: {status} {doc}")
    s = doc["model_stats"][0]
    return s["inference_count"], s["execution_count"]


def reference(x):
    """`kiln-runtime run` on the same samples, in padded chunks of the plan's batch."""
    outs = []
    for start in range(0, len(x), BATCH):
        chunk = np.zeros((BATCH,) + x.shape[1:], np.float32)
        part = x[start:start + BATCH]
        chunk[:len(part)] = part
        src, dst = os.path.join(work, f"ref{start}.npy"), os.path.join(work, f"ref{start}.npz")
        np.save(src, chunk)
        subprocess.run([runtime, "run", plan, "--input", src, "--output", dst, "--threads", "1"], check=True,
                       stdout=subprocess.DEVNULL)
        outs.append(np.load(dst)["logits"][:len(part)])
    return np.concatenate(outs)


def close_enough(got, want, what):
    if got.shape != want.shape:
        fail(f"{what}: shape {got.shape}, expected {want.shape}")
    if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
        fail(f"{what}: max |error| {np.abs(got - want).max()} (got {got.ravel()[:4]}, want {want.ravel()[:4]})")


# --- metadata ---
status, meta = call("GET", f"/v2/models/{name}")
if status != 200 or meta.get("platform") != "kiln":
    fail(f"metadata: {status} {meta}")
inp, out = meta["inputs"][0], meta["outputs"][0]
if inp["shape"] != [-1, 1, 28, 28] or inp["datatype"] != "FP32" or out["shape"] != [-1, 10]:
    fail(f"metadata shapes: {meta}")
for path in ("/v2/health/live", "/v2/health/ready", f"/v2/models/{name}/ready", "/v2"):
    if call("GET", path)[0] != 200:
        fail(f"GET {path} is not 200")

rng = np.random.default_rng(7)
x = rng.standard_normal((14, 1, 28, 28)).astype(np.float32)
want = reference(x)

# --- 8 concurrent single-sample requests share engine runs ---
before = stats()
results = [None] * 8
barrier = threading.Barrier(8)


def single(i):
    barrier.wait()
    results[i] = call("POST", f"/v2/models/{name}/infer", infer_body(x[i:i + 1], inp["name"], f"r{i}"))


threads = [threading.Thread(target=single, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for i, (status, doc) in enumerate(results):
    if status != 200:
        fail(f"single request {i}: {status} {doc}")
    if doc["id"] != f"r{i}" or doc["model_name"] != name:
        fail(f"single request {i}: id/model {doc.get('id')} {doc.get('model_name')}")
    o = doc["outputs"][0]
    if o["name"] != out["name"] or o["datatype"] != "FP32":
        fail(f"single request {i}: output {o['name']} {o['datatype']}")
    close_enough(np.array(o["data"], np.float32).reshape(o["shape"]), want[i:i + 1], f"single request {i}")
after = stats()
served, runs = after[0] - before[0], after[1] - before[1]
print(f"8 concurrent single-sample requests: {served} samples in {runs} engine runs")
if served != 8 or runs >= 8:
    fail(f"no batching: {served} samples took {runs} engine runs")

# --- one 6-sample request: chunks of 4, nested data ---
body = json.dumps({"inputs": [{"name": inp["name"], "shape": [6, 1, 28, 28], "datatype": "FP32",
                               "data": x[8:14].tolist()}], "outputs": [{"name": out["name"]}]})
status, doc = call("POST", f"/v2/models/{name}/infer", body)
if status != 200:
    fail(f"6-sample request: {status} {doc}")
o = doc["outputs"][0]
close_enough(np.array(o["data"], np.float32).reshape(o["shape"]), want[8:14], "6-sample request")
total = stats()
print(f"totals: inference_count {total[0]}, execution_count {total[1]}")
if not total[1] < total[0]:
    fail(f"execution_count {total[1]} is not below inference_count {total[0]}")

# --- bad requests: status and message; the server stays up ---
good = x[:1]
bad = [
    ("POST", "/v2/models/nope/infer", infer_body(good, inp["name"]), 404, "unknown model 'nope'"),
    ("GET", "/v2/nothing", None, 404, "unknown path"),
    ("GET", f"/v2/models/{name}/infer", None, 405, "not allowed"),
    ("POST", f"/v2/models/{name}/infer", "{\"inputs\": [", 400, "malformed JSON"),
    ("POST", f"/v2/models/{name}/infer", infer_body(good, "pixels"), 400, "unknown input 'pixels'"),
    ("POST", f"/v2/models/{name}/infer", json.dumps({"inputs": []}), 400, f"missing input '{inp['name']}'"),
    ("POST", f"/v2/models/{name}/infer", infer_body(np.zeros((1, 1, 28, 28), np.int64), inp["name"], datatype="INT64"), 400,
     "has datatype INT64, the model expects FP32"),
    ("POST", f"/v2/models/{name}/infer", infer_body(good, inp["name"], datatype="INT32"), 400, "datatype INT32 expects integers"),
    ("POST", f"/v2/models/{name}/infer", infer_body(good, inp["name"]).replace("FP32", "FP99"), 400, "unknown datatype 'FP99'"),
    ("POST", f"/v2/models/{name}/infer", infer_body(x[:1, :, :27, :], inp["name"]), 400, "the model expects [-1,1,28,28]"),
    ("POST", f"/v2/models/{name}/infer", infer_body(good, inp["name"]).replace("[1, 1, 28, 28]", "[1, 1, 28, 29]"), 400,
     "needs 812"),
    ("POST", f"/v2/models/{name}/infer", infer_body(good, inp["name"], outputs=["probs"]), 400, "unknown output 'probs'"),
]
for method, path, body, want_status, needle in bad:
    status, doc = call(method, path, body)
    if status != want_status or needle not in doc.get("error", ""):
        fail(f"{method} {path} {str(body)[:60]}: got {status} {doc}, expected {want_status} with '{needle}'")
print(f"{len(bad)} bad requests answered with the right status and message")

# body over --max-body-mb 1: 413 once the headers are read, without reading it all
conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=60)
conn.putrequest("POST", f"/v2/models/{name}/infer")
conn.putheader("Content-Length", str(2 << 20))
conn.endheaders()
try:
    conn.send(b" " * (2 << 20))
except OSError:
    pass  # the server may close its side first; the answer is already on the way
r = conn.getresponse()
doc = json.loads(r.read())
conn.close()
if r.status != 413 or "exceeds the limit" not in doc.get("error", ""):
    fail(f"2 MiB body: {r.status} {doc}")
print("2 MiB body: 413", doc["error"])

# malformed HTTP and oversized headers: an answer, then the connection closes
import socket


def raw(data):
    with socket.create_connection(("127.0.0.1", int(port)), timeout=60) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


for data, expected_status in [(b"GARBAGE\r\n\r\n", b"400 Bad Request"),
                   (b"GET /v2/health/live HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", b"431 Request Header Fields Too Large"),
                   (b"POST /v2 HTTP/1.1\r\nContent-Length: abc\r\n\r\n", b"400 Bad Request")]:
    answer = raw(data)
    if expected_status not in answer or b'{"error":' not in answer:
        fail(f"{data[:40]!r}: {answer[:200]!r}")
print("malformed HTTP: 400, oversized header: 431")

# Expect: 100-continue: the server asks for the body once the header is accepted
body = infer_body(good, inp["name"], "continue").encode()
with socket.create_connection(("127.0.0.1", int(port)), timeout=60) as sock:
    sock.sendall(f"POST /v2/models/{name}/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n".encode())
    first = sock.recv(25)
    if not first.startswith(b"HTTP/1.1 100 Continue"):
        fail(f"Expect: 100-continue got {first!r}")
    sock.sendall(body)
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
if b" 200 OK" not in answer or b'"id":"continue"' not in answer:
    fail(f"after 100 Continue: {answer[:200]!r}")
print("Expect: 100-continue answered")

# keep-alive: several requests on one connection
conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=60)
conn.request("GET", "/v2/health/live")
conn.getresponse().read()
sock = conn.sock
for _ in range(3):
    conn.request("POST", f"/v2/models/{name}/infer", infer_body(good, inp["name"]))
    r = conn.getresponse()
    r.read()
    if r.status != 200 or conn.sock is not sock:
        fail(f"keep-alive: status {r.status}, same socket {conn.sock is sock}")
conn.close()
if call("GET", "/v2/health/ready")[0] != 200:
    fail("not ready after the bad requests")

# --- SIGTERM with a request in flight: it is answered, then the server exits (the shell checks 0) ---
conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=60)
conn.request("POST", f"/v2/models/{name}/infer", infer_body(x[2:3], inp["name"], "last"))
time.sleep(0.25)  # the server has read it; it waits in the batcher for --max-batch-delay-ms (500)
os.kill(pid, signal.SIGTERM)
r = conn.getresponse()
doc = json.loads(r.read())
if r.status != 200 or doc.get("id") != "last":
    fail(f"in-flight request during SIGTERM: {r.status} {doc}")
o = doc["outputs"][0]
close_enough(np.array(o["data"], np.float32).reshape(o["shape"]), want[2:3], "in-flight request")
print("in-flight request answered after SIGTERM")
