#!/bin/bash
# kiln on an NVIDIA GPU over the torchvision set: median latency at batch 1 and 64 in fp16 (and
# fp32 with PRECISIONS="fp16 fp32"), through `kiln bench --device cuda`, to set beside PyTorch on
# the same GPU (bench/pytorch_cuda.py; bench/compare_cuda.py joins the two).
# Two times each: end to end (host input in, host output out) and on the device alone (inputs and
# outputs resident, CUDA events), which is how PyTorch is usually timed.
# A model with an op the CUDA backend lacks prints that op instead of a time.
#
# Usage: bench/cuda_torchvision.sh [MODEL ...]
#   env: KILN (default build/kiln), MODELS (default build/model-cache), BATCHES ("1 64"),
#        PRECISIONS ("fp16"), ITERS (50), WARMUP (10), JSONL (append each kiln bench JSON here, one line),
#        EXTRA (more kiln bench arguments)
set -euo pipefail
cd "$(dirname "$0")/.."
KILN=${KILN:-build/kiln}
MODELS=${MODELS:-build/model-cache}
BATCHES=${BATCHES:-1 64}
PRECISIONS=${PRECISIONS:-fp16}
ITERS=${ITERS:-50}
WARMUP=${WARMUP:-10}
JSONL=${JSONL:-}
EXTRA=${EXTRA:-}
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(resnet18 resnet50 mobilenet_v2 efficientnet_b0 squeezenet1_1 shufflenet_v2_x1_0
                                 densenet121 googlenet convnext_tiny)

printf '%-20s %-6s %6s %12s %12s %12s  %s\n' model prec batch median_ms p90_ms device_ms engine
for name in "${names[@]}"; do
  for precision in $PRECISIONS; do
    for batch in $BATCHES; do
      if out=$("$KILN" bench "$MODELS/$name.onnx" --batch "$batch" --device cuda --cuda-precision "$precision" \
                 --iters "$ITERS" --warmup "$WARMUP" $EXTRA --json 2>&1); then
        python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
r.update(name=sys.argv[1], precision=sys.argv[2])
print("%-20s %-6s %6d %12.3f %12.3f %12.3f  %s" % (r["name"], r["precision"], r["batch"], r["median_ms"], r["p90_ms"],
                                                  r.get("device_median_ms", float("nan")), r["engine"]))
if sys.argv[3]:
    with open(sys.argv[3], "a") as f:
        f.write(json.dumps(r) + "\n")' "$name" "$precision" "$JSONL" <<<"$out"
      else
        printf '%-20s %-6s %6s  %s\n' "$name" "$precision" "$batch" "$(tail -1 <<<"$out")"
        [ -z "$JSONL" ] || python3 -c 'import json,sys; print(json.dumps({"name": sys.argv[1], "precision": sys.argv[2], "batch": int(sys.argv[3]), "error": sys.argv[4]}))' \
          "$name" "$precision" "$batch" "$(tail -1 <<<"$out")" >>"$JSONL"
      fi
    done
  done
done
