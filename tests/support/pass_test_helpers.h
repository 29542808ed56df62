// Helpers of the fusion pass tests (tests/unit/passes_*_test.cpp): small graphs around a 3x3 Conv,
// passes run with check_numerics (so every fused graph is also checked against the unfused one on the
// reference executor), and reading the result back.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "compilers/ir/shape_inference.h"
#include "compilers/ir/verify.h"
#include "compilers/lower/to_plan.h"
#include "compilers/passes/pass_runner.h"
#include "kernels/executor.h"
#include "kernels/post_ops.h"
#include "tests/support/graph_builder.h"

namespace kiln::testing::passes {

// Small graphs (tests/support/graph_builder.h) with the 3x3 Conv these tests build around.
struct Builder : testing::GraphBuilder {
  // Conv 3x3, padding 1, with bias: [1, c, 6, 6] -> [1, m, 6, 6].
  ValueId conv(const std::string& out, ValueId x, int64_t c, int64_t m) {
    Attrs a;
    a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    return node(OpKind::Conv, out, {x, weight(out + "_w", {m, c, 3, 3}), weight(out + "_b", {m})}, a);
  }
};

inline Attrs float_attrs(std::initializer_list<std::pair<const char*, float>> list) {
  Attrs a;
  for (const auto& [k, v] : list) a.set(k, v);
  return a;
}

inline Result<std::vector<PassRecord>> run(Graph& g, const std::vector<std::string>& passes) {
  PassRunOptions options;
  options.check_numerics = true;
  options.cpu_isa = CpuIsa::avx512;  // the fusion decisions as on an AVX-512 CPU (the numeric checks run on this one)
  return run_passes(g, passes, options);
}

inline std::vector<OpKind> ops(const Graph& g) {
  std::vector<OpKind> out;
  for (const Node& n : g.nodes) out.push_back(n.op);
  return out;
}

inline const Node& node_writing(const Graph& g, const std::string& value) {
  return g.nodes.at(static_cast<size_t>(g.value(g.find_value(value)).producer));
}

inline PostOps post_ops_of(const Node& n) {
  auto p = post_ops_from_attrs(n.attrs);
  REQUIRE(p);
  return *p;
}

inline Result<std::vector<Tensor>> execute(Graph g, const std::vector<Tensor>& inputs) {
  KILN_TRY(graph_verify(g));
  KILN_TRY(graph_infer_shapes(g).status());
  KILN_ASSIGN(result, execute_reference(graph_to_plan(g), inputs));
  return std::move(result.outputs);
}

inline void require_close(const Tensor& got, const Tensor& want, double tol = 1e-5) {
  REQUIRE(got.shape() == want.shape());
  for (int64_t i = 0; i < got.numel(); ++i) {
    INFO("element " << i);
    REQUIRE(got.value_as_double(i) == Approx(want.value_as_double(i)).margin(tol));
  }
}

}  // namespace kiln::testing::passes
