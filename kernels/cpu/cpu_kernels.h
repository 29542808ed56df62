// kiln's own CPU kernels (no library underneath), listed in registry.cpp.
#pragma once

#include "kernels/kernel.h"

namespace kiln {

extern const KernelImpl kCpuView;  // Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout: in place or a copy

}  // namespace kiln
