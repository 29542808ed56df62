#!/usr/bin/env bash
# `kiln push` against Debian's docker-registry (distribution 2.8) on loopback, one case per ctest test:
#   push    push the Fashion-MNIST image, pull it back with `skopeo copy` and compare the manifest
#           digest; a second push skips every blob; a push to another repository mounts them
#   basic   the registry with an htpasswd file: no or wrong credentials fail with the 401 named
#           and no tag; the right ones push, and skopeo reads the image back with them
#   bearer  the registry trusting a token server of our own (registry_helper.py token): kiln
#           follows the WWW-Authenticate challenge to it; a wrong password is refused there
#   faults  a registry that is down, and a proxy that fails blob uploads with 500: a clear error
#           and no tag (nor manifest) in the registry; a single 500 is retried and the push succeeds
# Usage: registry_test.sh CASE KILN MODEL. Exit 77 = skipped (ctest SKIP_RETURN_CODE), with a reason.
set -euo pipefail
case_name=$1 kiln=$2 model=$3
here=$(cd "$(dirname "$0")" && pwd)
helper="$here/registry_helper.py"
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-registry-test.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2> /dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
export KILN_CACHE_DIR="$work/cache"  # never the user's cache
unset KILN_REGISTRY_USERNAME KILN_REGISTRY_PASSWORD

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v docker-registry > /dev/null || skip "docker-registry is not installed (apt-get install docker-registry)"
command -v python3 > /dev/null || skip "python3 is not installed"

# Waits for a server to write its port (file, or the registry's "listening on" log line).
wait_port() {  # FILE [REGEX]
  for _ in $(seq 100); do
    if [ -n "${2:-}" ]; then
      port=$(sed -n "s/.*$2.*/\1/p" "$1" 2> /dev/null | head -1)
    else
      port=$(cat "$1" 2> /dev/null || true)
    fi
    [ -n "$port" ] && { echo "$port"; return; }
    sleep 0.1
  done
  cat "$1" >&2 2> /dev/null || true
  fail "server did not start ($1)"
}

# Starts docker-registry on 127.0.0.1, a free port, storage in $work; AUTH_YAML is its auth: block.
start_registry() {  # NAME AUTH_YAML -> sets registry_port
  local dir="$work/$1"
  mkdir -p "$dir/storage"
  cat > "$dir/config.yml" << YAML
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: $dir/storage
  delete:
    enabled: true
http:
  addr: 127.0.0.1:0
$2
YAML
  docker-registry serve "$dir/config.yml" > "$dir/log" 2>&1 &
  pids+=($!)
  registry_port=$(wait_port "$dir/log" 'listening on 127\.0\.0\.1:\([0-9]*\)')
}

build() {
  "$kiln" image "$model" -o "$work/img" > "$work/img.log" 2>&1 || { cat "$work/img.log"; fail "kiln image failed"; }
  digest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$work/img/oci/index.json")
}

# Runs kiln push, keeping its output in $work/push.log; returns its exit code.
push() {
  local rc=0
  "$kiln" push "$work/img" "$@" > "$work/push.log" 2>&1 || rc=$?
  cat "$work/push.log"
  return $rc
}
push_fails() {  # EXPECTED_TEXT ARGS...: the push must fail and say EXPECTED_TEXT
  local expected=$1
  shift
  if push "$@"; then fail "push $* succeeded"; fi
  grep -q -- "$expected" "$work/push.log" || fail "push $* did not say '$expected'"
}

# The HTTP status of GET /v2/REPO/manifests/REF straight from the registry (with Basic USER:PASS).
manifest_status() {  # PORT REPO REF [USER:PASS]
  python3 - "$@" << 'PY'
import base64, sys, urllib.error, urllib.request
port, repo, ref = sys.argv[1:4]
req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/{repo}/manifests/{ref}",
                             headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
if len(sys.argv) > 4:
    req.add_header("Authorization", "Basic " + base64.b64encode(sys.argv[4].encode()).decode())
try:
    print(urllib.request.urlopen(req, timeout=10).status)
except urllib.error.HTTPError as e:
    print(e.code)
PY
}

# skopeo copies REF back into an OCI layout and the manifest digest must be ours (--preserve-digests:
# by default skopeo gzips our uncompressed model layer on the way, which changes the manifest).
pull_check() {  # REF [skopeo args...]
  command -v skopeo > /dev/null || { echo "note: skopeo is not installed; pull-back check skipped"; return; }
  rm -rf "$work/pulled"
  skopeo copy --quiet --preserve-digests --src-tls-verify=false "${@:2}" "docker://$1" "oci:$work/pulled:pulled" > "$work/skopeo.log" 2>&1 ||
    { cat "$work/skopeo.log"; fail "skopeo copy docker://$1 failed"; }
  local got
  got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$work/pulled/index.json")
  [ "$got" = "$digest" ] || fail "pulled $1 has manifest $got, pushed $digest"
  echo "skopeo pulled $1 back: $got"
}

