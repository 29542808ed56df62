// Per-node export rules (internal to the exporter): what one kiln node becomes in ONNX, and the
// context the rules write the model through (unique names, shared constants, nodes).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <onnx/onnx_pb.h>

#include "compilers/ir/graph.h"
#include "kernels/quantization.h"

namespace kiln::onnx_detail {

class ExportContext {
 public:
  ExportContext(const Graph& graph, onnx::GraphProto& proto);

  const Graph& graph;

  // The ONNX name of kiln value `id` ("" for kNoValue, ONNX's absent input). An initializer
  // referenced here is written to the model (those nobody references are left out).
  std::string ref(ValueId id);
  // A value name not used yet, derived from `base`.
  std::string fresh_value(const std::string& base);
  // A new initializer holding `t`; returns its (fresh) name.
  std::string constant(const std::string& base, const Tensor& t);
  // A float32 scalar initializer, one per distinct value.
  std::string scalar(float v);
  // Appends a node named uniquely from `name`.
  onnx::NodeProto& add_node(const std::string& op, const std::string& name, const std::vector<std::string>& inputs,
                            const std::vector<std::string>& outputs);
  // Writes the initializers ref() asked for.
  void write_initializers();

  // QDQ bookkeeping (qdq_export.cpp): the values an int8 node writes quantized (their name is a
  // DequantizeLinear output), quantized weights and input QDQ pairs already written.
  std::unordered_map<ValueId, QuantParams> quantized_outputs;
  std::map<std::pair<ValueId, int64_t>, std::string> quantized_weights;            // (W, axis) -> DQ output
  std::map<std::tuple<ValueId, uint32_t, QuantType>, std::string> quantized_inputs;  // (X, scale bits, type)
  std::map<QuantType, std::string> zero_points;                                      // scalar 0 of each type

 private:
  onnx::GraphProto& proto_;
  std::unordered_set<std::string> value_names_;
  std::unordered_set<std::string> node_names_;
  std::unordered_set<ValueId> used_initializers_;
  std::vector<ValueId> initializer_order_;
  std::map<uint32_t, std::string> scalars_;  // by the float's bits
};

// Refuses the ops that have no ONNX form (kiln's own fused ops), naming the node and the pass that
// made it; checked on every node before anything else.
Status export_check_node(const Node& node);

// Writes the ONNX node(s) for `node`. Errors name the node.
Status export_node(ExportContext& ctx, const Node& node);

}  // namespace kiln::onnx_detail
