#!/bin/bash
# kiln's GPU checks and benchmarks on a machine with an NVIDIA GPU but without Debian's packages
# (a lent GPU machine): unpacks a bundle made by scripts/gpu_bundle.sh, then runs the stages
#   tests   the CUDA test executable: every kernel against the reference ([ops]), out of device
#           memory ([oom]); Fashion-MNIST and ResNet-18 end to end ([models], after export);
#   profile_gpu  kiln bench-target --device cuda (kernel sweep, peak, bandwidth in fp32 and fp16,
#           timed on the device), stopped after PROFILE_GPU_S seconds at most (what is measured is
#           kept), exported as OUT_DIR/gpu_profile.json for `kiln bench-target --import`; the store
#           stays in .gpu/ (SQLite's WAL files would count against OUT_DIR's 8), progress in bench.log;
#   export  the torchvision set from that machine's PyTorch (tests/models/export_torchvision.py);
#   verify  kiln verify --device cuda on each model in fp32, tf32, fp16 and bf16 (vs the CPU reference);
#   verify_mixed  (KEEP_SEARCH=1, the default: first runs bench/gpu_keep_fp32_search.sh there, on that machine's
#           exports, and uses its lists) for each line of KEEP_FILE (bench/gpu_keep_fp32_search.sh's output: MODEL PRECISION K STEPS
#           FIGURE NODES, the lists kiln's GPU accuracy control found by emulation: bf16 for cosine 0.9993, tf32 for max
#           rel 1e-3), kiln verify --device cuda with those nodes kept in float32 (--cuda-keep-fp32, on seed-1 data the
#           search did not see), logged beside the figure its emulation gave, and kiln bench at batch 1 and 64 of that
#           plan and of the plain one (bench.log): what the mixed precision costs;
#   precision_ref  PyTorch's own fp16/bf16/tf32 error on the same conditioned models (bench/pytorch_precision_error.py),
#           the yardstick for verify's figures, in OUT_DIR/precision_ref.jsonl;
#   bench   kiln bench --device cuda and PyTorch eager, batch 1 and 64, in BENCH_PRECISIONS, side by side;
#   bench_cudnn  kiln bench again with KILN_CUDA_POINTWISE=0 (1x1 convolutions on cuDNN instead of
#           cuBLASLt batched GEMMs) into OUT_DIR/kiln_bench_cudnn.jsonl, the A/B of that choice;
#   copy_bench  the host copy into pinned staging by helper thread count (kiln_chunked_copy_bench),
#           in bench.log: what end-to-end latency pays before the transfer;
#   profile kiln bench --profile at batch 64 in fp16 (time per op, kernel and every step: KILN_PROFILE_ALL) of
#           PROFILE_MODELS, in bench.log (to set beside `kiln predict -v` per step);
#   compile PyTorch torch.compile(mode="reduce-overhead") on COMPILE_MODELS, while time is left.
# Each stage logs under OUT_DIR (8 files at most: what a lent machine sends back) and the script goes on after a failure; a stage
# is not started once BUDGET_S seconds have passed.
#
# Usage: bench/gpu_session.sh BUNDLE.tar.xz OUT_DIR
#   env: STAGES ("tests profile_gpu export verify verify_mixed precision_ref bench copy_bench profile compile"), KEEP_FILE, KEEP_SEARCH (1), BUDGET_S (380), PROFILE_GPU_S (150),
#        PROFILE_GPU_PRECISIONS (fp32,fp16), MODELS_LIST (the torchvision set), VERIFY_PRECISIONS ("fp32 tf32 fp16 bf16"),
#        BENCH_PRECISIONS ("fp16"), BENCH_TORCH (1; 0: the bench stage runs kiln alone), BUILT_ROOT (/work/main: where the bundle was built;
#        the test executable has its paths compiled in)
set -u
cd "$(dirname "$0")/.."
bundle=$1
out=$2
STAGES=${STAGES:-tests profile_gpu export verify verify_mixed precision_ref bench copy_bench profile compile}
KEEP_FILE=${KEEP_FILE:-bench/results/spr-2026-12-01/keep_fp32_gpu.txt}
KEEP_SEARCH=${KEEP_SEARCH:-1}
PROFILE_GPU_S=${PROFILE_GPU_S:-150}
PROFILE_MODELS=${PROFILE_MODELS:-resnet50 convnext_tiny mobilenet_v2 squeezenet1_1 shufflenet_v2_x1_0}
COMPILE_MODELS=${COMPILE_MODELS:-resnet50 mobilenet_v2}
BUDGET_S=${BUDGET_S:-380}
MODELS_LIST=${MODELS_LIST:-resnet18 resnet50 mobilenet_v2 efficientnet_b0 squeezenet1_1 shufflenet_v2_x1_0 densenet121 googlenet convnext_tiny}
VERIFY_PRECISIONS=${VERIFY_PRECISIONS:-fp32 tf32 fp16 bf16}
BENCH_PRECISIONS=${BENCH_PRECISIONS:-fp16}
PROFILE_GPU_PRECISIONS=${PROFILE_GPU_PRECISIONS:-fp32,fp16}
BUILT_ROOT=${BUILT_ROOT:-/work/main}
BENCH_TORCH=${BENCH_TORCH:-1}
start=$SECONDS
mkdir -p "$out"
log() { echo "[$((SECONDS - start))s] $*" | tee -a "$out/session.log"; }
time_left() { echo $((BUDGET_S - (SECONDS - start))); }
stage_on() { [[ " $STAGES " == *" $1 "* ]]; }

