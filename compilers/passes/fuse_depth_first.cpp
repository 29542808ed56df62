#include "compilers/passes/fuse_depth_first.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "compilers/ir/rewrite.h"
#include "kernels/post_ops.h"
#include "kernels/precision.h"

namespace kiln {
namespace {

const SymShape* shape_of(const Graph& g, ValueId v) {
  if (v == kNoValue) return nullptr;
  const ValueType& t = g.value(v).type;
  return t.rank_known && t.dtype == DType::f32 ? &t.shape : nullptr;
}

bool ints_are(const Attrs& attrs, const char* name, std::vector<int64_t> fallback, int64_t want) {
  auto v = attrs.get_ints(name, fallback);
  return v && std::all_of(v->begin(), v->end(), [&](int64_t x) { return x == want; });
}

// Conv attributes the fused op can express: NOTSET auto_pad, no dilation.
bool plain_window(const Node& conv) {
  auto auto_pad = conv.attrs.get_string("auto_pad", "NOTSET");
  return auto_pad && *auto_pad == "NOTSET" && ints_are(conv.attrs, "dilations", {1, 1}, 1);
}

// A float32 4-D Conv with a constant [M, C, kh, kw] weight, computing in fp32 (the fused kernel's
// precision: a bf16 Conv stays with oneDNN, in its bf16 region).
const Tensor* conv_weight(const Graph& g, const Node& n) {
  if (n.op != OpKind::Conv || n.inputs.size() < 2 || n.outputs.size() != 1) return nullptr;
  if (auto p = precision_from_attrs(n.attrs); !p || *p != Precision::fp32) return nullptr;
  const SymShape* x = shape_of(g, n.inputs[0]);
  if (!x || x->size() != 4 || !plain_window(n)) return nullptr;
  auto it = g.initializers.find(n.inputs[1]);
  if (it == g.initializers.end() || it->second.dtype() != DType::f32 || it->second.rank() != 4) return nullptr;
  if (n.inputs.size() > 2 && n.inputs[2] != kNoValue && !g.initializers.count(n.inputs[2])) return nullptr;
  return &it->second;
}

int64_t group_of(const Node& n) {
  auto g = n.attrs.get_int("group", 1);
  return g ? *g : 0;
}

bool is_pointwise(const Graph& g, const Node& n) {
  const Tensor* w = conv_weight(g, n);
  return w && w->dim(2) == 1 && w->dim(3) == 1 && group_of(n) == 1 &&
         ints_are(n.attrs, "strides", {1, 1}, 1) && ints_are(n.attrs, "pads", {0, 0, 0, 0}, 0);
}

bool is_depthwise(const Graph& g, const Node& n) {
  const Tensor* w = conv_weight(g, n);
  if (!w || n.inputs.size() > 3) return false;  // no residual
  const SymShape* x = shape_of(g, n.inputs[0]);
  const int64_t c = (*x)[1].known() ? (*x)[1].value : -1;
  return c > 0 && w->dim(0) == c && w->dim(1) == 1 && group_of(n) == c;
}

// Where fusing pays, measured per step on MobileNetV2 and EfficientNet-B0 (2-core Xeon with
// AVX-512, batch 1 and 16, against oneDNN's separate convolutions):
//  - the GEMM beside the fused intermediate is memory-bound: at most 32 channels on its far side
//    (the projection's outputs, the expansion's inputs; 2 x that many FLOPs per element). With
//    more, oneDNN's 1x1 convolution beats the fused GEMM by more than the traffic saved
//    (EfficientNet's 40..320-channel projections lost 10-40%);
//  - the intermediate is large per image (>= 256 KB, past L1 and a good part of L2), and in all
//    (>= 8 MB over the batch) so that it would really go to memory: at batch 1 every
//    intermediate of these models stays in cache and the fused kernels lost 5-30%, at batch 16
//    the fused blocks 1-5 of MobileNetV2 took 0.6-0.8x the time of the separate ones;
//  - an expansion fused without a projection after it must be larger still (>= 1 MB per image):
//    MobileNetV2's 28x28 and 14x14 ones lost 15-25%.
constexpr int64_t kMaxStreamChannels = 32;
constexpr int64_t kMinIntermediateBytes = 256 * 1024;
constexpr int64_t kMinBatchIntermediateBytes = 8 * 1024 * 1024;
constexpr int64_t kMinLoneExpansionBytes = 1024 * 1024;

// The bytes of one image's part of a 4-D float value, and the batch; nullopt unless all known.
std::optional<std::pair<int64_t, int64_t>> image_bytes(const Graph& g, ValueId v) {
  const SymShape* s = shape_of(g, v);
  if (!s || s->size() != 4) return std::nullopt;
  for (const Dim& d : *s)
    if (!d.known()) return std::nullopt;
  return std::make_pair((*s)[1].value * (*s)[2].value * (*s)[3].value * 4, (*s)[0].value);
}

bool large_intermediate(const Graph& g, ValueId v, int64_t min_image_bytes) {
  const auto bytes = image_bytes(g, v);
  return bytes && bytes->first >= min_image_bytes && bytes->first * bytes->second >= kMinBatchIntermediateBytes;
}

// Fusing `intermediate` into the projection `pw` that reads it.
bool fusion_pays(const Graph& g, const Node& pw, ValueId intermediate) {
  const SymShape* y = shape_of(g, pw.outputs[0]);
  return y && y->size() == 4 && (*y)[1].known() && (*y)[1].value <= kMaxStreamChannels &&
         large_intermediate(g, intermediate, kMinIntermediateBytes);
}

// Fusing the expansion `e` (a pointwise Conv) into the depthwise stage that reads its result.
bool expansion_pays(const Graph& g, const Node& e, bool projected) {
  const SymShape* x = shape_of(g, e.inputs[0]);
  return x && x->size() == 4 && (*x)[1].known() && (*x)[1].value <= kMaxStreamChannels &&
         large_intermediate(g, e.outputs[0], projected ? kMinIntermediateBytes : kMinLoneExpansionBytes);
}

struct Match {
  int expand = -1;  // pointwise Conv node in front of the depthwise one
  int dw = -1;      // depthwise Conv node
  int scale = -1;   // Mul node
  ValueId x = kNoValue, s = kNoValue;
};

// Sets the fused node's expansion inputs (7 EW, 8 EB) and ex_ attributes from pointwise node `e`;
// false when its activation cannot be expressed.
bool take_expansion(const Node& e, Node& fused, std::vector<ValueId>& in) {
  auto act = post_ops_from_attrs(e.attrs);
  if (!act || (e.inputs.size() > 3 && e.inputs[3] != kNoValue)) return false;  // no residual
  in.resize(9, kNoValue);
  in[0] = e.inputs[0];
  in[7] = e.inputs[1];
  in[8] = e.inputs.size() > 2 ? e.inputs[2] : kNoValue;
  post_ops_to_attrs(*act, fused.attrs, "ex_");
  return true;
}

// Sets the depthwise stage's inputs (0 X, 1 DW, 2 DB) and dw_ attributes from node `dw`.
bool take_depthwise(const Node& dw, Node& fused, std::vector<ValueId>& in) {
  auto strides = dw.attrs.get_ints("strides", {1, 1});
  auto pads = dw.attrs.get_ints("pads", {0, 0, 0, 0});
  auto act = post_ops_from_attrs(dw.attrs);
  if (!strides || !pads || !act) return false;
  in[0] = dw.inputs[0];
  in[1] = dw.inputs[1];
  in[2] = dw.inputs.size() > 2 ? dw.inputs[2] : kNoValue;
  fused.attrs.set("dw_strides", *strides);
  fused.attrs.set("dw_pads", *pads);
  post_ops_to_attrs(*act, fused.attrs, "dw_");
  return true;
}

}  // namespace

Result<bool> pass_fuse_depth_first(Graph& graph, const PassContext& ctx) {
  // The thresholds above were measured against the kernel's AVX-512 path. Its AVX2 path lost
  // everywhere on an AVX2-only EPYC (2 vCPUs, batch 8, oneDNN's separate convolutions on the same
  // machine): MobileNetV2 124 vs 62 ms at 1 thread, EfficientNet-B0 220 vs 157 ms.
  if (ctx.cpu_isa < CpuIsa::avx512) return false;
  const auto consumers = graph_consumers(graph);
  auto sole_reader = [&](ValueId v, int node) {
    return v != kNoValue && consumers[static_cast<size_t>(v)].size() == 1 &&
           consumers[static_cast<size_t>(v)][0] == node && !graph_is_output(graph, v);
  };
  std::vector<bool> remove(graph.nodes.size(), false);
  // The pointwise Conv producing `v` for `reader` alone, when fusing it as an expansion pays.
  auto expansion_of = [&](ValueId v, int reader, bool projected) {
    const int e = sole_reader(v, reader) ? graph.value(v).producer : -1;
    if (e < 0 || remove[static_cast<size_t>(e)]) return -1;
    const Node& node = graph.nodes[static_cast<size_t>(e)];
    return is_pointwise(graph, node) && expansion_pays(graph, node, projected) ? e : -1;
  };
  auto retire = [&](int n) {
    remove[static_cast<size_t>(n)] = true;
    for (ValueId o : graph.nodes[static_cast<size_t>(n)].outputs) graph.value(o).producer = -1;
  };
  bool changed = false;
  // Chains ending in a pointwise projection: [expand ->] depthwise -> project, scale -> project.
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& pw = graph.nodes[i];
    if (!is_pointwise(graph, pw)) continue;
    Match m;
    m.x = pw.inputs[0];
    if (!sole_reader(m.x, static_cast<int>(i)) || !fusion_pays(graph, pw, m.x)) continue;
    int producer = graph.value(m.x).producer;
    if (producer >= 0 && graph.nodes[static_cast<size_t>(producer)].op == OpKind::Mul) {
      const Node& mul = graph.nodes[static_cast<size_t>(producer)];
      const SymShape* y = shape_of(graph, m.x);
      for (size_t k = 0; mul.inputs.size() == 2 && k < 2 && m.scale < 0; ++k) {
        const ValueId a = mul.inputs[k], s = mul.inputs[1 - k];
        const SymShape *as = shape_of(graph, a), *ss = shape_of(graph, s);
        if (!as || !ss || !y || *as != *y || ss->size() != 4 || a == s) continue;
        if ((*ss)[0] == (*as)[0] && (*ss)[1] == (*as)[1] && (*ss)[2] == Dim(1) && (*ss)[3] == Dim(1) &&
            (*as)[1].known()) {
          m.scale = producer;
          m.x = a;
          m.s = s;
        }
      }
      if (m.scale < 0) continue;
      producer = sole_reader(m.x, m.scale) ? graph.value(m.x).producer : -1;
    }
    if (producer >= 0 && is_depthwise(graph, graph.nodes[static_cast<size_t>(producer)]) &&
        (m.scale >= 0 || sole_reader(m.x, static_cast<int>(i))))
      m.dw = producer;
    if (m.dw < 0 && m.scale < 0) continue;
    if ((m.dw >= 0 && remove[static_cast<size_t>(m.dw)]) || (m.scale >= 0 && remove[static_cast<size_t>(m.scale)]))
      continue;
    if (m.dw >= 0) m.expand = expansion_of(graph.nodes[static_cast<size_t>(m.dw)].inputs[0], m.dw, true);

    Node fused{pw.name, OpKind::DepthFirstConv, {}, {}, pw.outputs};
    std::vector<ValueId> in(7, kNoValue);
    in[0] = m.x;
    if (m.dw >= 0 && !take_depthwise(graph.nodes[static_cast<size_t>(m.dw)], fused, in)) continue;
    if (m.expand >= 0 && !take_expansion(graph.nodes[static_cast<size_t>(m.expand)], fused, in)) m.expand = -1;
    in[3] = m.s;
    in[4] = pw.inputs[1];
    in[5] = pw.inputs.size() > 2 ? pw.inputs[2] : kNoValue;
    in[6] = pw.inputs.size() > 3 ? pw.inputs[3] : kNoValue;
    auto act = post_ops_from_attrs(pw.attrs);
    if (!act) continue;
    post_ops_to_attrs(*act, fused.attrs);
    while (in.size() > 5 && in.back() == kNoValue) in.pop_back();
    fused.inputs = std::move(in);
    for (int n : {m.expand, m.dw, m.scale})
      if (n >= 0) retire(n);
    graph.nodes[i] = std::move(fused);
    changed = true;
  }
  // Expansions whose depthwise result has other readers too (EfficientNet's squeeze-excite pools
  // it): expand -> depthwise, without a projection.
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& dw = graph.nodes[i];
    if (remove[i] || !is_depthwise(graph, dw)) continue;
    const int e = expansion_of(dw.inputs[0], static_cast<int>(i), false);
    if (e < 0) continue;
    Node fused{dw.name, OpKind::DepthFirstConv, {}, {}, dw.outputs};
    std::vector<ValueId> in(3, kNoValue);
    if (!take_depthwise(dw, fused, in) || !take_expansion(graph.nodes[static_cast<size_t>(e)], fused, in)) continue;
    fused.inputs = std::move(in);
    retire(e);
    graph.nodes[i] = std::move(fused);
    changed = true;
  }
  if (changed) graph_remove_nodes(graph, remove);
  return changed;
}

}  // namespace kiln
