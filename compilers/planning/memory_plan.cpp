#include "compilers/planning/memory_plan.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <queue>
#include <string>
#include <utility>

namespace kiln {

// ---- Graph level -------------------------------------------------------------------------------

bool op_can_run_in_place(OpKind op) {
  switch (op) {
    case OpKind::Relu:
    case OpKind::LeakyRelu:
    case OpKind::Elu:
    case OpKind::Selu:
    case OpKind::Clip:
    case OpKind::Sigmoid:
    case OpKind::HardSigmoid:
    case OpKind::HardSwish:
    case OpKind::Tanh:
    case OpKind::Softplus:
    case OpKind::Erf:
    case OpKind::Exp:
    case OpKind::Log:
    case OpKind::Sqrt:
    case OpKind::Neg:
    case OpKind::Abs:
    case OpKind::Reciprocal:
      return true;
    default:
      return false;
  }
}

int64_t GraphMemoryPlan::value_offset(ValueId id) const {
  if (id < 0 || static_cast<size_t>(id) >= value_buffer.size()) return -1;
  const int b = value_buffer[static_cast<size_t>(id)];
  return b < 0 ? -1 : memory.offsets[static_cast<size_t>(b)];
}

namespace {

// Bytes of a value with a concrete shape; -1 when its shape is not concrete.
Result<int64_t> concrete_bytes(const Value& v) {
  if (!v.type.rank_known || !sym_shape_is_concrete(v.type.shape)) return int64_t{-1};
  int64_t bytes = static_cast<int64_t>(dtype_size(v.type.dtype));
  for (int64_t d : sym_shape_concrete(v.type.shape)) {
    KILN_REQUIRE(d >= 0, invalid_argument, "value '", v.name, "' has a negative dim");
    KILN_REQUIRE(!__builtin_mul_overflow(bytes, d, &bytes), limit_exceeded, "value '", v.name,
                 "' is larger than 2^63 bytes");
  }
  return bytes;
}

}  // namespace

Result<GraphMemoryPlan> plan_graph_memory(const Graph& graph, const GraphMemoryOptions& options) {
  const size_t num_values = graph.values.size();
  const int num_nodes = static_cast<int>(graph.nodes.size());
  GraphMemoryPlan result;

  std::vector<bool> user(num_values, false);
  for (ValueId id : graph.inputs) user[static_cast<size_t>(id)] = true;
  for (ValueId id : graph.outputs) user[static_cast<size_t>(id)] = true;
  for (size_t id = 0; id < num_values; ++id) {
    if (!user[id]) continue;
    KILN_ASSIGN(bytes, concrete_bytes(graph.values[id]));
    if (bytes > 0) result.io_bytes += bytes;
  }
  for (const auto& [id, tensor] : graph.initializers) result.weights_bytes += static_cast<int64_t>(tensor.nbytes());

  // Arena values: node outputs that are neither user buffers, initializers nor compile-time constants.
  std::vector<int> produced_at(num_values, -1), last_read(num_values, -1);
  std::vector<bool> in_arena(num_values, false);
  for (int i = 0; i < num_nodes; ++i)
    for (ValueId out : graph.nodes[static_cast<size_t>(i)].outputs) {
      if (out == kNoValue) continue;
      const size_t v = static_cast<size_t>(out);
      produced_at[v] = i;
      in_arena[v] = !user[v] && !graph.is_initializer(out) &&
                    !(options.constant_values && options.constant_values->count(out));
    }
  for (int i = 0; i < num_nodes; ++i)
    for (ValueId in : graph.nodes[static_cast<size_t>(i)].inputs) {
      if (in == kNoValue) continue;
      const size_t v = static_cast<size_t>(in);
      KILN_REQUIRE(!in_arena[v] || produced_at[v] < i, invalid_graph, "node '",
                   graph.nodes[static_cast<size_t>(i)].name, "' reads '", graph.values[v].name,
                   "' before its producer runs: nodes are not in topological order");
      last_read[v] = std::max(last_read[v], i);
    }

  result.value_buffer.assign(num_values, -1);
  std::vector<BufferRequest> buffers;
  for (int i = 0; i < num_nodes; ++i) {
    const Node& node = graph.nodes[static_cast<size_t>(i)];
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const ValueId out = node.outputs[k];
      if (out == kNoValue || !in_arena[static_cast<size_t>(out)]) continue;
      const Value& value = graph.value(out);
      KILN_ASSIGN(bytes, concrete_bytes(value));
      KILN_REQUIRE(bytes >= 0, invalid_argument, "value '", value.name, "' (output of node '", node.name,
                   "') has no concrete shape; bind the symbolic dims before planning memory");
      result.intermediate_bytes += bytes;
      const int last = std::max(i, last_read[static_cast<size_t>(out)]);

      if (options.in_place && k == 0 && op_can_run_in_place(node.op) && !node.inputs.empty()) {
        const ValueId in = node.inputs[0];
        const bool sole_read = in != kNoValue && std::count(node.inputs.begin(), node.inputs.end(), in) == 1;
        const int b = sole_read ? result.value_buffer[static_cast<size_t>(in)] : -1;
        if (b >= 0 && last_read[static_cast<size_t>(in)] == i && buffers[static_cast<size_t>(b)].bytes == bytes) {
          buffers[static_cast<size_t>(b)].last_step = last;
          result.value_buffer[static_cast<size_t>(out)] = b;
          ++result.in_place_values;
          continue;
        }
      }
      result.value_buffer[static_cast<size_t>(out)] = static_cast<int>(buffers.size());
      buffers.push_back(BufferRequest{bytes, i, last});
    }
  }

  KILN_ASSIGN(memory, plan_buffers(buffers, options.alignment, options.strategy));
  result.memory = std::move(memory);
  result.buffers = std::move(buffers);
  return result;
}

}  // namespace kiln
