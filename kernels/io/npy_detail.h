// Internals of the .npy reader and writer (npy.cpp) that the .npz code (npz.cpp) builds on: an
// archive entry is a .npy file, read through the same streaming reader and written as the same
// header followed by the same data. Not part of kiln's API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/core/limits.h"
#include "kernels/core/status.h"
#include "kernels/core/tensor.h"

namespace kiln::npy_detail {

// Largest data block kiln reads from or writes to one .npy (16 GiB).
inline constexpr uint64_t kMaxDataBytes = static_cast<uint64_t>(limits::kMaxValueBytes);
// Largest header kiln parses (NumPy's own default limit is 10000 bytes).
inline constexpr uint64_t kMaxHeaderBytes = limits::kMaxNpyHeaderBytes;

// Fills up to `n` bytes at `dst` from a sequential source; returns the count, which is less than
// `n` only at the end of the source.
using ReadFn = std::function<Result<size_t>(void* dst, size_t n)>;

// Reads one .npy from a source of `total` bytes; `what` names the source in errors. The header is
// parsed and every size checked before anything is allocated.
Result<Tensor> read_stream(const ReadFn& read, uint64_t total, const std::string& what);

// The preamble and header of `tensor`'s .npy, padded so that the data starts at a multiple of 64.
std::vector<uint8_t> header_bytes(const Tensor& tensor);

// The size of `tensor`'s data as written to a .npy (bfloat16 is widened to float32).
size_t data_bytes(const Tensor& tensor);

// Appends `tensor`'s data as written to a .npy (bfloat16 widened; undefined tensors as zeros).
void append_data(const Tensor& tensor, std::vector<uint8_t>& out);

}  // namespace kiln::npy_detail
