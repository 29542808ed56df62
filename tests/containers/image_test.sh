#!/usr/bin/env bash
# `kiln image` end to end on the Fashion-MNIST model, one case per ctest test:
#   reproducible  two builds (other folders, other times) give one manifest digest; another
#                 model (batch 2) re-uses the runtime layer and changes the model layer
#   umoci         `umoci unpack` (checks layer contents against diff_ids) reads the layout
#   skopeo        `skopeo inspect` reads the layout, the oci-archive and the docker-archive (same
#                 config digest and diff_ids); a target description sets threads, labels and the
#                 registry (a GPU target's nodes built for their CPUs: --device cpu)
#   gpu           a GPU target's image: refused, naming the plugin, by a kiln without libkiln_cuda.so;
#                 with it (skipped where it was not built), the plan compiled for CUDA, the plugin beside
#                 kiln-runtime, the CUDA libraries it needs in a "cuda" layer (and they load: under chroot
#                 the plugin gets as far as asking for the driver), KILN_DEVICE=cuda, recipes asking
#                 for one GPU, a CPU image for a .kiln compiled for the CPU unless --device cuda, then a
#                 warning for a given .kiln the GPU cannot run; the CPU image carries
#                 no CUDA library and no plugin
#   selftest      the unpacked rootfs runs `kiln-runtime selftest` under chroot, with an empty
#                 environment and as the image's non-root user: nothing comes from the host
#   serve         the same chroot runs `kiln-runtime serve-model` (environment: the image's KILN_*
#                 variables only); one KServe v2 request with the self-test inputs must give the
#                 self-test's expected outputs, and SIGTERM must end it with exit 0
# Usage: image_test.sh CASE KILN MODEL. Exit 77 = skipped (ctest SKIP_RETURN_CODE), with a reason.
set -euo pipefail
case_name=$1 kiln=$2 model=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-image-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
export KILN_CACHE_DIR="$work/cache"  # never the user's cache

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
manifest_digest() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$1/oci/index.json"; }
layer_digest() {  # DIR LAYER_NAME
  python3 - "$1" "$2" <<'PY'
import json, sys
d = sys.argv[1] + "/oci/"
m = json.load(open(d + "index.json"))["manifests"][0]["digest"].split(":")[1]
man = json.load(open(d + "blobs/sha256/" + m))
print([l["digest"] for l in man["layers"] if l["annotations"]["kiln.layer"] == sys.argv[2]][0])
PY
}
build() { mkdir -p "$(dirname "$1")"; "$kiln" image "$model" -o "$1" "${@:2}" > "$1.log" 2>&1 || { cat "$1.log"; fail "kiln image failed"; }; }
unpack() {  # DIR -> DIR/unpacked/rootfs
  command -v umoci > /dev/null || skip "umoci is not installed (apt-get install umoci)"
  umoci unpack --image "$1/oci:latest" "$1/unpacked" > "$1/umoci.log" 2>&1 || { cat "$1/umoci.log"; fail "umoci unpack failed"; }
}

# Sets `runner` to run a command inside the rootfs $1 as the image's user, or skips.
chroot_runner() {
  if [ "$(id -u)" = 0 ]; then
    runner=("$(command -v chroot)" --userspec=65532:65532 "$1")
  elif unshare -r true 2> /dev/null; then
    runner=("$(command -v unshare)" -r "$(command -v chroot)" "$1")
  else
    skip "needs root (chroot) or unprivileged user namespaces (unshare -r); neither is available here"
  fi
}

