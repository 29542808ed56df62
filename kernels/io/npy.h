// NumPy .npy files: read (little-endian, C order; float32/float16/float64*/int8/uint8/int32/
// int64/bool) and write. *float64 arrays are converted to float32 on read, because users' NumPy
// defaults to float64 while kiln models take float32; the conversion is stated in the docs.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/core/status.h"
#include "kernels/core/tensor.h"

namespace kiln {

// `what` names the source in errors (a path, or "entry 'x' of inputs.npz").
Result<Tensor> npy_read_bytes(std::span<const uint8_t> bytes, const std::string& what);
Result<Tensor> npy_read_file(const std::string& path);

std::vector<uint8_t> npy_write_bytes(const Tensor& tensor);  // bfloat16 is written as float32
Status npy_write_file(const std::string& path, const Tensor& tensor);

}  // namespace kiln
