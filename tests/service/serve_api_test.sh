#!/usr/bin/env bash
# `kiln serve --auth tokens` end to end: tokens from `kiln token`, the Fashion-MNIST example
# submitted with curl (multipart), its event stream followed to the end, report and every
# artifact downloaded and checked against their SHA-256; then the same through `kiln submit
# --wait --download` naming a registered target; a model fetched by URL from a loopback HTTP
# server (allow-listed) and one over the size cap; and bad requests answered with the right
# status and a message naming the problem: missing, malformed, unknown and revoked tokens, a
# token without the scope, another user's job, a non-http scheme, private addresses.
# Usage: serve_api_test.sh KILN EXAMPLES_DIR. Exit 77 = skipped, with a reason.
set -euo pipefail
kiln=$1 examples=$2
command -v curl > /dev/null || { echo "SKIP: needs curl"; exit 77; }
command -v python3 > /dev/null || { echo "SKIP: needs python3"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-serve-api.XXXXXX")
pid= web_pid=
cleanup() {
  for p in $pid $web_pid; do kill -9 "$p" 2> /dev/null || true; wait "$p" 2> /dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$work/serve.log" ] && { echo "== serve.log" >&2; cat "$work/serve.log" >&2; }; exit 1; }
field() { python3 -c 'import json,sys; v=json.load(sys.stdin)
for k in sys.argv[1].split("."): v=v[int(k)] if isinstance(v,list) else v.get(k,"")
print(v)' "$1"; }
started=$(date +%s)

# A loopback web server for models by URL: the example model, and one over the 1 MiB cap below.
mkdir -p "$work/web"
cp "$examples/fashion-mnist/model.onnx" "$work/web/model.onnx"
head -c $((2 * 1024 * 1024)) /dev/zero > "$work/web/big.onnx"
# /redirect-private answers 302 to a private address: the redirect must be checked again.
(cd "$work/web" && exec python3 -c '
import http.server, sys
class Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/redirect-private":
            self.send_response(302)
            self.send_header("Location", "http://10.0.0.1/model.onnx")
            self.end_headers()
            return
        super().do_GET()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("port", server.server_address[1], flush=True)
server.serve_forever()' > "$work/web.log" 2>&1) &
web_pid=$!
for _ in $(seq 100); do grep -q "^port" "$work/web.log" 2> /dev/null && break; sleep 0.1; done
web_port=$(sed -n 's/^port \([0-9]*\)/\1/p' "$work/web.log" | head -1)
[ -n "$web_port" ] || fail "the loopback web server did not start: $(cat "$work/web.log")"

data=$work/data
admin=$("$kiln" token create --data-dir "$data" --scopes admin,read,submit --name admin 2> /dev/null)
alice=$("$kiln" token create --data-dir "$data" --scopes submit,read --name alice 2> /dev/null)
bob=$("$kiln" token create --data-dir "$data" --scopes submit,read --name bob 2> /dev/null)
reader=$("$kiln" token create --data-dir "$data" --scopes read --name reader 2> /dev/null)
gone=$("$kiln" token create --data-dir "$data" --scopes read --name gone 2> /dev/null)
gone_id=$(echo "$gone" | cut -d_ -f2)
"$kiln" token revoke --data-dir "$data" "$gone_id" > /dev/null
"$kiln" token list --data-dir "$data" | grep -q "gone .*read" || fail "token list: $("$kiln" token list --data-dir "$data")"
"$kiln" token list --data-dir "$data" | grep -q "$alice" && fail "token list shows a token"
"$kiln" serve --data-dir "$data" --host 0.0.0.0 --port 0 > "$work/refused.log" 2>&1 && fail "--auth none on 0.0.0.0 was accepted"
grep -q "loopback" "$work/refused.log" || fail "--auth none on 0.0.0.0: $(cat "$work/refused.log")"

"$kiln" serve --data-dir "$data" --port 0 --port-file "$work/port" --workers 1 --auth tokens --max-model-mb 1 \
  --fetch-allow 127.0.0.1/32 > "$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 300); do [ -s "$work/port" ] && break; kill -0 "$pid" 2> /dev/null || fail "kiln serve exited"; sleep 0.1; done
base="http://127.0.0.1:$(cat "$work/port")"

# call NAME TOKEN [curl options...]: status in $work/status, body in $work/NAME.
call() {
  local name=$1 token=$2; shift 2
  local auth=()
  [ -n "$token" ] && auth=(-H "Authorization: Bearer $token")
  curl -sS -o "$work/$name" -D "$work/$name.headers" -w '%{http_code}' "${auth[@]}" "$@" > "$work/status"
}
expect() {  # expect STATUS NAME TEXT: the last call answered STATUS with TEXT in its body
  [ "$(cat "$work/status")" = "$1" ] || fail "$2: expected $1, got $(cat "$work/status"): $(cat "$work/$2")"
  grep -qi -- "$3" "$work/$2" || fail "$2: the answer does not name '$3': $(cat "$work/$2")"
}

# Tokens: public health, 401 with WWW-Authenticate for missing/malformed/unknown/revoked, 403 naming the scope.
[ "$(curl -sS "$base/healthz")" = ok ] || fail "/healthz needs no token"
call missing "" "$base/v1/jobs"; expect 401 missing "missing token"
grep -qi '^WWW-Authenticate: Bearer' "$work/missing.headers" || fail "401 without WWW-Authenticate: Bearer"
call malformed "not-a-token" "$base/v1/jobs"; expect 401 malformed "malformed token"
call unknown "kiln_0123456789abcdef_$(printf '0%.0s' $(seq 64))" "$base/v1/jobs"; expect 401 unknown "unknown token"
call revoked "$gone" "$base/v1/jobs"; expect 401 revoked "revoked"
call noscope "$reader" -F "description=@$examples/fashion-mnist/application.yaml" "$base/v1/jobs"; expect 403 noscope "'submit' scope"
call metrics_alice "$alice" "$base/metrics"; expect 403 metrics_alice "'admin' scope"

# Targets: admin registers, a submitter may read but not write.
call put_alice "$alice" -X PUT --data-binary "@$examples/targets/local-cpu.yaml" -H 'Content-Type: application/yaml' \
  "$base/v1/targets/local-cpu"; expect 403 put_alice "admin"
call put "$admin" -X PUT --data-binary "@$examples/targets/local-cpu.yaml" -H 'Content-Type: application/yaml' \
  "$base/v1/targets/local-cpu"; expect 201 put '"local-cpu"'
call put_bad "$admin" -X PUT --data-binary '{"name": "x", "kind": "moon"}' -H 'Content-Type: application/json' \
  "$base/v1/targets/x"; expect 422 put_bad '"pointer"'
call targets "$alice" "$base/v1/targets"; expect 200 targets '"local-cpu"'

# Alice submits with curl and follows the job's events to the end.
call submit "$alice" -F "description=@$examples/fashion-mnist/application.yaml" -F "target=@$examples/targets/local-cpu.yaml" \
  -F "model=@$examples/fashion-mnist/model.onnx" "$base/v1/jobs"; expect 202 submit '"queued"'
id=$(field id < "$work/submit")
curl -sS -N --max-time 120 -H "Authorization: Bearer $alice" "$base/v1/jobs/$id/events" > "$work/events" || fail "events"
grep -q '^event: done' "$work/events" || fail "no done event: $(cat "$work/events")"
grep -q '"state":"succeeded"' "$work/events" || fail "the job did not succeed: $(cat "$work/events")"
mkdir -p "$work/curl-download"
call report "$alice" "$base/v1/jobs/$id/report"; expect 200 report '"artifacts"'
call artifacts "$alice" "$base/v1/jobs/$id/artifacts"; expect 200 artifacts '"sha256"'
python3 - "$work/artifacts" "$work/curl-download" "$base" "$alice" << 'PY' || fail "artifact download"
import hashlib, json, subprocess, sys
listing, dst, base, token = sys.argv[1:]
for a in json.load(open(listing))["artifacts"]:
    path = f"{dst}/{a['name']}"
    subprocess.run(["curl", "-sSf", "-o", path, "-H", f"Authorization: Bearer {token}", base + a["url"]], check=True)
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    assert digest == a["sha256"], f"{a['name']}: {digest} != {a['sha256']}"
print("downloaded", len(json.load(open(listing))["artifacts"]), "artifacts")
PY

# Another user's job does not exist for them; an admin sees it.
call bob_get "$bob" "$base/v1/jobs/$id"; expect 404 bob_get "no job"
call bob_cancel "$bob" -X DELETE "$base/v1/jobs/$id"; expect 404 bob_cancel "no job"
call bob_list "$bob" "$base/v1/jobs"; expect 200 bob_list '"jobs":\[\]'
call admin_get "$admin" "$base/v1/jobs/$id"; expect 200 admin_get '"succeeded"'

# Models by URL: a non-http scheme and private addresses are refused up front, naming them.
json_job() {  # json_job NAME URL: a JSON-body submission of the example with model.url = URL
  python3 - "$examples" "$2" > "$work/$1.json" << 'PY'
import json, sys
examples, url = sys.argv[1:]
print(json.dumps({"description": {"name": "by-url", "model": {"url": url},
                                  "inputs": {"input": {"shape": ["batch", 1, 28, 28], "dtype": "float32"}},
                                  "target": "local-cpu"}}))
PY
  call "$1" "$alice" -H 'Content-Type: application/json' --data-binary "@$work/$1.json" "$base/v1/jobs"
}
json_job ftp "ftp://127.0.0.1/model.onnx"; expect 400 ftp "scheme 'ftp'"
json_job file "file:///etc/passwd"; expect 400 file "scheme 'file'"
json_job ten "http://10.0.0.1/model.onnx"; expect 400 ten "10.0.0.1 is private"
json_job metadata "http://169.254.169.254/latest/meta-data"; expect 400 metadata "169.254.169.254 is link-local"
json_job v6loop "http://[::1]:$web_port/model.onnx"; expect 400 v6loop "::1 is loopback"
json_job mapped "http://[::ffff:127.0.0.2]/model.onnx"; expect 400 mapped "::ffff:127.0.0.2 is loopback"
# Allow-listed loopback by a name resolved when connecting (::1, if among the answers, is refused
# and 127.0.0.1 used): the fetch stage downloads it (then the job is cancelled: its later stages
# are tested above).
json_job by_url "http://localhost:$web_port/model.onnx"; expect 202 by_url '"queued"'
url_id=$(field id < "$work/by_url")
for _ in $(seq 600); do
  job=$(curl -sS -H "Authorization: Bearer $alice" "$base/v1/jobs/$url_id")
  [ "$(echo "$job" | field stages.0.state)" = done ] && break
  [ "$(echo "$job" | field state)" = failed ] && break
  sleep 0.1
done
[ "$(echo "$job" | field stages.0.name)" = fetch ] || fail "no fetch stage first: $job"
[ "$(echo "$job" | field stages.0.state)" = done ] || fail "fetch did not finish: $job"
curl -sS -o /dev/null -X DELETE -H "Authorization: Bearer $alice" "$base/v1/jobs/$url_id"
job_end() {  # job_end ID: waits for the job to end; its JSON in $job
  for _ in $(seq 600); do
    job=$(curl -sS -H "Authorization: Bearer $alice" "$base/v1/jobs/$1")
    case $(echo "$job" | field state) in failed|succeeded|cancelled) return ;; esac
    sleep 0.1
  done
}
# Over the cap (--max-model-mb 1): the fetch stops and the job fails naming the limit.
json_job big "http://127.0.0.1:$web_port/big.onnx"; expect 202 big '"queued"'
job_end "$(field id < "$work/big")"
[ "$(echo "$job" | field state)" = failed ] || fail "an oversize model did not fail its job: $job"
echo "$job" | grep -q "larger than the limit of 1 MiB" || fail "the oversize failure does not name the cap: $job"
# A redirect from the allowed server to a private address fails the job naming that address.
json_job redirect "http://127.0.0.1:$web_port/redirect-private"; expect 202 redirect '"queued"'
job_end "$(field id < "$work/redirect")"
[ "$(echo "$job" | field state)" = failed ] || fail "a redirect to a private address did not fail the job: $job"
echo "$job" | grep -q "10.0.0.1 is private" || fail "the redirect failure does not name the address: $job"

# Benchmarks: admin only; a profile of another format version is refused naming it.
call bench_alice "$alice" -H 'Content-Type: application/json' --data-binary '{}' "$base/v1/benchmarks"; expect 403 bench_alice admin
call bench_version "$admin" -H 'Content-Type: application/json' \
  --data-binary '{"format": "kiln-target-profile", "version": 99, "targets": []}' "$base/v1/benchmarks"
expect 422 bench_version "version 99"

# kiln submit: the same job through the CI client, naming the registered target.
KILN_TOKEN=$alice "$kiln" submit --server "$base" --description "$examples/fashion-mnist/application.yaml" \
  --target-name local-cpu --model "$examples/fashion-mnist/model.onnx" --wait --download "$work/submit-download" \
  > "$work/submit.out" 2>&1 || fail "kiln submit: $(cat "$work/submit.out")"
grep -q "succeeded" "$work/submit.out" || fail "kiln submit did not report success: $(cat "$work/submit.out")"
[ -s "$work/submit-download/report.json" ] || fail "kiln submit --download: no report.json ($(ls "$work/submit-download"))"
[ -s "$work/submit-download/model.kiln" ] || fail "kiln submit --download: no model.kiln"
"$kiln" submit --server "$base" --token "$reader" --description "$examples/fashion-mnist/application.yaml" \
  --target-name local-cpu --model "$examples/fashion-mnist/model.onnx" > "$work/submit403.out" 2>&1 && fail "kiln submit without scope exited 0"
grep -q "403.*'submit' scope" "$work/submit403.out" || fail "kiln submit 403: $(cat "$work/submit403.out")"
# A model that passes the upload's wire check (an empty graph) but not compile: --wait exits non-zero with the job's error.
printf '\x3a\x00' > "$work/empty-graph.onnx"
KILN_TOKEN=$alice "$kiln" submit --server "$base" --description "$examples/fashion-mnist/application.yaml" \
  --target-name local-cpu --model "$work/empty-graph.onnx" --wait > "$work/submit-failed.out" 2>&1 &&
  fail "kiln submit --wait exited 0 for a failing job: $(cat "$work/submit-failed.out")"
grep -q "kiln: error: job .* failed: stage " "$work/submit-failed.out" || fail "kiln submit, failed job: $(cat "$work/submit-failed.out")"
"$kiln" submit --server "http://127.0.0.1:1" --token "$alice" --description "$examples/fashion-mnist/application.yaml" \
  --target-name local-cpu --model "$examples/fashion-mnist/model.onnx" > "$work/refused.out" 2>&1 && fail "kiln submit to no server exited 0"
grep -q "cannot connect" "$work/refused.out" || fail "kiln submit, connection refused: $(cat "$work/refused.out")"

# Metrics (admin): requests by route and status, stage durations.
call metrics "$admin" "$base/metrics"; expect 200 metrics 'kiln_http_requests_total{method="GET",route="/v1/jobs/{id}",status="404"}'
compiles=$(sed -n 's/^kiln_stage_duration_seconds_count{stage="compile"} //p' "$work/metrics")
[ "${compiles:-0}" -ge 2 ] || fail "stage durations: expected at least 2 compile stages: $(cat "$work/metrics")"
grep -q 'kiln_http_request_duration_seconds_bucket' "$work/metrics" || fail "no latency histogram"

kill -TERM "$pid"
wait "$pid" || fail "kiln serve exited $? after SIGTERM"
pid=
echo "PASS: kiln serve --auth tokens end to end ($(($(date +%s) - started)) s)"