# The bundle: binaries into build/, libraries and data beside them.
mkdir -p .gpu/unpacked build
if command -v xz >/dev/null; then
  tar -xJf "$bundle" -C .gpu/unpacked || { log "cannot unpack $bundle"; exit 1; }
else  # no xz here: Python's lzma
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$bundle" .gpu/unpacked ||
    { log "cannot unpack $bundle"; exit 1; }
fi
cp -r .gpu/unpacked/build/. build/
if [ "$(pwd -P)" != "$BUILT_ROOT" ] && [ ! -e "$BUILT_ROOT" ]; then
  mkdir -p "$(dirname "$BUILT_ROOT")" && ln -s "$(pwd -P)" "$BUILT_ROOT"
fi
if [ -d .gpu/unpacked/data ]; then
  mkdir -p /usr/share/datasets/fashion-mnist && cp .gpu/unpacked/data/* /usr/share/datasets/fashion-mnist/
fi
libdirs=$(pwd -P)/.gpu/unpacked/lib
for name in libcudnn.so.9 libcublasLt.so.13; do
  found=$(find /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu /usr/local/lib /opt -name "$name" -print -quit 2>/dev/null)
  if [ -n "$found" ]; then libdirs="$libdirs:$(dirname "$found")"; else log "not found on this machine: $name"; fi
done
system_cxx=$(ldconfig -p | awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}')
if ! grep -aq GLIBCXX_3.4.30 "$system_cxx" 2>/dev/null; then
  libdirs="$libdirs:$(pwd -P)/.gpu/unpacked/lib-cxx"
  log "this machine's libstdc++ ($system_cxx) is older than the bundle's: using the bundle's"
fi
kiln_env() { LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OMP_WAIT_POLICY=PASSIVE "$@"; }

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  echo "libraries: $libdirs"
  echo "cpus: $(nproc)"
  python3 -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__, "cudnn", torch.backends.cudnn.version())'
} >>"$out/session.log" 2>&1
kiln_env ldd build/libkiln_cuda.so | grep -E "not found|cudnn|cublas" >>"$out/session.log" 2>&1
kiln_env ldd build/kiln | grep "not found" >>"$out/session.log" 2>&1

models_csv=$(tr ' ' ',' <<<"$MODELS_LIST")
export_pid=
if stage_on export; then
  log "export: $models_csv (in the background)"
  (python3 tests/models/export_torchvision.py --out build/model-cache --models "$models_csv" >"$out/export.log" 2>&1
   echo "export exit $?" >>"$out/export.log") &
  export_pid=$!
fi

if stage_on tests; then
  for part in ops oom; do
    log "tests [$part]"
    kiln_env timeout 240 build/tests/cuda/kiln_cuda_gpu_tests "[$part]" >>"$out/tests.log" 2>&1
    log "tests [$part] exit $?"
  done
fi

# While the GPU is otherwise idle (the export runs on the CPU; device time does not depend on it).
if stage_on profile_gpu && [ "$(time_left)" -gt 60 ]; then
  limit=$(($(time_left) - 30))
  [ "$limit" -gt "$PROFILE_GPU_S" ] && limit=$PROFILE_GPU_S
  log "profile_gpu: kiln bench-target --device cuda (at most ${limit}s; SIGINT then keeps what is measured)"
  rm -f .gpu/gpu_profile.sqlite .gpu/gpu_profile.sqlite-wal .gpu/gpu_profile.sqlite-shm
  echo "--- profile_gpu: kiln bench-target --device cuda" >>"$out/bench.log"
  kiln_env timeout --preserve-status -s INT -k 30 "$limit" build/kiln bench-target --device cuda --cuda-precision "$PROFILE_GPU_PRECISIONS" --db .gpu/gpu_profile.sqlite --json \
    >.gpu/profile_gpu.json 2>>"$out/bench.log"
  log "profile_gpu exit $? (130: stopped at the time limit): $(tr -d '\n ' <.gpu/profile_gpu.json | cut -c1-300)"
  if [ -f .gpu/gpu_profile.sqlite ]; then  # no store: the GPU could not be used (the reason is in bench.log)
    kiln_env build/kiln bench-target --db .gpu/gpu_profile.sqlite --export "$out/gpu_profile.json" >>"$out/session.log" 2>&1
    log "profile_gpu export exit $?"
  fi
fi

if [ -n "$export_pid" ]; then
  wait "$export_pid"
  log "export done: $(tail -1 "$out/export.log")"
fi

models_pid=
if stage_on tests && [ "$(time_left)" -gt 60 ]; then
  log "tests [models] (in the background)"
  (kiln_env timeout 300 build/tests/cuda/kiln_cuda_gpu_tests "[models]" >.gpu/tests_models.log 2>&1
   echo "tests [models] exit $?" >>.gpu/tests_models.log) &
  models_pid=$!
fi

# One model's precisions side by side (the CPU reference dominates; this machine has the cores).
verify_row() {
  python3 -c '
import json, sys
path, model, precision = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(path).read()
row = {"model": model, "precision": precision}
try:
    r = json.loads(text[text.index("{"):])
    o = r["outputs"][0]
    row.update({k: o.get(k) for k in ("max_abs_error", "max_rel_error", "cosine", "top1_agreement")}, engine=r.get("engine"))
except Exception:
    row["error"] = text.strip().splitlines()[-1] if text.strip() else "no output"
print(json.dumps(row))' "$1" "$2" "$3"
}
if stage_on verify; then
  mkdir -p .gpu/verify
  for model in $MODELS_LIST; do
    if [ "$(time_left)" -lt 120 ]; then log "verify: out of time before $model"; break; fi
    for precision in $VERIFY_PRECISIONS; do
      kiln_env timeout 120 build/kiln verify "build/model-cache/$model.onnx" --random 4 --batch 2 --device cuda \
        --cuda-precision "$precision" --json >".gpu/verify/$model.$precision" 2>&1 &
    done
    wait $(jobs -p | grep -v -x -e "${models_pid:-none}")
    for precision in $VERIFY_PRECISIONS; do
      verify_row ".gpu/verify/$model.$precision" "$model" "$precision" >>"$out/verify.jsonl"
      log "verify $model $precision: $(tail -1 "$out/verify.jsonl" | cut -c1-200)"
    done
  done
fi
if [ -n "$models_pid" ]; then
  wait "$models_pid"
  cat .gpu/tests_models.log >>"$out/tests.log"
  log "$(tail -1 .gpu/tests_models.log)"
fi

if stage_on verify_mixed && [ "$KEEP_SEARCH" = 1 ] && [ "$(time_left)" -gt 120 ]; then
  # The lists by kiln's own GPU accuracy control on this machine's exports (its PyTorch may name the
  # ONNX nodes otherwise than Debian's), by emulation on its CPUs: what the GPU then runs.
  log "verify_mixed: GPU accuracy control by emulation (bf16 cosine 0.9993, tf32 max rel 1e-3) on $MODELS_LIST"
  (export LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OMP_WAIT_POLICY=PASSIVE
   timeout 90 bench/gpu_keep_fp32_search.sh --precision bf16 --min-cosine 0.9993 $MODELS_LIST
   timeout 150 bench/gpu_keep_fp32_search.sh --precision tf32 --max-rel-error 1e-3 $MODELS_LIST) >.gpu/keep_found.txt 2>>"$out/bench.log"
  awk '$3 > 0' .gpu/keep_found.txt >.gpu/keep.txt
  log "verify_mixed: $(wc -l <.gpu/keep.txt) lists found ($(wc -l <.gpu/keep_found.txt) model/precision pairs): $(cut -d' ' -f1-5 .gpu/keep_found.txt | paste -sd';' -)"
  KEEP_FILE=.gpu/keep.txt
fi
if stage_on verify_mixed && [ -f "$KEEP_FILE" ]; then
  mkdir -p .gpu/verify
  while read -r model precision k steps emulated nodes; do
    [ -n "${nodes:-}" ] && [ "$nodes" != - ] || continue
    if [ "$(time_left)" -lt 60 ]; then log "verify_mixed: out of time before $model"; break; fi
    kiln_env timeout 120 build/kiln verify "build/model-cache/$model.onnx" --random 4 --batch 2 --device cuda \
      --cuda-precision "$precision" --cuda-keep-fp32 "$nodes" --json >".gpu/verify/$model.$precision.kept" 2>&1
    verify_row ".gpu/verify/$model.$precision.kept" "$model" "$precision, first $k of $steps steps in fp32" >>.gpu/verify_mixed.jsonl
    log "verify_mixed $model (emulated $emulated): $(tail -1 .gpu/verify_mixed.jsonl | cut -c1-240)"
    for keep in "" "$nodes"; do
      echo "--- kiln bench $model $precision${keep:+, first $k steps kept in fp32}" >>"$out/bench.log"
      (export LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OMP_WAIT_POLICY=PASSIVE
       PRECISIONS="$precision" ITERS=50 WARMUP=10 EXTRA="${keep:+--cuda-keep-fp32 $keep}" timeout 120 bench/cuda_torchvision.sh "$model") \
        >>"$out/bench.log" 2>&1
    done
  done <"$KEEP_FILE"
fi

if stage_on precision_ref && [ "$(time_left)" -gt 60 ]; then
  log "precision_ref: PyTorch fp16/bf16/tf32 vs fp32 on $models_csv"
  timeout $(($(time_left) - 30)) python3 bench/pytorch_precision_error.py --models "$models_csv" --precisions fp16,bf16,tf32 >"$out/precision_ref.jsonl" 2>>"$out/bench.log"
  log "precision_ref exit $?: $(wc -l <"$out/precision_ref.jsonl") rows"
fi

if stage_on bench && [ "$(time_left)" -gt 90 ]; then
  log "bench: kiln"
  (export LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OMP_WAIT_POLICY=PASSIVE
   JSONL="$out/kiln_bench.jsonl" PRECISIONS="$BENCH_PRECISIONS" ITERS=50 WARMUP=10 timeout 240 bench/cuda_torchvision.sh $MODELS_LIST) >>"$out/bench.log" 2>&1
  [ "$BENCH_TORCH" = 1 ] && log "bench: PyTorch eager"
  for precision in $BENCH_PRECISIONS; do
    [ "$BENCH_TORCH" = 1 ] || break
    timeout 240 python3 bench/pytorch_cuda.py --models "$models_csv" --batches 1,64 --precision "$precision" >>"$out/torch_bench.jsonl" 2>>"$out/bench.log"
  done
  python3 bench/compare_cuda.py "$out/kiln_bench.jsonl" "$out/torch_bench.jsonl" >>"$out/bench.log" 2>&1
  log "bench done"
fi

if stage_on bench_cudnn && [ "$(time_left)" -gt 60 ]; then
  log "bench_cudnn: kiln with KILN_CUDA_POINTWISE=0 (1x1 convolutions on cuDNN)"
  (export LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OMP_WAIT_POLICY=PASSIVE KILN_CUDA_POINTWISE=0
   JSONL="$out/kiln_bench_cudnn.jsonl" PRECISIONS="$BENCH_PRECISIONS" ITERS=50 WARMUP=10 timeout 200 bench/cuda_torchvision.sh $MODELS_LIST) >>"$out/bench.log" 2>&1
  echo "--- kiln with 1x1 convolutions on cuDNN (KILN_CUDA_POINTWISE=0)" >>"$out/bench.log"
  python3 bench/compare_cuda.py "$out/kiln_bench_cudnn.jsonl" "$out/torch_bench.jsonl" >>"$out/bench.log" 2>&1
  log "bench_cudnn done"
fi

if stage_on copy_bench && [ "$(time_left)" -gt 20 ]; then
  echo "--- kiln_chunked_copy_bench ($(nproc) CPUs)" >>"$out/bench.log"
  kiln_env timeout 30 build/bench/kiln_chunked_copy_bench 38.5 7 >>"$out/bench.log" 2>&1
  log "copy_bench exit $?"
fi

if stage_on profile && [ "$(time_left)" -gt 30 ]; then
  for model in $PROFILE_MODELS; do
    [ "$(time_left)" -gt 20 ] || break
    KILN_PROFILE_ALL=1 kiln_env timeout 60 build/kiln bench "build/model-cache/$model.onnx" --batch 64 --device cuda --cuda-precision fp16 \
      --iters 20 --profile >>"$out/bench.log" 2>&1
  done
fi

if stage_on compile && [ "$(time_left)" -gt 100 ]; then
  log "bench: PyTorch torch.compile (reduce-overhead: CUDA graphs, as kiln at small batch) on $COMPILE_MODELS"
  timeout $(($(time_left) - 20)) python3 bench/pytorch_cuda.py --models "$(tr ' ' ',' <<<"$COMPILE_MODELS")" --batches 1,64 \
    --precision fp16 --mode compile-reduce-overhead >>"$out/torch_bench.jsonl" 2>>"$out/bench.log"
  echo "--- torch.compile (reduce-overhead)" >>"$out/bench.log"
  python3 bench/compare_cuda.py "$out/kiln_bench.jsonl" "$out/torch_bench.jsonl" --mode compile-reduce-overhead >>"$out/bench.log" 2>&1
fi
log "session done"