case "$case_name" in
  reproducible)
    build "$work/a" --no-cache
    sleep 1.1
    (cd "$work" && SOURCE_DATE_EPOCH= build "$work/other/b")  # fills the layer cache
    a=$(manifest_digest "$work/a") b=$(manifest_digest "$work/other/b")
    [ "$a" = "$b" ] || fail "manifest digests differ: $a vs $b"
    cmp "$work/a/image.oci.tar" "$work/other/b/image.oci.tar" || fail "oci-archives differ"
    cmp "$work/a/image.docker.tar" "$work/other/b/image.docker.tar" || fail "docker-archives differ"
    echo "same manifest digest twice: $a"
    build "$work/c" --batch 2  # its runtime layer comes from the cache
    [ "$(layer_digest "$work/a" runtime)" = "$(layer_digest "$work/c" runtime)" ] || fail "another model changed the runtime layer"
    [ "$(layer_digest "$work/a" model)" != "$(layer_digest "$work/c" model)" ] || fail "another model kept the model layer"
    [ "$(manifest_digest "$work/a")" != "$(manifest_digest "$work/c")" ] || fail "another model kept the manifest digest"
    echo "batch 2: runtime layer re-used, model layer changed"
    SOURCE_DATE_EPOCH=1700000000 build "$work/d"
    [ "$(manifest_digest "$work/d")" != "$a" ] || fail "SOURCE_DATE_EPOCH did not change the image"
    grep -q '"created":"2023-11-14T22:13:20Z"' "$work/d/oci/blobs/sha256/"* || fail "created does not follow SOURCE_DATE_EPOCH"
    ;;
  umoci)
    build "$work/a"
    unpack "$work/a"
    root="$work/a/unpacked/rootfs"
    for f in kiln/bin/kiln-runtime kiln/model/model.kiln kiln/metadata.json kiln/sbom.spdx.json kiln/selftest/inputs.npz \
             kiln/selftest/expected.npz lib64/ld-linux-x86-64.so.2 etc/passwd; do
      [ -e "$root/$f" ] || fail "$f is missing from the unpacked image"
    done
    [ -x "$root/kiln/bin/kiln-runtime" ] || fail "kiln-runtime is not executable"
    python3 - "$work/a/unpacked/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert c["process"]["args"][:2] == ["/kiln/bin/kiln-runtime", "serve-model"], c["process"]["args"]
assert c["process"]["user"]["uid"] == 65532, c["process"]["user"]
print("runtime config:", c["process"]["args"], "uid", c["process"]["user"]["uid"])
PY
    ;;
  skopeo)
    command -v skopeo > /dev/null || skip "skopeo is not installed (apt-get install skopeo)"
    build "$work/a"
    digest=$(manifest_digest "$work/a")
    skopeo inspect "oci:$work/a/oci:latest" > "$work/inspect.json" || fail "skopeo inspect oci: failed"
    skopeo inspect --config "oci:$work/a/oci:latest" > "$work/config.json" || fail "skopeo inspect --config failed"
    skopeo inspect "oci-archive:$work/a/image.oci.tar:latest" > "$work/inspect-archive.json" || fail "skopeo inspect oci-archive: failed"
    skopeo inspect --raw "docker-archive:$work/a/image.docker.tar:kiln-model:latest" > "$work/docker-manifest.json" ||
      fail "skopeo inspect docker-archive: failed"
    skopeo inspect --config "docker-archive:$work/a/image.docker.tar" > "$work/docker-config.json" ||
      fail "skopeo inspect --config docker-archive: failed"
    python3 - "$work" "$digest" <<'PY'
