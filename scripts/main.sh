#!/usr/bin/env bash
# The main job on the bundled example: install, build, then import the Fashion-MNIST model,
# print its summary, run it on the bundled sample and write the results under out/.
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
echo "results: out/fashion-mnist/outputs.npz, out/fashion-mnist/inspect.json"
