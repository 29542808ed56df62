#!/bin/bash
# kiln on an NVIDIA GPU over the torchvision set: median latency at batch 1 and 64 in fp16 (and
# fp32 with --fp32), through `kiln bench --device cuda`, to set beside PyTorch on the same GPU.
# A model with an op the CUDA backend lacks prints that op instead of a time.
#
# Usage: bench/cuda_torchvision.sh [MODEL ...]
#   env: KILN (default build/kiln), MODELS (default build/model-cache), BATCHES ("1 64"),
#        PRECISIONS ("fp16"), ITERS (50), WARMUP (10)
set -euo pipefail
cd "$(dirname "$0")/.."
KILN=${KILN:-build/kiln}
MODELS=${MODELS:-build/model-cache}
BATCHES=${BATCHES:-1 64}
PRECISIONS=${PRECISIONS:-fp16}
ITERS=${ITERS:-50}
WARMUP=${WARMUP:-10}
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(resnet18 resnet50 mobilenet_v2 efficientnet_b0 squeezenet1_1 shufflenet_v2_x1_0
                                 densenet121 googlenet convnext_tiny)

printf '%-20s %-6s %6s %12s %12s  %s\n' model prec batch median_ms p90_ms engine
for name in "${names[@]}"; do
  for precision in $PRECISIONS; do
    for batch in $BATCHES; do
      if out=$("$KILN" bench "$MODELS/$name.onnx" --batch "$batch" --device cuda --cuda-precision "$precision" \
                 --iters "$ITERS" --warmup "$WARMUP" --json 2>&1); then
        python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("%-20s %-6s %6d %12.3f %12.3f  %s" % (sys.argv[1], sys.argv[2], r["batch"], r["median_ms"], r["p90_ms"], r["engine"]))' \
          "$name" "$precision" <<<"$out"
      else
        printf '%-20s %-6s %6s  %s\n' "$name" "$precision" "$batch" "$(tail -1 <<<"$out")"
      fi
    done
  done
done