import json, sys
w, digest = sys.argv[1], sys.argv[2]
oci_manifest = json.load(open(w + "/a/oci/blobs/sha256/" + digest.split(":")[1]))
docker_manifest = json.load(open(w + "/docker-manifest.json"))
# The docker-archive carries the same config blob (hence the image ID) and as many layers.
assert docker_manifest["config"]["digest"] == oci_manifest["config"]["digest"], (docker_manifest, oci_manifest)
assert len(docker_manifest["layers"]) == len(oci_manifest["layers"]), docker_manifest
assert json.load(open(w + "/docker-config.json"))["rootfs"] == json.load(open(w + "/config.json"))["rootfs"]
i = json.load(open(w + "/inspect.json"))
assert i["Digest"] == digest, (i["Digest"], digest)
assert len(i["Layers"]) == 3, i["Layers"]
assert i["Labels"]["kiln.selftest"] == "passed", i["Labels"]
assert json.load(open(w + "/inspect-archive.json"))["Digest"] == digest
c = json.load(open(w + "/config.json"))
assert c["config"]["Entrypoint"] == ["/kiln/bin/kiln-runtime"], c["config"]
assert c["config"]["User"] == "65532:65532"
assert "8080/tcp" in c["config"]["ExposedPorts"]
print("skopeo:", i["Digest"], i["Architecture"], i["Os"], len(i["Layers"]), "layers; docker-archive: same config and diff_ids")
PY
    # A GPU target's nodes, for their CPUs: threads from its nodes, labels, the registry in the tag.
    build "$work/gpu" --target "$(dirname "$model")/../targets/hpc-gpu-slurm.yaml" --device cpu
    skopeo inspect --config "oci:$work/gpu/oci:latest" > "$work/gpu-config.json" || fail "skopeo inspect (GPU target) failed"
    skopeo inspect --raw "docker-archive:$work/gpu/image.docker.tar:registry.example.org/team/kiln-model:latest" > /dev/null ||
      fail "the docker-archive is not tagged with the target's registry"
    python3 - "$work/gpu-config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["config"]
env = dict(e.split("=", 1) for e in c["Env"])
assert env["KILN_THREADS"] == "96" and "NVIDIA_VISIBLE_DEVICES" not in env and "KILN_DEVICE" not in env, env
assert c["Labels"]["kiln.target"] == "hpc-gpu" and c["Labels"]["kiln.target.device"] == "gpu", c["Labels"]
assert c["Labels"]["kiln.device"] == "cpu", c["Labels"]
print("GPU target on its CPUs: threads", env["KILN_THREADS"], "no NVIDIA env, labels", c["Labels"]["kiln.target"])
PY
    # The recipes come with the image and pin what was just built.
    gpu_digest=$(manifest_digest "$work/gpu")
    for f in Dockerfile .dockerignore kiln.def job.slurm kubernetes/deployment.yaml kubernetes/job.yaml; do
      [ -s "$work/gpu/$f" ] || fail "kiln image did not write $f"
    done
    grep -q "registry.example.org/team/kiln-model@$gpu_digest" "$work/gpu/kubernetes/deployment.yaml" ||
      fail "deployment.yaml does not reference the image by its digest $gpu_digest"
    grep -q '^#SBATCH --gres' "$work/gpu/job.slurm" && fail "job.slurm of a CPU image asks for GPUs"
    grep -q '^#SBATCH --partition=gpu' "$work/gpu/job.slurm" || fail "job.slurm does not use the target's partition"
    bash -n "$work/gpu/job.slurm" || fail "job.slurm is not valid bash"
    ;;
  gpu)
    gpu_target="$(dirname "$model")/../targets/hpc-gpu-slurm.yaml"
    # A kiln without the plugin beside it refuses, naming the plugin: never a CPU-only "GPU image".
    mkdir -p "$work/noplugin"
    cp "$kiln" "$work/noplugin/kiln"
    set +e
    env -u KILN_CUDA_PLUGIN "$work/noplugin/kiln" image "$model" -o "$work/refused" --target "$gpu_target" \
      --runtime "$(dirname "$kiln")/kiln-runtime" > "$work/refused.log" 2>&1
    rc=$?
    set -e
    cat "$work/refused.log"
    [ "$rc" = 1 ] || fail "a GPU target without the plugin exited $rc, expected 1"
    grep -q "^kiln: error: target 'hpc-gpu' has GPUs, so its image carries the CUDA backend, but the CUDA backend plugin is not installed" \
      "$work/refused.log" || fail "no clear message without the plugin"
    [ ! -e "$work/refused/oci" ] || fail "an image was written without the plugin"
    plugin="$(dirname "$kiln")/libkiln_cuda.so"
    [ -f "$plugin" ] || skip "the CUDA plugin was not built here ($plugin: no nvcc, cuBLASLt or cuDNN); the refusal without it passed"

    "$kiln" image "$model" -o "$work/gpu" --target "$gpu_target" --cuda-precision bf16 --json > "$work/gpu.json" 2> "$work/gpu.err" ||
      { cat "$work/gpu.err"; fail "kiln image (GPU target) failed"; }
    cat "$work/gpu.err"
    "$kiln" image "$model" -o "$work/cpu" --json > "$work/cpu.json" 2> "$work/cpu.err" || { cat "$work/cpu.err"; fail "kiln image (CPU) failed"; }
    cmp "$plugin" "$work/gpu/bundle/bin/libkiln_cuda.so" || fail "the bundle does not carry the built plugin beside kiln-runtime"
    [ ! -e "$work/cpu/bundle/bin/libkiln_cuda.so" ] || fail "the CPU bundle carries the plugin"
    cuda_major=$(readelf -d "$plugin" | sed -n 's/.*\[libcublasLt\.so\.\([0-9]*\)\].*/\1/p')
    [ -n "$cuda_major" ] || fail "readelf -d names no libcublasLt in $plugin"
    python3 - "$work" "$cuda_major" <<'PY'
