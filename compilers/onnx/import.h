// ONNX import: a model file or bytes -> kiln Graph (core ops, latest-opset semantics).
// Every failure is a typed error naming the op, node and reason; malformed bytes never crash.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "compilers/ir/graph.h"
#include "kernels/core/limits.h"

namespace kiln {

struct OnnxImportOptions {
  // Directory against which external-data tensor locations resolve (default: the model's).
  std::string external_data_dir;
  // Run onnx::checker on the model after kiln's own checks.
  bool run_checker = true;
};

inline constexpr int64_t kOnnxMinOpset = 6;
inline constexpr int64_t kOnnxMaxOpset = 17;
inline constexpr size_t kOnnxMaxModelBytes = limits::kMaxModelBytes;  // protobuf's own 2 GiB ceiling

Result<Graph> onnx_import_file(const std::string& path, const OnnxImportOptions& options = {});
Result<Graph> onnx_import_bytes(std::span<const uint8_t> bytes, const OnnxImportOptions& options = {});

// Reads one serialized TensorProto (.pb file), as the ONNX test suite stores its inputs and outputs.
Result<Tensor> onnx_read_tensor_file(const std::string& path);

}  // namespace kiln
