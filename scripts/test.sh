#!/usr/bin/env bash
# Installs everything the tests need, builds, and runs every test (unit, conformance, models), then
# the hardening checks (scripts/hardening.sh: unit and conformance tests under ASan+UBSan, and each
# libFuzzer target for FUZZ_SECONDS, default 60). Any failure or sanitizer/fuzzer finding fails.
#   HARDENING=0  skips the hardening checks (e.g. when running a few tests: scripts/test.sh -R npy)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
if [ "${HARDENING:-1}" != 0 ]; then
  scripts/hardening.sh
fi
