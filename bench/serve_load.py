"""Closed-loop load on a running `kiln-runtime serve-model`: C client threads, each with its own
keep-alive connection, send single-sample requests for T seconds. Prints requests/s, latency
p50/p99 and the samples per engine run that /stats reports (the batching achieved).

Usage: python3 bench/serve_load.py PORT MODEL_NAME CLIENTS SECONDS [SHAPE, default 1,1,28,28]
The Python client itself costs about as much per request as a small model, so on few cores it is
often the limit: quote numbers with the machine's load and core count.
"""
import http.client
import json
import sys
import threading
import time

import numpy as np

port, name, clients, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
shape = tuple(int(v) for v in sys.argv[5].split(",")) if len(sys.argv) > 5 else (1, 1, 28, 28)


def get(path):
    conn = http.client.HTTPConnection("127.0.0.1", int(port))
    conn.request("GET", path)
    return json.loads(conn.getresponse().read())


input_name = get(f"/v2/models/{name}")["inputs"][0]["name"]
x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
body = json.dumps({"inputs": [{"name": input_name, "shape": list(shape), "datatype": "FP32", "data": x.ravel().tolist()}]})


def stats():
    s = get(f"/v2/models/{name}/stats")["model_stats"][0]
    return s["inference_count"], s["execution_count"]


latencies, lock = [], threading.Lock()
deadline = time.time() + seconds


def client():
    conn, mine = http.client.HTTPConnection("127.0.0.1", int(port)), []
    while time.time() < deadline:
        start = time.perf_counter()
        conn.request("POST", f"/v2/models/{name}/infer", body)
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            sys.exit(f"status {r.status}")
        mine.append(time.perf_counter() - start)
    with lock:
        latencies.extend(mine)


before, t0 = stats(), time.time()
threads = [threading.Thread(target=client) for _ in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
elapsed, after = time.time() - t0, stats()
latencies.sort()
print(f"{clients} clients: {len(latencies) / elapsed:.0f} req/s, p50 {latencies[len(latencies) // 2] * 1e3:.2f} ms, "
      f"p99 {latencies[int(len(latencies) * 0.99)] * 1e3:.2f} ms, "
      f"{(after[0] - before[0]) / max(1, after[1] - before[1]):.2f} samples per engine run")
