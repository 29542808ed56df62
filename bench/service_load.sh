#!/usr/bin/env bash
# Load on `kiln serve` (issue 7, must-show 5): wrk on loopback against GET /v1/jobs/{id} (job
# status) and POST /v1/plan (a JSON plan of the Fashion-MNIST example by model digest, warm
# caches); prints wrk's throughput and latency percentiles for each. Needs wrk (Debian: wrk).
# Usage: bench/service_load.sh [KILN] [SECONDS] [CONNECTIONS]   (defaults: build/kiln 10 16)
set -euo pipefail
cd "$(dirname "$0")/.."
kiln=${1:-build/kiln} seconds=${2:-10} connections=${3:-16}
command -v wrk > /dev/null || { echo "service_load: needs wrk (apt-get install wrk)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-service-load.XXXXXX")
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"' EXIT
examples=examples
"$kiln" bench-target --quick --db "$work/data/benchmarks.sqlite" > /dev/null 2>&1
"$kiln" serve --data-dir "$work/data" --port 0 --port-file "$work/port" --workers 1 > "$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 300); do [ -s "$work/port" ] && break; sleep 0.1; done
base="http://127.0.0.1:$(cat "$work/port")"

# One finished job to ask about.
id=$(curl -sS -F "description=@$examples/fashion-mnist/application.yaml" -F "target=@$examples/targets/local-cpu.yaml" \
       -F "model=@$examples/fashion-mnist/model.onnx" "$base/v1/jobs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
for _ in $(seq 600); do
  state=$(curl -sS "$base/v1/jobs/$id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
  case $state in succeeded|failed|cancelled) break ;; esac
  sleep 0.5
done
echo "job $id: $state"

# The model once by upload (kept by digest), then plans by digest.
digest=$(sha256sum "$examples/fashion-mnist/model.onnx" | cut -d' ' -f1)
curl -sS -o /dev/null -F "description=@$examples/fashion-mnist/application.yaml" -F "model=@$examples/fashion-mnist/model.onnx" "$base/v1/plan"
cat > "$work/plan.lua" << LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"description": {"name": "fashion-classifier", "model": {"path": "model.onnx", "sha256": "$digest"}, "inputs": {"input": {"shape": ["batch", 1, 28, 28], "dtype": "float32"}}, "objective": "throughput", "constraints": {"max_latency_ms": 10}, "optimizations": {"batch_sizes": [1, 8, 64]}}}'
LUA

echo "== GET /v1/jobs/$id: wrk -t2 -c$connections -d${seconds}s"
wrk -t2 -c"$connections" -d"${seconds}s" --latency "$base/v1/jobs/$id"
echo "== POST /v1/plan (JSON, model by digest): wrk -t2 -c$connections -d${seconds}s"
wrk -t2 -c"$connections" -d"${seconds}s" --latency -s "$work/plan.lua" "$base/v1/plan"
grep -c "" "$work/serve.log" > /dev/null
