#!/usr/bin/env bash
# The main job on the bundled example: install, build, then import the Fashion-MNIST model,
# print its summary, run it on the bundled sample with the reference executor, compile it with the
# default pass pipeline (checking every pass numerically) and run the compiled engine on the same
# sample; results under out/.
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
echo "results: out/fashion-mnist/{outputs.npz,compiled_outputs.npz,model.kiln,inspect.json}"
