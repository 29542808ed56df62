#include "compilers/ir/graph.h"

namespace kiln {

ValueId Graph::add_value(std::string value_name, ValueType type) {
  const auto id = static_cast<ValueId>(values.size());
  by_name_[value_name] = id;
  values.push_back(Value{std::move(value_name), std::move(type), -1});
  return id;
}

ValueId Graph::find_value(const std::string& value_name) const {
  auto it = by_name_.find(value_name);
  return it == by_name_.end() ? kNoValue : it->second;
}

int Graph::add_node(Node node) {
  const int index = static_cast<int>(nodes.size());
  for (ValueId out : node.outputs)
    if (out != kNoValue) value(out).producer = index;
  nodes.push_back(std::move(node));
  return index;
}

}  // namespace kiln
