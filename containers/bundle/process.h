// Runs a program without a shell (no quoting issues with paths) and captures its stdout.
#pragma once

#include <string>
#include <vector>

#include "kernels/core/status.h"

namespace kiln {

struct ProcessResult {
  int exit_code = -1;  // -1 when it died from a signal
  std::string out;
};

// Fails only when the program cannot be started; a non-zero exit is the caller's to judge.
// stderr is discarded. Extra environment entries ("KEY=value") are added to the inherited ones.
Result<ProcessResult> process_run(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {});

}  // namespace kiln
