// kiln's graph IR: values (typed edges, some holding initializer data) and nodes (core ops
// with typed attributes). A plain data structure; validation, ordering, shape inference and
// printing are free functions in their own files.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/op_def.h"

namespace kiln {

using ValueId = int32_t;
inline constexpr ValueId kNoValue = -1;

struct Value {
  std::string name;
  ValueType type;
  int producer = -1;  // index of the producing node; -1 for graph inputs and initializers
};

struct Node {
  std::string name;
  OpKind op = OpKind::Identity;
  Attrs attrs;
  std::vector<ValueId> inputs;   // kNoValue for an absent optional input
  std::vector<ValueId> outputs;  // kNoValue for an unused optional output
};

struct GraphSource {
  std::string format;    // "onnx"
  std::string producer;  // e.g. "pytorch 1.13.1"
  int64_t opset = 0;
};

struct Graph {
  std::string name;
  GraphSource source;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::unordered_map<ValueId, Tensor> initializers;

  ValueId add_value(std::string value_name, ValueType type);
  ValueId find_value(const std::string& value_name) const;  // kNoValue when absent
  int add_node(Node node);  // sets producer of its outputs; returns the node index

  const Value& value(ValueId id) const { return values[static_cast<size_t>(id)]; }
  Value& value(ValueId id) { return values[static_cast<size_t>(id)]; }
  bool is_initializer(ValueId id) const { return initializers.count(id) != 0; }

 private:
  std::unordered_map<std::string, ValueId> by_name_;
};

// Symbolic dimension bindings, e.g. {"batch": 1}.
using DimBindings = std::map<std::string, int64_t>;

}  // namespace kiln
