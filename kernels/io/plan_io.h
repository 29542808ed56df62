// Running a plan on NumPy files: shared by `kiln run`, the lean `kiln-runtime` inside images and
// the image builder's self-test.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "kernels/engine.h"
#include "kernels/io/npz.h"
#include "kernels/plan.h"

namespace kiln {

// Matches a file's entries to the plan's inputs: a .npy (single-input plans) or a .npz with one
// entry per input name (a single-entry .npz feeds a single-input plan whatever its name).
// Entries that name no input are reported in `ignored`.
Result<std::vector<Tensor>> plan_inputs_match(const NamedTensors& entries, const Plan& plan, const std::string& what,
                                              std::vector<std::string>& ignored);
Result<std::vector<Tensor>> plan_inputs_read(const std::string& path, const Plan& plan, std::vector<std::string>& ignored);

// Pairs results with the plan's output names (Plan::outputs order).
NamedTensors plan_outputs_name(const Plan& plan, const std::vector<Tensor>& results);

// Writes the outputs to a .npz, creating its folder.
Status plan_outputs_write(const std::string& path, const Plan& plan, const std::vector<Tensor>& results);

// Builds an engine for `plan` and runs it once.
Result<std::vector<Tensor>> plan_run_engine(const Plan& plan, const std::vector<Tensor>& inputs,
                                            const EngineOptions& options);

// Prints "output NAME: float32[1,10]" per output, with the top-1 class per row of [N, classes]
// float outputs (the quickest sanity check).
void plan_outputs_print(std::ostream& os, const Plan& plan, const std::vector<Tensor>& results);

}  // namespace kiln
