#include "compilers/passes/keep_fp32.h"

#include <algorithm>

namespace kiln {

bool kept_in_fp32(const PassContext& ctx, const Node& node) {
  return std::find(ctx.keep_fp32.begin(), ctx.keep_fp32.end(), node.name) != ctx.keep_fp32.end();
}

Status check_kept_layers(const Graph& graph, const PassContext& ctx) {
  for (const std::string& name : ctx.keep_fp32) {
    const bool known = std::any_of(graph.nodes.begin(), graph.nodes.end(), [&](const Node& n) { return n.name == name; });
    KILN_REQUIRE(known, invalid_argument, "layer '", name, "' to keep in fp32 is not a node of the compiled graph");
  }
  return Status::ok();
}

}  // namespace kiln