import json, sys, tarfile
w, major = sys.argv[1], sys.argv[2]

def image(name):
    d = w + "/" + name + "/oci/"
    m = json.load(open(d + "index.json"))["manifests"][0]["digest"].split(":")[1]
    man = json.load(open(d + "blobs/sha256/" + m))
    config = json.load(open(d + "blobs/sha256/" + man["config"]["digest"].split(":")[1]))
    layers = {}
    for l in man["layers"]:
        with tarfile.open(d + "blobs/sha256/" + l["digest"].split(":")[1], "r:*") as t:
            layers[l["annotations"]["kiln.layer"]] = [m.name for m in t.getmembers() if m.isfile()]
    return [l["annotations"]["kiln.layer"] for l in man["layers"]], layers, config["config"]

order, layers, config = image("gpu")
assert order == ["cuda", "runtime", "model", "config"], order
cuda = set(layers["cuda"])
lib = "usr/lib/x86_64-linux-gnu/"
for name in ["libcublasLt.so." + major, "libcudnn.so.9", "libcudnn_graph.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9",
             "libcudnn_engines_precompiled.so.9", "libcudnn_heuristic.so.9"]:
    assert lib + name in cuda, (name, sorted(cuda))
assert not any("libcuda.so" in n for n in cuda), sorted(cuda)  # the driver is the host's
assert "kiln/bin/libkiln_cuda.so" in layers["runtime"] and "kiln/bin/kiln-runtime" in layers["runtime"], layers["runtime"]
env = dict(e.split("=", 1) for e in config["Env"])
assert env["KILN_DEVICE"] == "cuda" and env["NVIDIA_VISIBLE_DEVICES"] == "all", env
assert env["KILN_CUDA_PRECISION"] == "bf16", env  # kiln image --cuda-precision bf16
assert config["Labels"]["kiln.device"] == "cuda" and config["Labels"]["kiln.passes"] == "default for cuda", config["Labels"]
meta = json.load(open(w + "/gpu/bundle/metadata.json"))
assert meta["target"]["runs_on"] == "cuda" and meta["runtime"]["device_plugin"] == "bin/libkiln_cuda.so", meta["target"]
assert meta["target"]["cuda_precision"] == "bf16", meta["target"]
assert "KILN_CUDA_PRECISION=bf16" in open(w + "/gpu/Dockerfile").read()
assert "value: bf16" in open(w + "/gpu/kubernetes/deployment.yaml").read()
assert sorted("/" + n for n in cuda) == sorted(meta["runtime"]["cuda_libraries"]), meta["runtime"]["cuda_libraries"]

