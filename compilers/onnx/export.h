// ONNX export: a kiln Graph (as the passes leave it) -> a standard ONNX model that kiln's importer
// and other runtimes read. Fused epilogues become the ops they were made of (residual Add,
// activation ops); precision="int8" compute ops become QDQ (QuantizeLinear/DequantizeLinear
// around them, int8 per-channel weights), as ONNX Runtime's quantizer writes them. kiln's own
// fused ops (DepthFirstConv, ConcatAffine, ElementwiseChain, ChannelShuffle) have no ONNX form and are refused.
#pragma once

#include <cstdint>
#include <string>

#include <onnx/onnx_pb.h>

#include "compilers/ir/graph.h"

namespace kiln {

// The opset written: the newest kiln imports (and ONNX 1.12's checker knows). QDQ needs >= 13
// (per-axis DequantizeLinear), HardSwish 14, LayerNormalization 17.
inline constexpr int64_t kOnnxExportOpset = 17;

struct OnnxExportOptions {
  std::string producer_name = "kiln";
  std::string producer_version = "0.1.0";
  // Run onnx::checker on the model before returning it.
  bool run_checker = true;
};

// Errors name the node (and, for kiln-only ops, the pass that made it).
Result<onnx::ModelProto> onnx_export_model(const Graph& graph, const OnnxExportOptions& options = {});
// Exports and writes `path` (binary protobuf); an unwritable path is an io error naming it.
Status onnx_export_file(const Graph& graph, const std::string& path, const OnnxExportOptions& options = {});

}  // namespace kiln
