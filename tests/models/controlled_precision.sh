#!/bin/bash
# Issue 4's torchvision target for reduced precision under accuracy control: compile MODEL in
# int8 (cosine >= 0.99 and top-1 agreement >= 95%) or bf16 (cosine >= 0.999) with the most
# sensitive layers kept in fp32 as chosen on one seeded data set (seed 11), then verify on
# another (seed 1, held out) against the fp32 reference executor; verify's tolerances fail the test.
# The control chooses on twice the held-out samples: on 128, its int8 choice for MobileNetV2 fit
# its own samples (1.6 points of top-1 lost) and missed the held-out 95% by one sample of 128 on
# an AVX2 machine; on 256 it kept two more layers in fp32 and held out 98.4%.
# Usage: controlled_precision.sh KILN MODEL.onnx int8|bf16 [SAMPLES]
set -euo pipefail
kiln=$1 model=$2 precision=$3 samples=${4:-128}
[ -f "$model" ] || { echo "$model missing (models_export did not run)"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
case "$precision" in
  int8) passes=default+quantize_int8 control="--calibration-random 16 --max-accuracy-drop 0.02 --min-cosine 0.99"
        tolerances="--min-cosine 0.99 --min-top1-agreement 0.95" ;;
  bf16) passes=default+mixed_precision_bf16 control="--min-cosine 0.999"
        tolerances="--min-cosine 0.999" ;;
  *) echo "precision must be int8 or bf16, got '$precision'" >&2; exit 2 ;;
esac
# shellcheck disable=SC2086
"$kiln" compile "$model" --batch 8 -o "$out/m.kiln" --passes "$passes" $control --accuracy-random $((2 * samples)) |
  grep 'accuracy control'
# shellcheck disable=SC2086
"$kiln" verify "$out/m.kiln" --random "$samples" --seed 1 $tolerances
