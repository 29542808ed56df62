// NumPy .npz archives (zip of .npy entries, stored or deflated), via libzip.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kernels/core/status.h"
#include "kernels/core/tensor.h"

namespace kiln {

// Entries in archive order; names without the ".npy" suffix.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

Result<NamedTensors> npz_read_file(const std::string& path);
// Uncompressed, like np.savez; entries dated 1980-01-01, so equal tensors give equal bytes.
Status npz_write_file(const std::string& path, const NamedTensors& tensors);

}  // namespace kiln
