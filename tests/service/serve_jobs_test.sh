#!/usr/bin/env bash
# `kiln serve` end to end: submits the Fashion-MNIST example with curl (multipart), checks an
# idempotent resubmit and a bad upload, SIGKILLs the server while the job runs, restarts it on
# the same data dir and checks that the job resumes after its last finished stage (not lost, not
# duplicated) and succeeds, reads its events (SSE), downloads an artifact, then stops the server with SIGTERM.
# Usage: serve_jobs_test.sh KILN EXAMPLES_DIR. Exit 77 = skipped, with a reason.
set -euo pipefail
kiln=$1 examples=$2
command -v curl > /dev/null || { echo "SKIP: needs curl"; exit 77; }
command -v python3 > /dev/null || { echo "SKIP: needs python3"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-serve-jobs.XXXXXX")
pid=
cleanup() {
  if [ -n "$pid" ]; then kill -9 "$pid" 2> /dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/serve*.log; do [ -f "$f" ] && { echo "== $f" >&2; cat "$f" >&2; }; done; exit 1; }
field() { python3 -c 'import json,sys; v=json.load(sys.stdin)
for k in sys.argv[1].split("."): v=v[int(k)] if isinstance(v,list) else v.get(k,"")
print(v)' "$1"; }

start() {  # start LOG [extra options]
  local log=$1; shift
  rm -f "$work/port"
  "$kiln" serve --data-dir "$work/data" --port 0 --port-file "$work/port" --workers 1 "$@" > "$work/$log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do
    [ -s "$work/port" ] && break
    kill -0 "$pid" 2> /dev/null || fail "kiln serve exited before listening"
    sleep 0.1
  done
  [ -s "$work/port" ] || fail "no port file after 30 s"
  base="http://127.0.0.1:$(cat "$work/port")"
}

submit() {  # submit MODEL [curl options]; prints the body, status in $work/status
  local model=$1; shift
  curl -sS -o "$work/body" -w '%{http_code}' "$@" \
    -F "description=@$examples/fashion-mnist/application.yaml" -F "target=@$examples/targets/local-cpu.yaml" \
    -F "model=@$model" "$base/v1/jobs" > "$work/status"
  cat "$work/body"
}

# A pause before each stage gives the SIGKILL below a window while the job is running.
start serve1.log --test-stage-pause-ms 1500
[ "$(curl -sS "$base/healthz")" = ok ] || fail "/healthz"
body=$(submit "$examples/fashion-mnist/model.onnx" -H "Idempotency-Key: e2e-1")
[ "$(cat "$work/status")" = 202 ] || fail "submit: $(cat "$work/status") $body"
id=$(echo "$body" | field id)
body=$(submit "$examples/fashion-mnist/model.onnx" -H "Idempotency-Key: e2e-1")
[ "$(cat "$work/status")" = 200 ] || fail "idempotent resubmit: $(cat "$work/status") $body"
[ "$(echo "$body" | field id)" = "$id" ] || fail "idempotent resubmit returned another job: $body"
body=$(submit "$examples/fashion-mnist/application.yaml")
[ "$(cat "$work/status")" = 415 ] || fail "non-ONNX model: $(cat "$work/status") $body"

# Wait until validate is done, then kill the server without warning.
validated=
for _ in $(seq 300); do
  job=$(curl -sS "$base/v1/jobs/$id")
  if [ "$(echo "$job" | field stages.0.state)" = done ]; then validated=$(echo "$job" | field stages.0.finished_at); break; fi
  sleep 0.1
done
[ -n "$validated" ] || fail "validate never finished: $job"
[ "$(echo "$job" | field state)" = running ] || fail "expected a running job: $job"
kill -9 "$pid"
wait "$pid" 2> /dev/null || true
pid=

start serve2.log
grep -q "1 jobs resumed" "$work/serve2.log" || fail "the restarted server did not resume the job"
state=
for _ in $(seq 1200); do
  job=$(curl -sS "$base/v1/jobs/$id")
  state=$(echo "$job" | field state)
  case $state in succeeded|failed|cancelled) break ;; esac
  sleep 0.1
done
[ "$state" = succeeded ] || fail "job ended $state: $job"
[ "$(echo "$job" | field stages.0.finished_at)" = "$validated" ] || fail "validate ran again after the restart: $job"
[ "$(echo "$job" | field progress)" = 100.0 ] || fail "progress: $job"
[ "$(curl -sS "$base/v1/jobs" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["jobs"]))')" = 1 ] ||
  fail "expected exactly one job after the restart"

# Artifacts: listed, downloaded byte-exact, names checked.
curl -sS "$base/v1/jobs/$id/artifacts" > "$work/artifacts.json"
sha=$(python3 -c 'import json,sys; print([a["sha256"] for a in json.load(open(sys.argv[1]))["artifacts"] if a["name"]=="model.kiln"][0])' \
  "$work/artifacts.json") || fail "no model.kiln artifact: $(cat "$work/artifacts.json")"
curl -sSf -o "$work/model.kiln" "$base/v1/jobs/$id/artifacts/model.kiln" || fail "download"
[ "$(sha256sum "$work/model.kiln" | cut -d' ' -f1)" = "$sha" ] || fail "downloaded artifact differs from its sha256"
grep -q oci_archive "$work/artifacts.json" || fail "no image archive among the artifacts: $(cat "$work/artifacts.json")"
[ "$(curl -sS -o /dev/null -w '%{http_code}' "$base/v1/jobs/$id/report")" = 200 ] || fail "report"
curl -sS -N --max-time 20 "$base/v1/jobs/$id/events" > "$work/events" || fail "events stream"
grep -q '^event: done' "$work/events" || fail "no done event: $(cat "$work/events")"
[ "$(grep -c '^event: stage' "$work/events")" = 10 ] || fail "expected 10 stage events: $(cat "$work/events")"
[ "$(curl -sS --path-as-is -o /dev/null -w '%{http_code}' "$base/v1/jobs/$id/artifacts/../../jobs.db")" != 200 ] || fail "path traversal"
[ "$(curl -sS -o /dev/null -w '%{http_code}' "$base/v1/jobs/$id/artifacts/description.yaml")" = 404 ] || fail "unlisted file served"

kill -TERM "$pid"
set +e
wait "$pid"
rc=$?
set -e
pid=
[ "$rc" = 0 ] || fail "kiln serve exited $rc after SIGTERM"
grep -q "SIGTERM: finishing requests in flight" "$work/serve2.log" || fail "no shutdown message"
echo "PASS: kiln serve jobs end to end"
