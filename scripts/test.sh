#!/usr/bin/env bash
# Installs everything the tests need, builds, and runs every test (unit, conformance, models).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
