#!/usr/bin/env bash
# Installs every Debian package kiln needs (idempotent, non-interactive), then configures and
# builds Release into build/. Usage: scripts/setup.sh [--tests]
#   --tests  also installs what the test suite needs (conformance data, PyTorch for the models test,
#            Chromium for the web form's browser test).
set -euo pipefail
cd "$(dirname "$0")/.."

with_tests=0
for arg in "$@"; do
  case "$arg" in
    --tests) with_tests=1 ;;
    *) echo "setup.sh: unknown argument '$arg' (expected --tests)" >&2; exit 2 ;;
  esac
done

build_packages=(
  build-essential cmake ninja-build pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler
  nlohmann-json3-dev catch2 libcli11-dev libzip-dev zlib1g-dev libdnnl-dev
  libarchive-dev libssl-dev libcurl4-openssl-dev
  libyaml-cpp-dev  # api/: descriptions and targets as YAML
  libboost-dev  # Boost.Beast/Asio (header-only): kiln-runtime serve-model, later kiln serve
  libsqlite3-dev  # perfmodel/: the benchmark store
  dataset-fashion-mnist  # the main job: kiln optimize verifies accuracy on its 10,000 test images
)
test_packages=(
  libonnx-testdata
  clang libclang-rt-14-dev  # scripts/hardening.sh: libFuzzer targets (clang 14, Debian 12)
  python3 python3-numpy python3-torch python3-torchvision python3-onnx
  umoci skopeo
  docker-registry apache2-utils  # registry push tests: a local registry, htpasswd for Basic auth
  munge slurmctld slurmd slurm-client  # tests/containers/slurm_test.sh: job.slurm on a one-node Slurm cluster
  chromium chromium-driver python3-selenium  # tests/service/web_form_browser_test.py (131 MB download, 550 MB installed)
)

packages=("${build_packages[@]}")
[ "$with_tests" = 1 ] && packages+=("${test_packages[@]}")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" != 0 ] && sudo_cmd="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

jobs=$(nproc)
tests=OFF
[ "$with_tests" = 1 ] && tests=ON
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS="$tests"
cmake --build build -j "$jobs"