case "$case_name" in
  push)
    build
    start_registry plain ""
    ref="127.0.0.1:$registry_port/kiln/fashion-mnist:v1"
    push "$ref" --plain-http || fail "push failed"
    [ "$(grep -c ' uploaded ' "$work/push.log")" = 4 ] || fail "expected 4 uploaded blobs"
    grep -q "pushed $ref@$digest" "$work/push.log" || fail "push did not report the manifest digest"
    pull_check "$ref"
    push "$ref" --plain-http || fail "second push failed"
    [ "$(grep -c 'skipped (already there)' "$work/push.log")" = 4 ] || fail "second push did not skip all 4 blobs"
    push "127.0.0.1:$registry_port/other/model:v2" --plain-http --mount-from kiln/fashion-mnist || fail "mount push failed"
    [ "$(grep -c ' mounted ' "$work/push.log")" = 4 ] || fail "push with --mount-from did not mount all 4 blobs"
    pull_check "127.0.0.1:$registry_port/other/model:v2"
    push_fails "names no registry" kiln/fashion-mnist:v1
    ;;
  basic)
    command -v htpasswd > /dev/null || skip "htpasswd is not installed (apt-get install apache2-utils)"
    build
    htpasswd -Bbc "$work/htpasswd" kiln 's3cret pass' > /dev/null 2>&1
    start_registry basic "auth:
  htpasswd:
    realm: kiln-test
    path: $work/htpasswd"
    ref="127.0.0.1:$registry_port/kiln/fashion-mnist:v1"
    push_fails "401 Unauthorized" "$ref" --plain-http
    grep -q "needs a username and password" "$work/push.log" || fail "no hint to pass credentials"
    KILN_REGISTRY_USERNAME=kiln KILN_REGISTRY_PASSWORD=wrong push_fails "401 Unauthorized" "$ref" --plain-http
    grep -q "tag 'v1' was not written" "$work/push.log" || fail "the error does not say the tag was not written"
    [ "$(manifest_status "$registry_port" kiln/fashion-mnist v1 'kiln:s3cret pass')" = 404 ] || fail "a failed push left a tag"
    printf 's3cret pass\n' | push "$ref" --plain-http -u kiln --password-stdin || fail "push with credentials failed"
    [ "$(manifest_status "$registry_port" kiln/fashion-mnist v1 'kiln:s3cret pass')" = 200 ] || fail "tag missing after push"
    pull_check "$ref" --src-creds 'kiln:s3cret pass'
    ;;
  bearer)
    command -v openssl > /dev/null || skip "openssl is not installed"
    build
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/token.key" -out "$work/token.crt" -days 2 \
      -subj /CN=kiln-test-token > /dev/null 2>&1 || fail "openssl could not make the token key"
    python3 "$helper" token "$work/token.port" "$work/token.key" kiln-test-issuer kiln-test-registry kiln tokenpass \
      2> "$work/token.log" &
    pids+=($!)
    token_port=$(wait_port "$work/token.port")
    start_registry bearer "auth:
  token:
    realm: http://127.0.0.1:$token_port/token
    service: kiln-test-registry
    issuer: kiln-test-issuer
    rootcertbundle: $work/token.crt"
    ref="127.0.0.1:$registry_port/kiln/fashion-mnist:v1"
    KILN_REGISTRY_USERNAME=kiln KILN_REGISTRY_PASSWORD=nope push_fails "token server http://127.0.0.1:$token_port/token refused" \
      "$ref" --plain-http
    KILN_REGISTRY_USERNAME=kiln KILN_REGISTRY_PASSWORD=tokenpass push "$ref" --plain-http || fail "bearer push failed"
    grep -q "GET /token?service=kiln-test-registry&scope=repository" "$work/token.log" || fail "the token server was not asked"
    pull_check "$ref" --src-creds kiln:tokenpass
    ;;
  faults)
    build
    # Down: a port nobody listens on (bound and released just now).
    down_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    push_fails "cannot reach http://127.0.0.1:$down_port/v2/" "127.0.0.1:$down_port/kiln/m:v1" --plain-http --retries 1
    grep -q "after 2 attempts" "$work/push.log" || fail "the down registry was not retried"
    start_registry plain ""
    python3 "$helper" proxy "$work/proxy.port" "$registry_port" blob-put-500 2> "$work/proxy.log" &
    pids+=($!)
    proxy_port=$(wait_port "$work/proxy.port")
    push_fails "500 Internal Server Error" "127.0.0.1:$proxy_port/kiln/fashion-mnist:v1" --plain-http --retries 2
    grep -q "layer 1/3 (runtime) sha256:" "$work/push.log" || fail "the error does not name the blob"
    grep -q "injected fault" "$work/push.log" || fail "the error does not say what the registry said"
    grep -q "after 3 attempts" "$work/push.log" || fail "the failed upload was not retried"
    [ "$(manifest_status "$registry_port" kiln/fashion-mnist v1)" = 404 ] || fail "a failed push left a tag"
    [ "$(manifest_status "$registry_port" kiln/fashion-mnist "$digest")" = 404 ] || fail "a failed push left the manifest"
    python3 "$helper" proxy "$work/proxy2.port" "$registry_port" blob-put-500-once 2> "$work/proxy2.log" &
    pids+=($!)
    proxy_port=$(wait_port "$work/proxy2.port")
    push "127.0.0.1:$proxy_port/kiln/fashion-mnist:v1" --plain-http || fail "a single 500 was not retried"
    grep -q "2 attempts" "$work/push.log" || fail "the retried blob does not show its attempts"
    [ "$(manifest_status "$registry_port" kiln/fashion-mnist v1)" = 200 ] || fail "tag missing after the retried push"
    ;;
  *) fail "unknown case '$case_name'" ;;
esac
echo "PASS: $case_name"
