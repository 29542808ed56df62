// Normalizations rebuilt or fused: fuse_layer_norm (a decomposed LayerNorm back into one
// LayerNormalization) and fuse_concat_affine (DenseNet's Concat -> BatchNormalization (-> Relu) as one
// ConcatAffine). Each pass runs with check_numerics (tests/support/pass_test_helpers.h), so the fused graph
// is also checked against the unfused one on the reference executor.
#include <catch2/catch.hpp>

#include <algorithm>

#include "tests/support/pass_test_helpers.h"

using namespace kiln;
using namespace kiln::testing::passes;

namespace {

// A constant 1-D axes input of one axis (the importer's form of ReduceMean's axes).
ValueId axes_value(Builder& b, const std::string& name, int64_t axis) {
  const ValueId id = b.g.add_value(name, ValueType::of(DType::i64, sym_shape_from({1})));
  Tensor t = Tensor::zeros(DType::i64, {1});
  t.data<int64_t>()[0] = axis;
  b.g.initializers[id] = std::move(t);
  return id;
}

// The LayerNorm of x over its last axis as exporters before opset 17 write it; `square_by_mul`
// writes Mul(d, d) instead of Pow(d, 2); gamma/beta of the last axis' size when `affine`.
ValueId decomposed_layer_norm(Builder& b, const std::string& n, ValueId x, int64_t c, bool affine, bool square_by_mul) {
  const ValueId last = axes_value(b, n + "_axes", -1);
  const ValueId mean = b.node(OpKind::ReduceMean, n + "_mean", {x, last});
  const ValueId d = b.node(OpKind::Sub, n + "_d", {x, mean});
  const ValueId sq = square_by_mul ? b.node(OpKind::Mul, n + "_sq", {d, d})
                                   : b.node(OpKind::Pow, n + "_sq", {d, b.scalar(n + "_two", 2.0f)});
  const ValueId var = b.node(OpKind::ReduceMean, n + "_var", {sq, last});
  const ValueId std_dev = b.node(OpKind::Sqrt, n + "_std", {b.node(OpKind::Add, n + "_ve", {var, b.scalar(n + "_eps", 1e-6f)})});
  ValueId y = b.node(OpKind::Div, n + "_y", {d, std_dev});
  if (affine) {
    y = b.node(OpKind::Mul, n + "_g", {y, b.weight(n + "_gamma", {c})});
    y = b.node(OpKind::Add, n + "_b", {b.weight(n + "_beta", {c}), y});
  }
  return y;
}

}  // namespace

TEST_CASE("fuse_layer_norm rebuilds LayerNormalization from its decomposition", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {2, 7, 5, 24});
  b.output(decomposed_layer_norm(b, "ln1", x, 24, true, false));
  b.output(decomposed_layer_norm(b, "ln2", b.node(OpKind::Relu, "r", {x}), 24, false, true));
  auto records = run(b.g, {"fold_constants", "fuse_layer_norm"});
  INFO((records ? std::string() : records.error().message));
  REQUIRE(records);
  for (const PassRecord& rec : *records) CHECK(rec.max_rel_error < 1e-5);
  REQUIRE(ops(b.g) == std::vector<OpKind>{OpKind::LayerNormalization, OpKind::Relu, OpKind::LayerNormalization});
  REQUIRE(b.g.nodes[0].inputs.size() == 3);  // X, gamma, beta
  REQUIRE(b.g.nodes[2].inputs.size() == 2);  // X, ones
  REQUIRE(*b.g.nodes[0].attrs.get_float("epsilon", 0.0f) == 1e-6f);
}

TEST_CASE("fuse_layer_norm leaves other axes, shared intermediates and non-constant gamma", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {2, 7, 5, 24});
  const ValueId other_axis = axes_value(b, "axis1", 1);
  const ValueId mean = b.node(OpKind::ReduceMean, "m", {x, other_axis});
  const ValueId d = b.node(OpKind::Sub, "d", {x, mean});
  const ValueId var = b.node(OpKind::ReduceMean, "v", {b.node(OpKind::Mul, "sq", {d, d}), other_axis});
  b.output(b.node(OpKind::Div, "y", {d, b.node(OpKind::Sqrt, "s", {b.node(OpKind::Add, "ve", {var, b.scalar("eps", 1e-5f)})})}));
  const ValueId shared = decomposed_layer_norm(b, "ln", x, 24, false, false);
  b.output(shared);
  b.output(b.g.find_value("ln_d"));  // the centred value is read outside the pattern
  auto records = run(b.g, {"fold_constants", "fuse_layer_norm"});
  REQUIRE(records);
  REQUIRE_FALSE(records->back().changed);
}

namespace {

// DenseNet's layer start: Concat(inputs) on axis 1 -> BatchNormalization (positive variance).
ValueId concat_norm(Builder& b, const std::string& name, const std::vector<ValueId>& inputs, int64_t c,
                    int64_t axis = 1) {
  Attrs a;
  a.set("axis", axis);
  const ValueId cat = b.node(OpKind::Concat, name + "_cat", inputs, a);
  const ValueId var = b.weight(name + "_v", {c});
  for (int64_t i = 0; i < c; ++i) b.g.initializers[var].data<float>()[i] += 1.5f;
  return b.node(OpKind::BatchNormalization, name,
                {cat, b.weight(name + "_s", {c}), b.weight(name + "_b", {c}), b.weight(name + "_m", {c}), var});
}

}  // namespace

TEST_CASE("fuse_concat_affine normalizes each Concat input into its slice, with the fused Relu", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {2, 3, 6, 6});
  const ValueId f1 = b.conv("f1", x, 3, 4);
  const ValueId f2 = b.conv("f2", f1, 4, 5);
  const ValueId n1 = b.node(OpKind::Relu, "r1", {concat_norm(b, "bn1", {x, f1}, 7)});
  const ValueId n2 = concat_norm(b, "bn2", {x, f1, f2}, 12);  // x and f1 are read by both concats
  b.output(b.conv("y1", n1, 7, 2));
  b.output(n2);
  auto records = run(b.g, {"fuse_activation", "fuse_concat_affine"});
  INFO((records ? std::string() : records.error().message));
  REQUIRE(records);
  for (const PassRecord& rec : *records) CHECK(rec.max_rel_error < 1e-5);
  REQUIRE(ops(b.g) ==
          std::vector<OpKind>{OpKind::Conv, OpKind::Conv, OpKind::ConcatAffine, OpKind::ConcatAffine, OpKind::Conv});
  const Node& fused = node_writing(b.g, "bn2");
  REQUIRE(fused.inputs.size() == 5);  // scale, shift, x, f1, f2
  REQUIRE(fused.inputs[2] == x);
  REQUIRE(post_ops_of(node_writing(b.g, "r1")).activation == Activation::relu);
  REQUIRE(post_ops_of(fused).activation == Activation::none);
}

TEST_CASE("fuse_concat_affine leaves other axes, a Concat read twice and a Concat that is an output", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {1, 4, 3, 3});
  const ValueId x2 = b.input("x2", {1, 4, 3, 3});
  b.output(concat_norm(b, "on_h", {x, x2}, 4, 2));  // joins rows, not channels
  const ValueId shared = concat_norm(b, "shared", {x, x2}, 8);
  b.output(shared);
  b.output(b.g.find_value("shared_cat"));  // the joined tensor itself is wanted
  auto records = run(b.g, {"fuse_concat_affine"});
  REQUIRE(records);
  REQUIRE_FALSE(records->back().changed);
}