# The design forbids CUDA libraries in CPU images.
order, layers, config = image("cpu")
assert order == ["runtime", "model", "config"], order
for names in layers.values():
    bad = [n for n in names if "libcu" in n.split("/")[-1] or "libnvrtc" in n or "libkiln_cuda" in n]
    assert not bad, bad
assert not any(e.startswith(("KILN_DEVICE=", "KILN_CUDA_PRECISION=", "NVIDIA_")) for e in config["Env"]), config["Env"]
sizes = {k: json.load(open(w + "/" + k + ".json"))["compressed_size"] for k in ("gpu", "cpu")}
print("GPU image: %d CUDA libraries, %.1f MB compressed; CPU image %.1f MB, no CUDA library" %
      (len(cuda), sizes["gpu"] / 1e6, sizes["cpu"] / 1e6))
PY
    # A given .kiln ships as is. One compiled for the CPU (bf16 layers) records it: for a GPU target
    # its image runs on the node's CPUs, with a note; forced onto the GPU it draws a warning naming the node.
    "$kiln" compile "$model" --passes default+mixed_precision_bf16 -o "$work/bf16.kiln" > /dev/null || fail "kiln compile (bf16) failed"
    "$kiln" image "$work/bf16.kiln" -o "$work/cpu-bf16" --target "$gpu_target" > "$work/cpu-bf16.log" 2>&1 ||
      { cat "$work/cpu-bf16.log"; fail "kiln image of a CPU .kiln for a GPU target failed"; }
    grep -q "^device cpu, as recorded in .*bf16.kiln" "$work/cpu-bf16.log" || { cat "$work/cpu-bf16.log"; fail "no note of the recorded device"; }
    grep -q "KILN_DEVICE=cuda" "$work/cpu-bf16/Dockerfile" && fail "the image of a CPU .kiln runs on the GPU"
    "$kiln" image "$work/bf16.kiln" -o "$work/gpu-bf16" --target "$gpu_target" --device cuda > "$work/gpu-bf16.log" 2>&1 ||
      { cat "$work/gpu-bf16.log"; fail "kiln image --device cuda of a CPU .kiln for a GPU target failed"; }
    grep -q "^kiln: warning: .*bf16.kiln will fail on the GPU: no CUDA kernel for node '/stem/Conv'" "$work/gpu-bf16.log" ||
      { cat "$work/gpu-bf16.log"; fail "no warning for a .kiln the GPU cannot run"; }
    # A .kiln compiled for the GPU at a precision records it, and its image runs at it by default.
    "$kiln" compile "$model" --device cuda --cuda-precision fp16 -o "$work/fp16.kiln" > /dev/null || fail "kiln compile --device cuda failed"
    "$kiln" image "$work/fp16.kiln" -o "$work/gpu-fp16" --target "$gpu_target" > "$work/gpu-fp16.log" 2>&1 ||
      { cat "$work/gpu-fp16.log"; fail "kiln image of a GPU .kiln failed"; }
    grep -q "^GPU precision fp16, as recorded in .*fp16.kiln" "$work/gpu-fp16.log" || { cat "$work/gpu-fp16.log"; fail "no note of the recorded precision"; }
    grep -q "KILN_CUDA_PRECISION=fp16" "$work/gpu-fp16/Dockerfile" || fail "the image of an fp16 .kiln does not run at fp16"
    # The recipes: NVIDIA's image with the plugin's CUDA major, each library from its folder there, one GPU.
    grep -q "^ARG CUDA_IMAGE=nvidia/cuda:$cuda_major\..*-cudnn-runtime-" "$work/gpu/Dockerfile" || fail "the Dockerfile's CUDA image is not CUDA $cuda_major with cuDNN"
    grep -q "^      /usr/local/cuda/lib64/libcublasLt.so.$cuda_major \\\\$" "$work/gpu/Dockerfile" || fail "the Dockerfile does not copy libcublasLt.so.$cuda_major"
    grep -q '^      /usr/lib/x86_64-linux-gnu/libcudnn_graph.so.9 \\$' "$work/gpu/Dockerfile" || fail "the Dockerfile does not copy cuDNN's sub-libraries"
    grep -q "libcu" "$work/cpu/Dockerfile" && fail "the CPU Dockerfile names a CUDA library"
    grep -q '^#SBATCH --gres=gpu:1$' "$work/gpu/job.slurm" || fail "job.slurm does not ask for one GPU"
    grep -q 'exec --cleanenv --nv ' "$work/gpu/job.slurm" || fail "job.slurm does not pass --nv"
    grep -q 'nvidia.com/gpu: 1$' "$work/gpu/kubernetes/deployment.yaml" || fail "deployment.yaml does not request a GPU"
    grep -q 'nvidia.com/gpu: 1$' "$work/gpu/kubernetes/job.yaml" || fail "job.yaml does not request a GPU"
    grep -q '^#   apptainer run --nv ' "$work/gpu/kiln.def" || fail "kiln.def does not run with --nv"
    # Inside the image the plugin and the CUDA libraries load: with no driver under chroot, the
    # answer must be the driver's, not a library the loader cannot find. (chroot has no /proc,
    # where kiln-runtime finds its own folder: KILN_CUDA_PLUGIN names the plugin instead.)
    unpack "$work/gpu"
    chroot_runner "$work/gpu/unpacked/rootfs"
    set +e
    env -i KILN_DEVICE=cuda KILN_CUDA_PLUGIN=/kiln/bin/libkiln_cuda.so "${runner[@]}" /kiln/bin/kiln-runtime selftest > "$work/gpu-selftest.log" 2>&1
    set -e
    cat "$work/gpu-selftest.log"
    grep -q "kiln-runtime: error: no NVIDIA driver" "$work/gpu-selftest.log" ||
      grep -q "selftest passed" "$work/gpu-selftest.log" || fail "the CUDA backend did not load inside the GPU image"
    env -i KILN_DEVICE=cpu "${runner[@]}" /kiln/bin/kiln-runtime selftest > "$work/gpu-cpu.log" 2>&1 ||
      { cat "$work/gpu-cpu.log"; fail "the GPU image's self-test on the CPUs (KILN_DEVICE=cpu) failed"; }
    ;;
  selftest)
    build "$work/a"
    unpack "$work/a"
    root="$work/a/unpacked/rootfs"
    chroot_runner "$root"
    # The rootfs has no shell, no /proc and no host libraries; the environment is empty.
    env -i "${runner[@]}" /kiln/bin/kiln-runtime selftest > "$work/selftest.log" 2>&1 || { cat "$work/selftest.log"; fail "selftest failed inside the image"; }
    cat "$work/selftest.log"
    grep -q "selftest passed" "$work/selftest.log" || fail "selftest did not report success"
    # batch mode inside the image: the self-test inputs in, outputs out to /tmp
    env -i "${runner[@]}" /kiln/bin/kiln-runtime run /kiln/model/model.kiln --input /kiln/selftest/inputs.npz --output /tmp/y.npz \
      > "$work/run.log" 2>&1 || { cat "$work/run.log"; fail "kiln-runtime run failed inside the image"; }
    [ -s "$root/tmp/y.npz" ] || fail "run wrote no output"
    # a wrong reference must fail with a clear message and exit 1
    python3 - "$root/kiln/selftest/expected.npz" <<'PY'
