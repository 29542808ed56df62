// fuse_channel_shuffle: ShuffleNet's Concat -> Reshape -> Transpose -> Reshape (-> Slices or Split) as one
// ChannelShuffle. The pass runs with check_numerics (tests/support/pass_test_helpers.h), so the fused
// graph -- the reference ChannelShuffle -- is also checked against the unfused one on the reference executor.
#include <catch2/catch.hpp>

#include "tests/support/pass_test_helpers.h"
#include "tests/support/shuffle_graph.h"

using namespace kiln;
using namespace kiln::testing::passes;
using kiln::testing::int_values;

namespace {

// torchvision's channel_shuffle of Concat(parts) on [n, c, h, w]: view(n, g, c/g, h, w), transpose(1, 2),
// view(n, c, h, w). `perm` other than (0, 2, 1, 3, 4) is not a shuffle.
ValueId shuffle(Builder& b, const std::string& name, const std::vector<ValueId>& parts, Shape s, int64_t groups,
                std::vector<int64_t> perm = {0, 2, 1, 3, 4}) {
  Attrs axis1;
  axis1.set("axis", int64_t{1});
  const ValueId joined = b.node(OpKind::Concat, name + "_cat", parts, axis1);
  const ValueId grouped =
      b.node(OpKind::Reshape, name + "_grouped", {joined, int_values(b, name + "_gs", {s[0], groups, s[1] / groups, s[2], s[3]})});
  Attrs p;
  p.set("perm", perm);
  const ValueId swapped = b.node(OpKind::Transpose, name + "_swapped", {grouped}, p);
  return b.node(OpKind::Reshape, name, {swapped, int_values(b, name + "_s", s)});
}

ValueId channels(Builder& b, const std::string& name, ValueId x, int64_t begin, int64_t end) {
  return b.node(OpKind::Slice, name, {x, int_values(b, name + "_b", {begin}), int_values(b, name + "_e", {end}), int_values(b, name + "_a", {1})});
}

int count(const Graph& g, OpKind op) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op == op ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("fuse_channel_shuffle makes ShuffleNet's concat, shuffle and halves one ChannelShuffle", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {2, 4, 6, 6});
  // Stage start: both branches read x; then a unit: the first half passes, the second is convolved.
  const ValueId s1 = shuffle(b, "s1", {b.conv("left", x, 4, 6), b.conv("right", x, 4, 6)}, {2, 12, 6, 6}, 2);
  const ValueId first = channels(b, "first", s1, 0, 6);
  const ValueId second = channels(b, "second", s1, 6, 12);  // as torch's chunk: [6, 12)
  const ValueId s2 = shuffle(b, "s2", {first, b.conv("branch", second, 6, 6)}, {2, 12, 6, 6}, 2);
  b.output(b.conv("conv5", s2, 12, 3));
  auto records = run(b.g, {"fuse_channel_shuffle"});
  INFO((records ? std::string() : records.error().message));
  REQUIRE(records);
  REQUIRE(records->back().changed);
  CHECK(records->back().max_rel_error == 0);  // a copy
  REQUIRE(count(b.g, OpKind::ChannelShuffle) == 2);
  for (OpKind gone : {OpKind::Concat, OpKind::Reshape, OpKind::Transpose, OpKind::Slice}) CHECK(count(b.g, gone) == 0);
  const Node& halves = node_writing(b.g, "first");
  REQUIRE(halves.op == OpKind::ChannelShuffle);
  CHECK(halves.outputs == std::vector<ValueId>{b.g.find_value("first"), b.g.find_value("second")});
  CHECK(halves.attrs.get_int("groups", 0).value() == 2);
  CHECK(halves.attrs.get_ints("splits").value() == std::vector<int64_t>{6, 6});
  const Node& whole = node_writing(b.g, "s2");  // read by a conv: one output, no splits
  REQUIRE(whole.op == OpKind::ChannelShuffle);
  CHECK(whole.inputs == std::vector<ValueId>{b.g.find_value("first"), b.g.find_value("branch")});
  CHECK_FALSE(whole.attrs.has("splits"));
}

TEST_CASE("fuse_channel_shuffle takes a Split on channels and more groups than inputs", "[passes]") {
  Builder b;
  const ValueId x = b.input("x", {1, 3, 4, 4});
  const ValueId s = shuffle(b, "s", {b.conv("a", x, 3, 5), b.conv("c", x, 3, 7)}, {1, 12, 4, 4}, 4);
  Attrs split;
  split.set("axis", int64_t{1});
  const ValueId low = b.g.add_value("low", ValueType::unranked(DType::f32));
  const ValueId high = b.g.add_value("high", ValueType::unranked(DType::f32));
  b.g.add_node(Node{"split", OpKind::Split, split, {s, int_values(b, "split_sizes", {4, 8})}, {low, high}});
  b.output(b.conv("y_low", low, 4, 2));
  b.output(b.conv("y_high", high, 8, 2));
  auto records = run(b.g, {"fuse_channel_shuffle"});
  INFO((records ? std::string() : records.error().message));
  REQUIRE(records);
  CHECK(records->back().max_rel_error == 0);
  REQUIRE(count(b.g, OpKind::ChannelShuffle) == 1);
  CHECK(count(b.g, OpKind::Split) == 0);
  const Node& fused = node_writing(b.g, "low");
  CHECK(fused.attrs.get_int("groups", 0).value() == 4);
  CHECK(fused.attrs.get_ints("splits").value() == std::vector<int64_t>{4, 8});
}

TEST_CASE("fuse_channel_shuffle keeps Slices that overlap and leaves what is not a shuffle", "[passes]") {
  SECTION("overlapping Slices stay, reading the fused shuffle") {
    Builder b;
    const ValueId x = b.input("x", {1, 4, 3, 3});
    const ValueId s = shuffle(b, "s", {b.conv("a", x, 4, 4), b.conv("c", x, 4, 4)}, {1, 8, 3, 3}, 2);
    b.output(channels(b, "p", s, 0, 6));
    b.output(channels(b, "q", s, 2, 8));
    auto records = run(b.g, {"fuse_channel_shuffle"});
    REQUIRE(records);
    REQUIRE(records->back().changed);
    CHECK(count(b.g, OpKind::ChannelShuffle) == 1);
    CHECK(count(b.g, OpKind::Slice) == 2);
    CHECK(node_writing(b.g, "s").op == OpKind::ChannelShuffle);
  }
  SECTION("another permutation, a joined tensor read twice, a shuffle intermediate that is an output") {
    Builder b;
    const ValueId x = b.input("x", {1, 4, 3, 3});
    const ValueId a = b.conv("a", x, 4, 4), c = b.conv("c", x, 4, 4);
    b.output(shuffle(b, "not_a_shuffle", {a, c}, {1, 8, 3, 3}, 2, {0, 1, 2, 4, 3}));
    b.output(shuffle(b, "joined_read_twice", {a, c}, {1, 8, 3, 3}, 2));
    b.output(b.g.find_value("joined_read_twice_cat"));
    b.output(shuffle(b, "grouped_is_output", {c, a}, {1, 8, 3, 3}, 4));
    b.output(b.g.find_value("grouped_is_output_grouped"));
    auto records = run(b.g, {"fuse_channel_shuffle"});
    REQUIRE(records);
    REQUIRE_FALSE(records->back().changed);
  }
}
