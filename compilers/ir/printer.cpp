#include "compilers/ir/printer.h"

namespace kiln {
namespace {

std::string type_string(const ValueType& t) {
  return std::string(dtype_name(t.dtype)) + (t.rank_known ? sym_shape_to_string(t.shape) : "[?]");
}

}  // namespace

void graph_print(const Graph& graph, std::ostream& os) {
  os << "graph " << (graph.name.empty() ? "main" : graph.name) << '\n';
  for (ValueId id : graph.inputs) os << "  input  %" << graph.value(id).name << ": " << type_string(graph.value(id).type) << '\n';
  for (const auto& [id, tensor] : graph.initializers)
    os << "  weight %" << graph.value(id).name << ": " << tensor.describe() << '\n';
  for (const Node& node : graph.nodes) {
    os << "  ";
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (i) os << ", ";
      os << (node.outputs[i] == kNoValue ? std::string("_") : "%" + graph.value(node.outputs[i]).name);
    }
    os << " = " << op_name(node.op) << '(';
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (i) os << ", ";
      os << (node.inputs[i] == kNoValue ? std::string("_") : "%" + graph.value(node.inputs[i]).name);
    }
    os << ')';
    if (!node.attrs.all().empty()) {
      os << " {";
      bool first = true;
      for (const auto& [name, value] : node.attrs.all()) {
        os << (first ? "" : ", ") << name << '=' << attr_value_to_string(value);
        first = false;
      }
      os << '}';
    }
    os << "  # " << node.name;
    for (ValueId out : node.outputs)
      if (out != kNoValue) os << ' ' << type_string(graph.value(out).type);
    os << '\n';
  }
  for (ValueId id : graph.outputs) os << "  output %" << graph.value(id).name << ": " << type_string(graph.value(id).type) << '\n';
}

}  // namespace kiln
