// A ShuffleNet stage as ONNX writes it (Concat -> Reshape -> Transpose -> Reshape -> Slices), for the
// tests of quantize_int8's shuffle classes (quantize_layouts_test.cpp) and their ONNX export
// (onnx_export_test.cpp).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "tests/support/graph_builder.h"

namespace kiln::testing {

inline ValueId int_values(GraphBuilder& b, const std::string& name, std::vector<int64_t> v) {
  const ValueId id = b.g.add_value(name, ValueType::of(DType::i64, sym_shape_from({static_cast<int64_t>(v.size())})));
  Tensor t = Tensor::zeros(DType::i64, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  b.g.initializers[id] = std::move(t);
  return id;
}

// torchvision's channel_shuffle(Concat(parts), 2) of [2, 8, 8, 8] as ONNX writes it.
inline ValueId shuffled(GraphBuilder& b, const std::string& name, std::vector<ValueId> parts) {
  Attrs axis;
  axis.set("axis", int64_t{1});
  const ValueId joined = b.node(OpKind::Concat, name + "_cat", std::move(parts), axis);
  const ValueId grouped = b.node(OpKind::Reshape, name + "_g", {joined, int_values(b, name + "_gs", {2, 2, 4, 8, 8})});
  Attrs perm;
  perm.set("perm", std::vector<int64_t>{0, 2, 1, 3, 4});
  const ValueId swapped = b.node(OpKind::Transpose, name + "_t", {grouped}, perm);
  return b.node(OpKind::Reshape, name, {swapped, int_values(b, name + "_s", {2, 8, 8, 8})});
}

// A ShuffleNet stage: x -> Conv a, Conv b (relu; b's weights 3x larger) -> shuffle -> halves h1, h2;
// Conv c (relu) on h2; shuffle(h1, c) -> Conv d -> y. One class of values joined by shuffles:
// a, b, h1, h2, c and the second shuffle's output.
inline Graph shuffle_stage_graph() {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 3, 8, 8});
  Attrs relu;
  relu.set("activation", std::string("relu"));
  const ValueId a = b.node(OpKind::Conv, "a", {x, b.weight("wa", {4, 3, 1, 1}), b.weight("ba", {4})}, relu);
  const ValueId f = b.node(OpKind::Conv, "b", {x, b.weight("wb", {4, 3, 1, 1}, -3.0f, 3.0f), b.weight("bb", {4})}, relu);
  const ValueId s1 = shuffled(b, "s1", {a, f});
  std::vector<ValueId> halves;
  for (int64_t begin : {0, 4})
    halves.push_back(b.node(OpKind::Slice, "h" + std::to_string(begin),
                            {s1, int_values(b, "hb" + std::to_string(begin), {begin}),
                             int_values(b, "he" + std::to_string(begin), {begin + 4}), int_values(b, "ha" + std::to_string(begin), {1})}));
  const ValueId c = b.node(OpKind::Conv, "c", {halves[1], b.weight("wc", {4, 4, 1, 1}), b.weight("bc", {4})}, relu);
  b.output(b.node(OpKind::Conv, "d", {shuffled(b, "s2", {halves[0], c}), b.weight("wd", {5, 8, 1, 1})}));
  return b.g;
}

}  // namespace kiln::testing
