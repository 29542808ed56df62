#!/usr/bin/env bash
# The main job on the bundled example: install, build, then import the Fashion-MNIST model,
# print its summary, run it on the bundled sample with the reference executor, compile it with the
# default pass pipeline (checking every pass numerically) and run the compiled engine on the same
# sample; then the whole loop: profile this machine (a quick profile), plan the example's
# application description, optimize it (compile, verify on the 10,000 test images, measure the
# best candidates) and build the image of the chosen model; results under out/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
model=examples/fashion-mnist/model.onnx
echo "== kiln inspect $model"
build/kiln inspect "$model"
echo
echo "== kiln run $model"
mkdir -p out/fashion-mnist
build/kiln run "$model" --input examples/fashion-mnist/sample.npz --output out/fashion-mnist/outputs.npz
build/kiln inspect "$model" --json > out/fashion-mnist/inspect.json
echo
echo "== kiln compile $model"
build/kiln compile "$model" --batch 8 --check-numerics -o out/fashion-mnist/model.kiln
echo
echo "== kiln run out/fashion-mnist/model.kiln (compiled engine)"
build/kiln run out/fashion-mnist/model.kiln --input examples/fashion-mnist/sample.npz \
  --output out/fashion-mnist/compiled_outputs.npz
echo
echo "== kiln verify $model (compiled engine vs the fp32 reference executor, with the sample's labels)"
build/kiln verify "$model" --input examples/fashion-mnist/sample.npz --batch 8 --max-accuracy-drop 0.01
echo
echo "== kiln bench out/fashion-mnist/model.kiln"
build/kiln bench out/fashion-mnist/model.kiln --iters 200
echo
echo
echo "== kiln bench-target --quick (a small profile of this machine; the full one, kiln bench-target, takes ~4 min)"
build/kiln bench-target --quick --db out/benchmarks.sqlite
echo
app=examples/fashion-mnist/application.yaml
echo "== kiln plan $app"
build/kiln plan "$app" --db out/benchmarks.sqlite --cache-dir out/cache -o out/fashion-mnist/plan
echo
echo "== kiln optimize $app (the top 2 candidates and the best fp32 one)"
build/kiln optimize "$app" --db out/benchmarks.sqlite --cache-dir out/cache --top 2 -o out/fashion-mnist/optimized
echo
echo "== kiln image out/fashion-mnist/optimized/model.kiln"
build/kiln image out/fashion-mnist/optimized/model.kiln -o out/fashion-mnist/image
echo
echo "results: out/fashion-mnist/{outputs.npz,compiled_outputs.npz,model.kiln,inspect.json}, plan/plan.json,"
echo "         optimized/{plan.json,report.json,model.kiln}, image/ (OCI layout, archives, recipes)"
