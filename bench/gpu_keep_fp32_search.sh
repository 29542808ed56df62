#!/bin/bash
# The fewest leading steps of a model's CUDA plan to keep in float32 (kiln's GPU mixed precision,
# --cuda-keep-fp32) for a bf16 or fp16 plan to reach a cosine bound against the fp32 reference,
# found by bisection over K with `kiln verify --device cuda --emulate` (no GPU needed). Leading
# steps because the error is made early and amplified (docs/cuda-backend.md); this is a by-hand
# search, not yet kiln's own accuracy control. Prints one line per model:
#   MODEL PRECISION K STEPS COSINE NODE,NODE,...
# Usage: bench/gpu_keep_fp32_search.sh [--precision bf16] [--min-cosine 0.999] MODEL...   (models from build/model-cache)
# env: KILN (build/kiln), CACHE (build/model-cache), SAMPLES (4), BATCH (2)
set -euo pipefail
cd "$(dirname "$0")/.."
precision=bf16
bound=0.999
while [ $# -gt 0 ]; do
  case $1 in
    --precision) precision=$2; shift 2 ;;
    --min-cosine) bound=$2; shift 2 ;;
    *) break ;;
  esac
done
kiln=${KILN:-build/kiln}
cache=${CACHE:-build/model-cache}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for model in "$@"; do
  # The plan's steps in order, from kiln's own step listing (views are not kernels: left out).
  "$kiln" compile "$cache/$model.onnx" --device cuda -o "$work/$model.kiln" >/dev/null
  "$kiln" predict "$work/$model.kiln" --target nvidia-h100-sxm --precision "$precision" --json -v |
    python3 -c 'import json, sys; [print(s["node"]) for s in json.load(sys.stdin)["steps"] if s["op"] not in ("Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity")]' >"$work/steps"
  n=$(wc -l <"$work/steps")
  cosine() {
    "$kiln" verify "$cache/$model.onnx" --random "${SAMPLES:-4}" --batch "${BATCH:-2}" --device cuda --cuda-precision "$precision" --emulate --json "$@" |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["outputs"][0]["cosine"])'
  }
  keep() { head -"$1" "$work/steps" | paste -sd, -; }
  meets() { python3 -c "import sys; sys.exit(0 if $1 >= $bound else 1)"; }
  c=$(cosine)
  lo=0 hi=0 best=$c
  if ! meets "$c"; then
    hi=$n
    best=$(cosine --cuda-keep-fp32 "$(keep "$n")")
    while [ $((hi - lo)) -gt 1 ]; do
      mid=$(((lo + hi) / 2))
      c=$(cosine --cuda-keep-fp32 "$(keep "$mid")")
      if meets "$c"; then hi=$mid best=$c; else lo=$mid; fi
    done
  fi
  echo "$model $precision $hi $n $best $(keep "$hi")"
done
