#include "compilers/passes/prune_magnitude.h"

#include <algorithm>
#include <chrono>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/pixel_order.h"
#include "kernels/engine.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

// The weight input of an eligible node, or kNoValue.
ValueId prunable_weight(const Graph& g, const Node& n) {
  if (n.op != OpKind::Conv && n.op != OpKind::Gemm && n.op != OpKind::MatMul) return kNoValue;
  if (n.inputs.size() < 2 || n.inputs[1] == kNoValue || !g.is_initializer(n.inputs[1])) return kNoValue;
  const Tensor& w = g.initializers.at(n.inputs[1]);
  if (w.dtype() != DType::f32 || w.numel() < kPruneMinWeights) return kNoValue;
  if (n.op == OpKind::Conv) {
    auto group = n.attrs.get_int("group", 1);
    if (!group || *group != 1) return kNoValue;
  } else if (w.shape().size() != 2) {
    return kNoValue;
  }
  return n.inputs[1];
}

// Zeroes exactly `target` of the weights whose magnitudes are smallest (those already zero come
// first): all below the threshold, then ties at it in order. Returns how many changed value.
int64_t zero_smallest(std::vector<float*>& weights, int64_t target) {
  if (target <= 0) return 0;
  std::vector<float> mags(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) mags[i] = std::fabs(*weights[i]);
  std::nth_element(mags.begin(), mags.begin() + (target - 1), mags.end());
  const float threshold = mags[static_cast<size_t>(target - 1)];
  int64_t below = 0;
  for (float* w : weights) below += std::fabs(*w) < threshold ? 1 : 0;
  int64_t ties = target - below, changed = 0;
  assert(ties >= 1);
  for (float* w : weights) {
    const float m = std::fabs(*w);
    if (m > threshold || (m == threshold && ties-- <= 0)) continue;
    changed += *w != 0.0f ? 1 : 0;
    *w = 0.0f;
  }
  return changed;
}

int64_t count_zeros(const Tensor& t) {
  int64_t z = 0;
  for (int64_t i = 0; i < t.numel(); ++i) z += t.data<float>()[i] == 0.0f ? 1 : 0;
  return z;
}

Shape bound_shape(const ValueType& t, const DimBindings& bindings) {
  Shape s;
  for (const Dim& d : t.shape) {
    if (d.known()) s.push_back(d.value);
    else if (auto it = bindings.find(d.symbol); it != bindings.end()) s.push_back(it->second);
    else s.push_back(1);  // an unbound dim (batch) is timed at 1
  }
  return s;
}

// The KernelBuild the engine would make for `n` (without the mark): shapes from the graph, the
// weights as constants, a Conv's computed input in oneDNN's NHWC layout.
Result<KernelBuild> node_build(const Graph& g, const Node& n, const DimBindings& bindings, int threads) {
  KernelBuild b;
  b.op = n.op;
  b.attrs = &n.attrs;
  b.node_name = n.name;
  b.threads = threads;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    ValueDesc d;
    const ValueId id = n.inputs[i];
    if (id == kNoValue) {
      d.present = false;
    } else {
      const ValueType& t = g.value(id).type;
      KILN_REQUIRE(t.rank_known, invalid_argument, "prune_magnitude: input ", i, " of node '", n.name,
                   "' has no inferred shape (run shape inference first)");
      d.dtype = t.dtype;
      d.shape = bound_shape(t, bindings);
      if (g.is_initializer(id)) d.constant = &g.initializers.at(id);
      else if (n.op == OpKind::Conv && i == 0 && g.value(id).producer >= 0 && d.shape.size() == 4 && d.dtype == DType::f32)
        d.layout = cpu::nhwc_layout(d.shape, threads);
    }
    b.inputs.push_back(std::move(d));
  }
  for (ValueId id : n.outputs) {
    ValueDesc d;
    if (id == kNoValue) {
      d.present = false;
    } else {
      const ValueType& t = g.value(id).type;
      KILN_REQUIRE(t.rank_known, invalid_argument, "prune_magnitude: node '", n.name, "' has no inferred output shape");
      d.dtype = t.dtype;
      d.shape = bound_shape(t, bindings);
    }
    b.outputs.push_back(std::move(d));
  }
  return b;
}

