// libFuzzer target: untrusted bytes through everything `kiln inspect` and `kiln run` do with a
// model: ONNX import (with onnx::checker), shape inference with symbolic batch dims bound to 1,
// per-layer statistics, lowering to a Plan and, for models whose every value is small and
// statically known, the reference executor on all-zero inputs.
//
// Execution is capped so that no fuzzed model can make one input run for seconds: it is skipped
// when the graph has more than kMaxNodes nodes, when an input has more than kMaxInputElements
// elements, when any value's shape is not known after inference or has more than
// kMaxValueElements elements, or when a rough work estimate exceeds kMaxWork.
//
// External data resolves against a scratch folder holding one 4 KiB file, `weights.bin`.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <string>
#include <system_error>
#include <unistd.h>
#include <vector>

#include "compilers/analysis/model_stats.h"
#include "compilers/ir/shape_inference.h"
#include "compilers/lower/to_plan.h"
#include "compilers/onnx/import.h"
#include "kernels/executor.h"

namespace {

using namespace kiln;

constexpr size_t kMaxNodes = 200;
constexpr int64_t kMaxInputElements = 100'000;
constexpr int64_t kMaxValueElements = 1'000'000;
constexpr int64_t kMaxWork = 1'000'000;  // ~ multiply-adds plus elements touched: ~0.1 s instrumented

std::string g_external_dir;

void remove_external_dir() {
  std::error_code ec;
  if (!g_external_dir.empty()) std::filesystem::remove_all(g_external_dir, ec);
}

// Element count of a concrete shape, or -1 when a dim is unknown or the count exceeds `limit`.
int64_t bounded_numel(const ValueType& t, int64_t limit) {
  if (!t.rank_known) return -1;
  int64_t n = 1;
  // Every dim must be known before a 0 makes the count 0: [0, ?] is not a concrete shape.
  for (const Dim& d : t.shape)
    if (!d.known()) return -1;
  for (const Dim& d : t.shape)
    if (d.value == 0) return 0;
  for (const Dim& d : t.shape) {
    if (d.value > limit || n > limit / d.value) return -1;
    n *= d.value;
  }
  return n;
}

int64_t attr_product(const Attrs& attrs, const char* name) {
  auto v = attrs.get_ints(name);
  if (!v) return 1;
  int64_t p = 1;
  for (int64_t x : *v) {
    if (x <= 0) return 1;  // invalid; the op rejects it
    if (x > kMaxWork || p > kMaxWork / x) return kMaxWork + 1;
    p *= x;
  }
  return p;
}

// Rough cost of running `node` once every value is known and small (<= kMaxValueElements, so
// products of two element counts fit in int64).
int64_t node_work(const Graph& g, const Node& node) {
  auto numel = [&](ValueId id) { return id == kNoValue ? int64_t{0} : bounded_numel(g.value(id).type, kMaxValueElements); };
  auto dim = [&](ValueId id, size_t d) -> int64_t {
    if (id == kNoValue) return 1;
    const ValueType& t = g.value(id).type;
    return d < t.shape.size() ? t.shape[d].value : 1;
  };
  int64_t work = 0;
  for (ValueId in : node.inputs) work += numel(in);
  int64_t out = 0;
  for (ValueId o : node.outputs) out += numel(o);
  work += out;
  const ValueId w = node.inputs.size() > 1 ? node.inputs[1] : kNoValue;
  switch (node.op) {
    case OpKind::Conv:
      if (w != kNoValue && dim(w, 0) > 0) work += out * (numel(w) / dim(w, 0));
      break;
    case OpKind::ConvTranspose:
      if (w != kNoValue && dim(w, 0) > 0) work += numel(node.inputs[0]) * (numel(w) / dim(w, 0));
      break;
    case OpKind::MatMul:
    case OpKind::Gemm: {
      const ValueType& a = g.value(node.inputs[0]).type;
      int64_t k = 1;
      for (const Dim& d : a.shape) k = std::max(k, d.value);  // an upper bound on K
      work += out * k;
      break;
    }
    case OpKind::MaxPool:
    case OpKind::AveragePool:
      work += out * std::min(attr_product(node.attrs, "kernel_shape"), kMaxWork + 1);
      break;
    case OpKind::LRN: {
      auto size = node.attrs.get_int("size", 1);
      work += out * (size && *size > 0 ? std::min<int64_t>(*size, kMaxWork + 1) : 1);
      break;
    }
    case OpKind::Resize:
      work += out * 64;  // up to 4 taps per dim (cubic) over the spatial dims
      break;
    default:
      break;
  }
  return work;
}

// Whether running the plan is cheap enough; fills `inputs` with zeros of the declared types.
bool small_enough_to_run(const Graph& graph, std::vector<Tensor>& inputs) {
  if (graph.nodes.size() > kMaxNodes) return false;
  for (ValueId id : graph.inputs) {
    const ValueType& t = graph.value(id).type;
    const int64_t n = bounded_numel(t, kMaxInputElements);
    if (n < 0) return false;
    inputs.push_back(Tensor::zeros(t.dtype, sym_shape_concrete(t.shape)));
  }
  for (const Node& node : graph.nodes)
    for (ValueId out : node.outputs)
      if (out != kNoValue && bounded_numel(graph.value(out).type, kMaxValueElements) < 0) return false;
  int64_t work = 0;
  for (const Node& node : graph.nodes) {
    work += node_work(graph, node);
    if (work > kMaxWork) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* tmp = std::getenv("TMPDIR");
  std::filesystem::path dir = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") /
                              ("kiln-fuzz-onnx-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::vector<unsigned char> weights(4096);
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<unsigned char>(i * 37 + 11);
  if (std::FILE* f = std::fopen((dir / "weights.bin").c_str(), "wb")) {
    std::fwrite(weights.data(), 1, weights.size(), f);
    std::fclose(f);
  }
  g_external_dir = dir.string();
  std::atexit(remove_external_dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  OnnxImportOptions import_options;
  import_options.external_data_dir = g_external_dir;
  auto graph = onnx_import_bytes(std::span<const uint8_t>(data, size), import_options);
  if (!graph) return 0;

  // As `kiln inspect` and `kiln run` do by default: each input's symbolic first dim is 1.
  ShapeInferenceOptions infer_options;
  for (ValueId id : graph->inputs) {
    const ValueType& t = graph->value(id).type;
    if (t.rank_known && !t.shape.empty() && !t.shape[0].known() && !t.shape[0].symbol.empty())
      infer_options.bindings[t.shape[0].symbol] = 1;
  }
  auto inferred = graph_infer_shapes(*graph, infer_options);
  if (!inferred) return 0;
  const ModelStats stats = model_stats(*graph);
  (void)stats;
  const Plan plan = graph_to_plan(*graph);

  std::vector<Tensor> inputs;
  if (!small_enough_to_run(*graph, inputs)) return 0;
  ExecuteOptions exec_options;
  exec_options.max_value_bytes = kMaxValueElements * 8;
  auto result = execute_reference(plan, inputs, exec_options);
  (void)result;
  return 0;
}
