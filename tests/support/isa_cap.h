// Caps the CPU ISA (KILN_CPU_ISA) for the own kernels created while it lives, so a test can run
// each ISA path of a kernel on a machine that has the higher ones.
#pragma once

#include <cstdlib>
#include <string>

#include "kernels/cpu/isa.h"

namespace kiln::testing {

struct IsaCap {
  explicit IsaCap(CpuIsa isa) { setenv("KILN_CPU_ISA", std::string(cpu_isa_name(isa)).c_str(), 1); }
  ~IsaCap() { unsetenv("KILN_CPU_ISA"); }
  IsaCap(const IsaCap&) = delete;
  IsaCap& operator=(const IsaCap&) = delete;
};

}  // namespace kiln::testing
