// Self-test vectors: what an image checks at start-up (and as its health check). At bundle time
// the builder makes seeded inputs and stores the reference executor's outputs; inside the image
// `kiln-runtime selftest` runs the compiled engine on the inputs and compares. Lean on purpose:
// the runtime links this, so it depends on kiln_kernels and nlohmann_json only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/device/plan_runner.h"
#include "kernels/engine.h"
#include "kernels/io/npz.h"
#include "kernels/plan.h"

namespace kiln {

// Files inside a bundle directory (the image's /kiln).
inline constexpr const char* kBundleModelFile = "model/model.kiln";
inline constexpr const char* kBundleInputsFile = "selftest/inputs.npz";
inline constexpr const char* kBundleExpectedFile = "selftest/expected.npz";
inline constexpr const char* kBundleMetadataFile = "metadata.json";
inline constexpr const char* kBundleSbomFile = "sbom.spdx.json";

// An output passes when max |got - expected| <= abs + rel * max |expected|: fp32 results that
// differ only in summation order (blocked convolutions, fused epilogues) stay far inside it.
struct SelftestTolerance {
  double abs = 1e-4;
  double rel = 1e-3;
};

// The tolerance for a compiled plan: the fp32 default, or room for the rounding a bf16 or int8
// plan has by design (its accuracy is verified separately, by kiln verify/optimize; the self-test
// only checks that the runtime computes what was built).
SelftestTolerance selftest_tolerance_for(const Plan& plan);

// The bundle's tolerance, widened for a device that computes in reduced precision by design
// (--cuda-precision tf32: rel 1e-2, fp16: rel 3e-2, bf16: rel 2e-1; an H100 ran the torchvision
// set within 7.3e-3, 1.4e-2 and 9.1e-2 of max |reference|). The CPU and fp32 on a GPU keep the bundle's.
SelftestTolerance selftest_tolerance_on_device(SelftestTolerance bundle, const PlanRunnerOptions& options);

struct SelftestCheck {
  std::string output;
  double max_abs_error = 0;
  double limit = 0;
  bool passed = false;
  std::string problem;  // set when the output is missing or has another dtype/shape
};

// Seeded inputs of the plan's fixed shapes: floats uniform in [-1, 1), integers 0, in
// Plan::inputs order and named after the inputs. Identical bytes on every machine.
Result<NamedTensors> selftest_inputs_make(const Plan& plan, uint64_t seed = 0x6b696c6e);

std::vector<SelftestCheck> selftest_compare(const NamedTensors& expected, const NamedTensors& got,
                                            const SelftestTolerance& tolerance);

// The first failing check as an error naming the output, its error and the limit.
Status selftest_status(const std::vector<SelftestCheck>& checks);

// Runs the compiled plan on the inputs, on the CPU engine or the device `options` names, and
// compares with the expected outputs.
Result<std::vector<SelftestCheck>> selftest_run(const Plan& plan, const NamedTensors& inputs,
                                                const NamedTensors& expected, const SelftestTolerance& tolerance,
                                                const PlanRunnerOptions& options = {});

// The "selftest.tolerance" object of a bundle's metadata.json (defaults where absent).
Result<SelftestTolerance> selftest_tolerance_read(const std::string& metadata_path);

}  // namespace kiln
