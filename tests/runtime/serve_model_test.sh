#!/usr/bin/env bash
# `kiln-runtime serve-model` end to end on the Fashion-MNIST example compiled for batch 4: starts
# the server on a free port, runs serve_model_check.py against it (outputs vs `kiln-runtime run`,
# batching via /stats, bad requests, keep-alive, SIGTERM with a request in flight), and checks
# that the server then exits 0.
# Usage: serve_model_test.sh KILN KILN_RUNTIME MODEL. Exit 77 = skipped, with a reason.
set -euo pipefail
kiln=$1 runtime=$2 model=$3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-serve-test.XXXXXX")
pid=
cleanup() {
  if [ -n "$pid" ]; then kill -9 "$pid" 2> /dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$work/serve.log" ] && cat "$work/serve.log" >&2; exit 1; }

py=
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c 'import numpy' 2> /dev/null; then py=$candidate; break; fi
done
[ -n "$py" ] || { echo "SKIP: needs python3 with numpy (apt-get install python3-numpy)"; exit 77; }

"$kiln" compile "$model" -o "$work/fashion.kiln" --batch 4 > "$work/compile.log" 2>&1 || { cat "$work/compile.log"; fail "compile failed"; }
# A long batch delay keeps the in-flight request of the SIGTERM check waiting in the queue.
"$runtime" serve-model --model "$work/fashion.kiln" --name fashion --host 127.0.0.1 --port 0 --port-file "$work/port" \
  --threads 1 --max-batch-delay-ms 500 --max-body-mb 1 > "$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 300); do
  [ -s "$work/port" ] && break
  kill -0 "$pid" 2> /dev/null || fail "serve-model exited before listening"
  sleep 0.1
done
[ -s "$work/port" ] || fail "no port file after 30 s"
port=$(cat "$work/port")
grep -q "model 'fashion' on http://127.0.0.1:$port/v2/models/fashion (batch 4, max batch 4, max delay 500 ms" "$work/serve.log" || fail "no ready line"

"$py" "$here/serve_model_check.py" "$port" "$pid" "$runtime" "$work/fashion.kiln" "$work" fashion || fail "client checks failed"

set +e
wait "$pid"
rc=$?
set -e
pid=
cat "$work/serve.log"
[ "$rc" = 0 ] || fail "serve-model exited $rc after SIGTERM, expected 0"
grep -q "SIGTERM: finishing requests in flight" "$work/serve.log" || fail "no shutdown message"
echo "PASS: serve-model"