import sys, zipfile
p = sys.argv[1]
z = zipfile.ZipFile(p); name = z.namelist()[0]; data = bytearray(z.read(name)); z.close()
data[-4:] = b"\x00\x00\x80\x7f" if data[-4:] != b"\x00\x00\x80\x7f" else b"\x00\x00\x00\x00"  # last float -> inf
with zipfile.ZipFile(p, "w") as z: z.writestr(name, bytes(data))
PY
    set +e
    env -i "${runner[@]}" /kiln/bin/kiln-runtime selftest > "$work/bad.log" 2>&1
    rc=$?
    set -e
    cat "$work/bad.log"
    [ "$rc" = 1 ] || fail "a mismatching self-test exited $rc, expected 1"
    grep -q "kiln-runtime: error: self-test failed: output 'logits'" "$work/bad.log" || fail "no clear mismatch message"
    ;;
  serve)
    py=
    for candidate in python3 /usr/bin/python3; do
      if "$candidate" -c 'import numpy' 2> /dev/null; then py=$candidate; break; fi
    done
    [ -n "$py" ] || skip "needs python3 with numpy (apt-get install python3-numpy)"
    build "$work/a"
    unpack "$work/a"
    root="$work/a/unpacked/rootfs"
    chroot_runner "$root"
    # The image's own KILN_* variables (KILN_BUNDLE, KILN_THREADS) and nothing else from any host.
    mapfile -t kiln_env < <("$py" -c 'import json,sys; [print(e) for e in json.load(open(sys.argv[1]))["process"]["env"] if e.startswith("KILN_")]' \
      "$work/a/unpacked/config.json")
    [ "${#kiln_env[@]}" -gt 0 ] || fail "the image sets no KILN_* variables"
    env -i "${kiln_env[@]}" "${runner[@]}" /kiln/bin/kiln-runtime serve-model --host 127.0.0.1 --port 0 --port-file /tmp/port \
      > "$work/serve.log" 2>&1 &
    pid=$!
    trap 'kill -9 $pid 2> /dev/null || true; rm -rf "$work"' EXIT
    for _ in $(seq 300); do
      [ -s "$root/tmp/port" ] && break
      kill -0 "$pid" 2> /dev/null || { cat "$work/serve.log"; fail "serve-model exited inside the image"; }
      sleep 0.1
    done
    [ -s "$root/tmp/port" ] || { cat "$work/serve.log"; fail "serve-model wrote no port file"; }
    "$py" - "$(cat "$root/tmp/port")" "$root/kiln" <<'PY' || { cat "$work/serve.log"; fail "inference inside the image failed"; }
