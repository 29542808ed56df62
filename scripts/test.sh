#!/usr/bin/env bash
# Installs everything the tests need, builds, and runs every test (unit, conformance, models), then
# the hardening checks (scripts/hardening.sh: unit and conformance tests under ASan+UBSan, and each
# libFuzzer target for FUZZ_SECONDS, default 60). Any failure or sanitizer/fuzzer finding fails.
#   HARDENING=0  skips the hardening checks (e.g. when running a few tests: scripts/test.sh -R npy)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
# ctest runs nproc tests at once, each with its own OpenMP threads: spinning idle threads would
# starve the other tests (two EfficientNet checks side by side: 25.4 s spinning, 14.7 s passive).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
if [ "${HARDENING:-1}" != 0 ]; then
  scripts/hardening.sh
fi
