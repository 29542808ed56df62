// Per-op import rules: map an ONNX node onto a core op and normalize older opsets to the
// latest semantics (attributes that later became inputs become constant inputs).
#pragma once

#include <functional>
#include <string>

#include <onnx/onnx_pb.h>

#include "compilers/ir/graph.h"

namespace kiln::onnx_detail {

struct NodeImportContext {
  Graph& graph;
  int64_t opset;
  const onnx::NodeProto& proto;
  // Adds an initializer holding `value` and returns its id (name derived from the node's).
  std::function<ValueId(const std::string& suffix, Tensor value)> add_constant;
};

// Fills node.op and rewrites node.attrs/inputs for `ctx.proto`. node.attrs holds the ONNX
// attributes converted generically; node.inputs/outputs hold the ONNX edges.
Status import_node(NodeImportContext& ctx, Node& node);

}  // namespace kiln::onnx_detail
