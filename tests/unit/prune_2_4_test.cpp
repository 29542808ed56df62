// prune_2_4: every group of four along the reduction axis keeps its two largest magnitudes;
// layers it cannot pattern stay dense; weights already 2:4 are a fixed point.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "compilers/passes/pass_runner.h"
#include "compilers/passes/prune_2_4.h"
#include "tests/support/graph_builder.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// Checks the 2:4 pattern of `pruned` against `original` along (outputs, length, stride, step).
void check_pattern(const Tensor& original, const Tensor& pruned, int64_t outputs, int64_t length, int64_t stride,
                   int64_t step) {
  for (int64_t o = 0; o < outputs; ++o)
    for (int64_t k = 0; k < length; k += 4) {
      std::vector<float> before, after;
      for (int64_t i = 0; i < 4; ++i) {
        const int64_t at = o * stride + (k + i) * step;
        before.push_back(std::fabs(original.data<float>()[at]));
        after.push_back(pruned.data<float>()[at]);
      }
      CHECK(std::count(after.begin(), after.end(), 0.0f) >= 2);
      std::vector<float> sorted = before;
      std::sort(sorted.begin(), sorted.end());
      for (int i = 0; i < 4; ++i)  // the kept ones are the two largest, unchanged
        if (after[static_cast<size_t>(i)] != 0.0f) {
          CHECK(std::fabs(after[static_cast<size_t>(i)]) >= sorted[2]);
          CHECK(std::fabs(after[static_cast<size_t>(i)]) == before[static_cast<size_t>(i)]);
        }
    }
}

}  // namespace

TEST_CASE("prune_2_4 keeps the two largest of every four along the reduction axis", "[prune]") {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 8, 6, 6});
  const ValueId wc = b.weight("wc", {4, 8, 3, 3});  // K = 72
  const ValueId c = b.node(OpKind::Conv, "c", {x, wc});
  const ValueId odd = b.weight("odd", {4, 2, 1, 1});  // grouped: stays dense
  Attrs grouped;
  grouped.set("group", int64_t{2});
  const ValueId c2 = b.node(OpKind::Conv, "c2", {c, odd}, grouped);
  const ValueId pooled = b.node(OpKind::GlobalAveragePool, "p", {c2});
  const ValueId f = b.node(OpKind::Flatten, "f", {pooled});
  const ValueId w1 = b.weight("w1", {4, 12});  // transB = 0: K = 4 down the columns
  const ValueId g1 = b.node(OpKind::Gemm, "g1", {f, w1});
  const ValueId w2 = b.weight("w2", {8, 12});  // transB = 1: K = 12 along the rows
  Attrs trans;
  trans.set("transB", int64_t{1});
  b.output(b.node(OpKind::Gemm, "g2", {g1, w2}, trans));
  const Graph original = b.g;

  PassRunOptions options;
  std::ostringstream log;
  options.log = &log;
  REQUIRE(run_passes(b.g, {"prune_2_4"}, options));
  check_pattern(original.initializers.at(wc), b.g.initializers.at(wc), 4, 72, 72, 1);
  check_pattern(original.initializers.at(w1), b.g.initializers.at(w1), 12, 4, 1, 12);
  check_pattern(original.initializers.at(w2), b.g.initializers.at(w2), 8, 12, 12, 1);
  // The grouped conv is untouched and unmarked; the others carry the pattern for the GPU backend.
  const Tensor& o_before = original.initializers.at(odd);
  const Tensor& o_after = b.g.initializers.at(odd);
  CHECK(std::equal(o_before.data<float>(), o_before.data<float>() + o_before.numel(), o_after.data<float>()));
  for (const Node& n : b.g.nodes) {
    const bool patterned = n.name == "c_node" || n.name == "g1_node" || n.name == "g2_node";
    CHECK(n.attrs.has(std::string(kSparsityPatternAttr)) == patterned);
  }
  CHECK_THAT(log.str(), Catch::Contains("3 layers 2:4 sparse") && Catch::Contains("no fine-tuning"));

  // Weights already 2:4 are a fixed point: nothing changes a second time.
  Graph again = b.g;
  auto r = run_passes(again, {"prune_2_4"}, options);
  REQUIRE(r);
  CHECK_FALSE(r->back().changed);
  for (ValueId w : {wc, w1, w2}) {
    const Tensor& a = again.initializers.at(w);
    const Tensor& p = b.g.initializers.at(w);
    CHECK(std::equal(a.data<float>(), a.data<float>() + a.numel(), p.data<float>()));
  }
}

TEST_CASE("prune_2_4 leaves a reduction length that is not a multiple of 4 dense", "[prune]") {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 3, 6, 6});
  const ValueId w = b.weight("w", {4, 3, 1, 1});  // K = 3
  b.output(b.node(OpKind::Conv, "c", {x, w}));
  const Tensor before = b.g.initializers.at(w).clone();
  PassRunOptions options;
  auto r = run_passes(b.g, {"prune_2_4"}, options);
  REQUIRE(r);
  const Tensor& after = b.g.initializers.at(w);
  CHECK(std::equal(before.data<float>(), before.data<float>() + before.numel(), after.data<float>()));
  CHECK_FALSE(b.g.nodes[0].attrs.has(std::string(kSparsityPatternAttr)));
}