// Why no sparse kernel takes `b` (nullopt when one does).
std::optional<std::string> sparse_refusal(const KernelBuild& b) {
  std::string why;
  for (const KernelImpl* impl : kernel_registry()) {
    if (!impl->name.starts_with("cpu.sparse_gemm")) continue;
    auto no = impl->supports(b);
    if (!no) return std::nullopt;
    why += (why.empty() ? "" : "; ") + std::string(impl->name) + ": " + *no;
  }
  return why.empty() ? std::optional<std::string>("no sparse kernel is registered") : std::optional<std::string>(why);
}

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<void, AlignedFree>;

Buffer buffer(size_t bytes, std::mt19937& rng) {
  const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  Buffer b(std::aligned_alloc(64, rounded));
  auto* f = static_cast<float*>(b.get());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t i = 0; i < rounded / sizeof(float); ++i) f[i] = dist(rng);
  return b;
}

// A kernel kernel_select picks for a build, with inputs (random, constants as given), outputs and
// scratch to run it on.
struct Runnable {
  KernelChoice choice;
  std::vector<Buffer> owned;
  KernelArgs args;
};

Result<std::unique_ptr<Runnable>> runnable(const KernelBuild& b) {
  KILN_ASSIGN(choice, kernel_select(b));
  auto r = std::make_unique<Runnable>();
  r->choice = std::move(choice);
  std::mt19937 rng(7);
  for (const ValueDesc& v : b.inputs) {
    if (!v.present) r->args.inputs.push_back(nullptr);
    else if (v.constant) r->args.inputs.push_back(v.constant->raw());
    else r->args.inputs.push_back((r->owned.emplace_back(buffer(v.bytes(), rng))).get());
  }
  const std::vector<Layout> layouts = r->choice.kernel->output_layouts();
  for (size_t i = 0; i < b.outputs.size(); ++i) {
    ValueDesc v = b.outputs[i];
    if (!v.present) {
      r->args.outputs.push_back(nullptr);
      continue;
    }
    if (i < layouts.size()) v.layout = layouts[i];
    r->args.outputs.push_back((r->owned.emplace_back(buffer(v.bytes(), rng))).get());
  }
  if (const size_t bytes = r->choice.kernel->scratch_bytes(); bytes > 0)
    r->args.scratch = (r->owned.emplace_back(buffer(bytes, rng))).get();
  return r;
}

