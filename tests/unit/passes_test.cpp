// Pass infrastructure and the elimination passes: before/expected graphs, plus the runner's
// re-validation and numeric check against the reference executor.
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

#include "compilers/ir/shape_inference.h"
#include "compilers/passes/pass_runner.h"
#include "compilers/passes/pipeline.h"

using namespace kiln;

namespace {

ValueId value(Graph& g, const std::string& name) { return g.add_value(name, ValueType::unranked(DType::f32)); }

// x -> Identity -> a -> Relu -> b -> Dropout -> y ; plus a dead Neg branch reading a.
Graph chain_with_identities() {
  Graph g;
  const ValueId x = g.add_value("x", ValueType::of(DType::f32, {2, 3}));
  const ValueId a = value(g, "a"), b = value(g, "b"), y = value(g, "y"), dead = value(g, "dead");
  g.inputs = {x};
  g.outputs = {y};
  g.add_node(Node{"id", OpKind::Identity, {}, {x}, {a}});
  g.add_node(Node{"relu", OpKind::Relu, {}, {a}, {b}});
  g.add_node(Node{"unused", OpKind::Neg, {}, {a}, {dead}});
  g.add_node(Node{"drop", OpKind::Dropout, {}, {b}, {y}});
  return g;
}

std::vector<std::string> node_names(const Graph& g) {
  std::vector<std::string> names;
  for (const Node& n : g.nodes) names.push_back(n.name);
  return names;
}

}  // namespace

TEST_CASE("the pipeline table resolves names and refuses unknown ones", "[passes]") {
  REQUIRE_FALSE(default_pipeline().empty());
  auto ok = pipeline_from_names(default_pipeline());
  REQUIRE(ok);
  auto bad = pipeline_from_names({"eliminate_identity", "no_such_pass"});
  REQUIRE_FALSE(bad);
  REQUIRE(bad.error().message.find("unknown pass 'no_such_pass'") != std::string::npos);
  REQUIRE(pipeline_parse("a,b") == std::vector<std::string>{"a", "b"});
  REQUIRE(pipeline_parse("none").empty());
  REQUIRE(pipeline_parse("default") == default_pipeline());
  // default+optional: the optional pass at its place in the table, before fuse_depth_first.
  const auto with_bf16 = pipeline_parse("default+mixed_precision_bf16");
  REQUIRE(with_bf16.size() == default_pipeline().size() + 1);
  const auto at = std::find(with_bf16.begin(), with_bf16.end(), "mixed_precision_bf16");
  REQUIRE(at != with_bf16.end());
  REQUIRE(*(at + 1) == "fuse_depth_first");
  auto unknown = pipeline_from_names(pipeline_parse("default+no_such_pass"));
  REQUIRE_FALSE(unknown);
  REQUIRE(unknown.error().message.find("unknown pass 'no_such_pass'") != std::string::npos);
}

TEST_CASE("eliminate_identity rewires readers and keeps the output name", "[passes]") {
  Graph g = chain_with_identities();
  PassRunOptions options;
  options.check_numerics = true;
  auto records = run_passes(g, {"eliminate_identity"}, options);
  REQUIRE(records);
  REQUIRE((*records)[0].changed);
  REQUIRE((*records)[0].max_rel_error == 0.0);
  REQUIRE(node_names(g) == std::vector<std::string>{"relu", "unused"});
  // relu now reads x and writes the graph output y directly
  REQUIRE(g.nodes[0].inputs[0] == g.find_value("x"));
  REQUIRE(g.nodes[0].outputs[0] == g.find_value("y"));
  REQUIRE(g.outputs[0] == g.find_value("y"));
}

TEST_CASE("eliminate_dead_nodes removes what no output needs, and unused weights", "[passes]") {
  Graph g = chain_with_identities();
  const ValueId w = g.add_value("w", ValueType::of(DType::f32, {3}));
  g.initializers[w] = Tensor::zeros(DType::f32, {3});
  g.nodes[2].inputs.push_back(w);  // the dead Neg also reads a weight (arity is checked later)
  g.nodes[2].op = OpKind::Add;
  auto records = run_passes(g, {"eliminate_dead_nodes"});
  REQUIRE(records);
  REQUIRE(node_names(g) == std::vector<std::string>{"id", "relu", "drop"});
  REQUIRE(g.initializers.empty());
}

TEST_CASE("an unchanged pass is reported as such and dumps say so", "[passes]") {
  Graph g = chain_with_identities();
  std::ostringstream dump;
  PassRunOptions options;
  options.dump_ir_after = {"all"};
  options.dump = &dump;
  auto records = run_passes(g, {"eliminate_identity", "eliminate_identity"}, options);
  REQUIRE(records);
  REQUIRE((*records)[1].changed == false);
  REQUIRE(dump.str().find("# IR after eliminate_identity (unchanged)") != std::string::npos);
  REQUIRE(dump.str().find("%y = Relu(%x)") != std::string::npos);
}

TEST_CASE("numeric checks need concrete shapes", "[passes]") {
  Graph g = chain_with_identities();
  g.value(g.inputs[0]).type = ValueType::of(DType::f32, {Dim::named("batch"), 3});
  PassRunOptions options;
  options.check_numerics = true;
  auto records = run_passes(g, {"eliminate_identity"}, options);
  REQUIRE_FALSE(records);
  REQUIRE(records.error().message.find("bind the symbolic dims of input 'x'") != std::string::npos);
  options.bindings["batch"] = 2;
  REQUIRE(run_passes(g, {"eliminate_identity"}, options));
}
