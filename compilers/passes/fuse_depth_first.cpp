#include "compilers/passes/fuse_depth_first.h"

#include <algorithm>
#include <optional>

#include "compilers/ir/rewrite.h"
#include "kernels/post_ops.h"

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

// A float32 4-D Conv with a constant [M, C, kh, kw] weight.
const Tensor* conv_weight(const Graph& g, const Node& n) {
  if (n.op != OpKind::Conv || n.inputs.size() < 2 || n.outputs.size() != 1) return nullptr;
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

struct Match {
  int dw = -1;     // depthwise Conv node
  int scale = -1;  // Mul node
  ValueId x = kNoValue, s = kNoValue;
};

}  // namespace

Result<bool> pass_fuse_depth_first(Graph& graph, const PassContext&) {
  const auto consumers = graph_consumers(graph);
  auto sole_reader = [&](ValueId v, int node) {
    return v != kNoValue && consumers[static_cast<size_t>(v)].size() == 1 &&
           consumers[static_cast<size_t>(v)][0] == node && !graph_is_output(graph, v);
  };
  std::vector<bool> remove(graph.nodes.size(), false);
  bool changed = false;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& pw = graph.nodes[i];
    if (!is_pointwise(graph, pw)) continue;
    Match m;
    m.x = pw.inputs[0];
    if (!sole_reader(m.x, static_cast<int>(i))) continue;
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

    Node fused{pw.name, OpKind::DepthFirstConv, {}, {}, pw.outputs};
    std::vector<ValueId> in(7, kNoValue);
    in[0] = m.x;
    if (m.dw >= 0) {
      const Node& dw = graph.nodes[static_cast<size_t>(m.dw)];
      in[0] = dw.inputs[0];
      in[1] = dw.inputs[1];
      in[2] = dw.inputs.size() > 2 ? dw.inputs[2] : kNoValue;
      auto strides = dw.attrs.get_ints("strides", {1, 1});
      auto pads = dw.attrs.get_ints("pads", {0, 0, 0, 0});
      auto act = post_ops_from_attrs(dw.attrs);
      if (!strides || !pads || !act) continue;
      fused.attrs.set("dw_strides", *strides);
      fused.attrs.set("dw_pads", *pads);
      post_ops_to_attrs(*act, fused.attrs, "dw_");
    }
    in[3] = m.s;
    in[4] = pw.inputs[1];
    in[5] = pw.inputs.size() > 2 ? pw.inputs[2] : kNoValue;
    in[6] = pw.inputs.size() > 3 ? pw.inputs[3] : kNoValue;
    auto act = post_ops_from_attrs(pw.attrs);
    if (!act) continue;
    post_ops_to_attrs(*act, fused.attrs);
    while (in.size() > 5 && in.back() == kNoValue) in.pop_back();
    fused.inputs = std::move(in);
    for (int n : {m.dw, m.scale})
      if (n >= 0) {
        remove[static_cast<size_t>(n)] = true;
        for (ValueId o : graph.nodes[static_cast<size_t>(n)].outputs) graph.value(o).producer = -1;
      }
    graph.nodes[i] = std::move(fused);
    changed = true;
  }
  if (changed) graph_remove_nodes(graph, remove);
  return changed;
}

}  // namespace kiln
