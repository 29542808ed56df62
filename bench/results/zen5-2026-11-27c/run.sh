#!/bin/bash
# old vs new accuracy control (int8, fp32 fallback) on held-out data
cd "$(git rev-parse --show-toplevel)"
for m in "$@"; do
  for v in ${VARIANTS:-old new}; do
    K=/tmp/kiln_$v; [ $v = new ] && K=build/kiln
    s=$(date +%s)
    $K compile build/model-cache/$m.onnx --batch 8 -o /tmp/cmp/$m.$v.kiln --passes default+quantize_int8 --calibration-random 16 --max-accuracy-drop 0.02 --min-cosine 0.99 --accuracy-random 128 > /tmp/cmp/$m.$v.log 2>&1 || { echo "$m $v FAILED"; continue; }
    e=$(( $(date +%s) - s ))
    ho=$($K verify /tmp/cmp/$m.$v.kiln --random 128 --seed 1 --threads 2 --json | python3 -c 'import json,sys; o=json.load(sys.stdin)["outputs"][0]; print("%.5f %.1f" % (o["cosine"], 100*o["top1_agreement"]))')
    ms=$($K bench /tmp/cmp/$m.$v.kiln --threads 2 --iters 20 --json | python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["median_ms"])')
    line=$(grep -o 'accuracy control: [0-9]* layers.*kept in [a-z0-9]*' /tmp/cmp/$m.$v.log | head -1)
    echo "$m $v heldout=$ho ms=$ms compile_s=$e | $line"
  done
done
