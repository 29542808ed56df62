// IDX files (the MNIST / Fashion-MNIST format), raw or gzip-compressed.
//
// Format: a 4-byte magic (0x00, 0x00, a type code, the number of dims), one big-endian uint32
// per dim, then the big-endian data in C order. Type codes: 0x08 uint8, 0x09 int8, 0x0B int16
// (read as int32: kiln has no int16), 0x0C int32, 0x0D float32, 0x0E float64 (read as float32,
// as .npy float64 is). gzip is recognised by its magic bytes, not the file name.
//
// Every declared size is checked before the tensor is allocated: the rank (limits::kMaxRank),
// the element count and bytes (limits.h), and the bytes the file can hold (a raw file must hold
// exactly the declared data; a gzip file cannot inflate to more than 1032 times its size).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "kernels/core/status.h"
#include "kernels/core/tensor.h"

namespace kiln {

// `what` names the source in errors (usually the path).
Result<Tensor> idx_read_bytes(std::span<const uint8_t> bytes, const std::string& what);
Result<Tensor> idx_read_file(const std::string& path);

// How uint8 pixels become model inputs: x = (p * scale - mean) / std, in float32 (the same
// operations, in the same order, as NumPy's `(p.astype(float32) / 255 - mean) / std`).
struct IdxNormalize {
  float divisor = 255.0f;  // p / divisor: [0, 1] by default
  float mean = 0.0f;
  float std = 1.0f;
};

// uint8 images [N, ...] to float32 of the same shape; other dtypes are refused.
Result<Tensor> idx_images_to_float(const Tensor& images, const IdxNormalize& normalize, const std::string& what);
// Integer labels of rank 1 ([N]) to int64.
Result<Tensor> idx_labels_to_int64(const Tensor& labels, const std::string& what);

// The two steps above on a file: images as float32 [N, ...], labels as int64 [N].
Result<Tensor> idx_read_images(const std::string& path, const IdxNormalize& normalize = {});
Result<Tensor> idx_read_labels(const std::string& path);

}  // namespace kiln