Result<double> run_ms(Runnable& r) {
  const auto t0 = std::chrono::steady_clock::now();
  KILN_TRY(r.choice.kernel->run(r.args));
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

Result<SparseTiming> sparse_timing_measure(const KernelBuild& dense, const KernelBuild& sparse) {
  KILN_ASSIGN(d, runnable(dense));
  KILN_ASSIGN(s, runnable(sparse));
  const std::string_view sparse_name = s->choice.impl->name;
  KILN_REQUIRE(sparse_name.starts_with("cpu.sparse_gemm"), internal, "node '", sparse.node_name,
               "': the marked node was given ", sparse_name, ", not the sparse kernel");
  // Alternating, so that both see the same load on shared cores; medians of the timed runs.
  constexpr int kWarm = 3, kRuns = 9;
  std::vector<double> dense_ms, sparse_ms;
  for (int r = 0; r < kWarm + kRuns; ++r) {
    KILN_ASSIGN(td, run_ms(*d));
    KILN_ASSIGN(ts, run_ms(*s));
    if (r < kWarm) continue;
    dense_ms.push_back(td);
    sparse_ms.push_back(ts);
  }
  return SparseTiming{std::string(d->choice.impl->name), std::string(sparse_name), median(dense_ms), median(sparse_ms)};
}

Result<bool> prune_magnitude_run(Graph& graph, const PassContext& ctx, const SparseTimer& timer) {
  const double sparsity = ctx.prune.sparsity;
  KILN_REQUIRE(sparsity >= 0.0 && sparsity <= 1.0, invalid_argument, "prune_magnitude: sparsity must be in [0, 1], got ",
               sparsity);
  // Each eligible weight once (a weight shared by nodes is pruned once, for all of them), cloned:
  // initializers may borrow the model file's bytes.
  std::vector<ValueId> weights;
  std::vector<size_t> pruned_nodes;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ValueId w = prunable_weight(graph, graph.nodes[i]);
    if (w == kNoValue) continue;
    pruned_nodes.push_back(i);
    if (std::find(weights.begin(), weights.end(), w) == weights.end()) weights.push_back(w);
  }
  std::unordered_map<ValueId, Tensor> pruned;
  for (ValueId w : weights) pruned[w] = graph.initializers.at(w).clone();

  int64_t changed = 0, total = 0;
  auto target_of = [&](int64_t count) { return static_cast<int64_t>(std::llround(sparsity * static_cast<double>(count))); };
  if (ctx.prune.per_layer) {
    for (ValueId w : weights) {
      Tensor& t = pruned[w];
      std::vector<float*> ptrs(static_cast<size_t>(t.numel()));
      for (int64_t i = 0; i < t.numel(); ++i) ptrs[static_cast<size_t>(i)] = t.data<float>() + i;
      changed += zero_smallest(ptrs, target_of(t.numel()));
      total += t.numel();
    }
  } else {
    std::vector<float*> ptrs;
    for (ValueId w : weights) {
      Tensor& t = pruned[w];
      for (int64_t i = 0; i < t.numel(); ++i) ptrs.push_back(t.data<float>() + i);
    }
    total = static_cast<int64_t>(ptrs.size());
    changed = zero_smallest(ptrs, target_of(total));
  }
  for (auto& [w, t] : pruned) graph.initializers[w] = t;

  int64_t zeros = 0;
  for (ValueId w : weights) zeros += count_zeros(graph.initializers.at(w));
  std::ostream* log = ctx.log;
  if (log)
    *log << "prune_magnitude (no fine-tuning): " << (ctx.prune.per_layer ? "per layer" : "global") << " target "
         << sparsity << ", " << zeros << " of " << total << " weights in " << weights.size() << " layers are zero ("
         << std::fixed << std::setprecision(1) << (total ? 100.0 * static_cast<double>(zeros) / static_cast<double>(total) : 0.0)
         << "%), " << changed << " set to zero; the accuracy cost must be measured (kiln verify with labels)\n"
         << std::defaultfloat;

  bool marks_changed = false;
  const int threads = cpu_quota_threads();
  for (size_t i : pruned_nodes) {
    Node& n = graph.nodes[i];
    const Tensor& w = graph.initializers.at(n.inputs[1]);
    const bool was_marked = n.attrs.has(std::string(kSparseKernelAttr));
    n.attrs.erase(std::string(kSparseKernelAttr));
    std::string decision;
    bool mark = false;
    Attrs marked = n.attrs;
    marked.set(std::string(kSparseKernelAttr), std::string("csr"));
    KILN_ASSIGN(dense, node_build(graph, n, ctx.bindings, threads));
    KernelBuild sparse = dense;
    sparse.attrs = &marked;
    if (auto why = sparse_refusal(sparse)) {
      decision = "dense (" + *why + ")";
    } else if (auto timing = timer(dense, sparse); !timing) {
      decision = "dense (timing failed: " + timing.error().message + ")";
    } else {
      mark = sparse_kernel_pays(*timing);
      std::ostringstream s;
      s << std::fixed << std::setprecision(4) << timing->dense_kernel << ' ' << timing->dense_ms << " ms, "
        << timing->sparse_kernel << ' ' << timing->sparse_ms << " ms -> " << (mark ? "csr" : "dense");
      decision = s.str();
    }
    if (mark) n.attrs = marked;
    marks_changed |= mark != was_marked;
    if (log)
      *log << "prune_magnitude (no fine-tuning): " << n.name << " " << op_name(n.op) << " " << shape_to_string(w.shape())
           << " sparsity " << std::fixed << std::setprecision(3)
           << static_cast<double>(count_zeros(w)) / static_cast<double>(w.numel()) << std::defaultfloat << ": " << decision
           << '\n';
  }
  return changed > 0 || marks_changed;
}

Result<bool> pass_prune_magnitude(Graph& graph, const PassContext& ctx) {
  return prune_magnitude_run(graph, ctx, sparse_timing_measure);
}

}  // namespace kiln
