#include "compilers/passes/keep_fp32.h"

#include <algorithm>

namespace kiln {

bool kept_in_fp32(const PassContext& ctx, const Node& node) {
  return std::find(ctx.keep_fp32.begin(), ctx.keep_fp32.end(), node.name) != ctx.keep_fp32.end();
}

Status check_layer_names(const Graph& graph, const std::vector<std::string>& names, std::string_view role) {
  for (const std::string& name : names) {
    const bool known = std::any_of(graph.nodes.begin(), graph.nodes.end(), [&](const Node& n) { return n.name == name; });
    KILN_REQUIRE(known, invalid_argument, "layer '", name, "' ", role, " is not a node of the compiled graph");
  }
  return Status::ok();
}

Status check_kept_layers(const Graph& graph, const PassContext& ctx) {
  return check_layer_names(graph, ctx.keep_fp32, "to keep in fp32");
}

}  // namespace kiln
