#!/bin/bash
# The fewest leading steps of a model's CUDA plan that kiln's GPU accuracy control keeps in float32
# (kiln compile --device cuda --cuda-precision P with a bound: kernels/verify/keep_fp32_search.h)
# for a tf32, fp16 or bf16 plan to meet a bound against the fp32 reference, found by emulating the
# precision on this CPU (no GPU needed) over seeded random samples (--accuracy-random, seed 11;
# kiln verify's default seed 1 is then held out). Prints one line per model, the format
# bench/gpu_session.sh's verify_mixed stage reads (KEEP_FILE):
#   MODEL PRECISION K STEPS FIGURE NODE,NODE,...     (FIGURE: the emulated cosine, or max rel error)
# Usage: bench/gpu_keep_fp32_search.sh [--precision bf16] [--min-cosine 0.999 | --max-rel-error 1e-3] MODEL...   (models from build/model-cache)
# env: KILN (build/kiln), CACHE (build/model-cache), SAMPLES (4), BATCH (2)
set -euo pipefail
cd "$(dirname "$0")/.."
precision=bf16
bound=(--min-cosine 0.999)
while [ $# -gt 0 ]; do
  case $1 in
    --precision) precision=$2; shift 2 ;;
    --min-cosine|--max-rel-error) bound=("$1" "$2"); shift 2 ;;
    *) break ;;
  esac
done
kiln=${KILN:-build/kiln}
cache=${CACHE:-build/model-cache}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for model in "$@"; do
  "$kiln" compile "$cache/$model.onnx" --batch "${BATCH:-2}" --device cuda --cuda-precision "$precision" "${bound[@]}" \
    --accuracy-random "${SAMPLES:-4}" -o "$work/$model.kiln" >"$work/$model.log" 2>&1 || { tail -1 "$work/$model.log" >&2; continue; }
  # "  GPU accuracy control: bf16 with K of N steps kept in fp32...; cosine C, max rel R ..." and "  kept in fp32: A,B,..."
  summary=$(grep -m1 '^  GPU accuracy control: ' "$work/$model.log")
  k=$(sed -E 's/.* with ([0-9]+) of ([0-9]+) steps.*/\1/' <<<"$summary")
  n=$(sed -E 's/.* with ([0-9]+) of ([0-9]+) steps.*/\2/' <<<"$summary")
  if [ "${bound[0]}" = --min-cosine ]; then figure=$(sed -E 's/.*; cosine ([0-9.]+),.*/\1/' <<<"$summary")
  else figure=$(sed -E 's/.*, max rel ([0-9.e+-]+).*/\1/' <<<"$summary"); fi
  nodes=$(sed -n 's/^  kept in fp32: //p' "$work/$model.log")
  echo "$model $precision $k $n $figure ${nodes:--}"
done