import json, sys, urllib.request
import numpy as np
port, bundle = sys.argv[1], sys.argv[2]
meta = json.load(open(bundle + "/metadata.json"))
name, tol = meta["model"]["name"], meta["selftest"]["tolerance"]
kinds = {"float32": "FP32", "float16": "FP16", "int8": "INT8", "uint8": "UINT8", "int32": "INT32", "int64": "INT64", "bool": "BOOL"}
inputs = np.load(bundle + "/selftest/inputs.npz")
expected = np.load(bundle + "/selftest/expected.npz")
body = {"id": "selftest", "inputs": [{"name": k, "shape": list(v.shape), "datatype": kinds[str(v.dtype)], "data": v.ravel().tolist()}
                                     for k, v in inputs.items()]}
req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/{name}/infer", data=json.dumps(body).encode(), method="POST")
doc = json.load(urllib.request.urlopen(req, timeout=60))
got = {o["name"]: np.array(o["data"], np.float64).reshape(o["shape"]) for o in doc["outputs"]}
assert doc["model_name"] == name and doc["id"] == "selftest", doc.get("model_name")
assert sorted(got) == sorted(expected.keys()), (sorted(got), sorted(expected.keys()))
for k in expected.keys():
    want = expected[k].astype(np.float64)
    err, limit = np.abs(got[k] - want).max(), tol["abs"] + tol["rel"] * np.abs(want).max()
    print(f"output {k}: max |error| {err:.3g} (limit {limit:.3g})")
    assert got[k].shape == want.shape and err <= limit, k
PY
    kill -TERM "$pid"
    set +e
    wait "$pid"
    rc=$?
    set -e
    cat "$work/serve.log"
    [ "$rc" = 0 ] || fail "serve-model exited $rc after SIGTERM inside the image, expected 0"
    ;;
  *) fail "unknown case '$case_name'" ;;
esac
echo "PASS: $case_name"
