#include "compilers/passes/pass_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "compilers/ir/printer.h"
#include "compilers/ir/shape_inference.h"
#include "compilers/ir/verify.h"
#include "compilers/lower/to_plan.h"
#include "compilers/passes/pipeline.h"
#include "kernels/executor.h"

namespace kiln {
namespace {

// Seeded inputs for every graph input; an error when a shape is not concrete.
Result<std::vector<Tensor>> make_inputs(const Graph& graph, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<Tensor> inputs;
  for (ValueId id : graph.inputs) {
    const Value& v = graph.value(id);
    KILN_REQUIRE(v.type.rank_known && sym_shape_is_concrete(v.type.shape), invalid_argument,
                 "numeric checks need concrete input shapes: bind the symbolic dims of input '", v.name, "'");
    Tensor t = Tensor::zeros(v.type.dtype, sym_shape_concrete(v.type.shape));
    if (t.dtype() == DType::f32)
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
    inputs.push_back(std::move(t));
  }
  return inputs;
}

Result<std::vector<Tensor>> run_reference(const Graph& graph, const std::vector<Tensor>& inputs) {
  KILN_ASSIGN(result, execute_reference(graph_to_plan(graph), inputs));
  return std::move(result.outputs);
}

Result<double> compare(const std::vector<Tensor>& want, const std::vector<Tensor>& got, std::string_view pass) {
  KILN_REQUIRE(want.size() == got.size(), internal, "pass '", pass, "' changed the number of outputs");
  double worst = 0;
  for (size_t o = 0; o < want.size(); ++o) {
    KILN_REQUIRE(want[o].shape() == got[o].shape() && want[o].dtype() == got[o].dtype(), internal, "pass '", pass,
                 "' changed output ", o, " from ", want[o].describe(), " to ", got[o].describe());
    double max_diff = 0, max_ref = 0;
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      const double w = want[o].value_as_double(i), g = got[o].value_as_double(i);
      max_diff = std::max(max_diff, std::isnan(g) != std::isnan(w) ? INFINITY : std::fabs(g - w));
      max_ref = std::max(max_ref, std::fabs(w));
    }
    worst = std::max(worst, max_ref > 0 ? max_diff / max_ref : max_diff);
  }
  return worst;
}

bool wants_dump(const PassRunOptions& options, std::string_view name) {
  return std::any_of(options.dump_ir_after.begin(), options.dump_ir_after.end(),
                     [&](const std::string& n) { return n == name || n == "all"; });
}

}  // namespace

Result<std::vector<PassRecord>> run_passes(Graph& graph, const std::vector<std::string>& pipeline,
                                           const PassRunOptions& options) {
  KILN_ASSIGN(passes, pipeline_from_names(pipeline));
  ShapeInferenceOptions infer_options;
  infer_options.bindings = options.bindings;
  KILN_TRY(graph_verify(graph));
  KILN_TRY(graph_infer_shapes(graph, infer_options).status());

  std::vector<Tensor> inputs, expected;
  if (options.check_numerics) {
    KILN_ASSIGN(made, make_inputs(graph, options.seed));
    inputs = std::move(made);
    KILN_ASSIGN(outputs, run_reference(graph, inputs));
    expected = std::move(outputs);
  }

  PassContext ctx{options.bindings, options.int8, options.prune, options.keep_fp32, options.log, options.cpu_isa};
  std::vector<PassRecord> records;
  for (const PassInfo* pass : passes) {
    PassRecord record;
    record.name = std::string(pass->name);
    record.nodes_before = graph.nodes.size();
    const auto start = std::chrono::steady_clock::now();
    auto changed = pass->run(graph, ctx);
    record.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!changed) return changed.status().with_context("pass '" + record.name + "': ");
    record.changed = *changed;
    record.nodes_after = graph.nodes.size();

    Status valid = graph_verify(graph);
    if (valid) valid = graph_infer_shapes(graph, infer_options).status();
    if (!valid) return valid.with_context("after pass '" + record.name + "' the graph is invalid: ");

    if (options.check_numerics && record.changed) {
      KILN_ASSIGN(outputs, run_reference(graph, inputs));
      KILN_ASSIGN(error, compare(expected, outputs, record.name));
      record.max_rel_error = error;
      if (pass_prunes(record.name)) {
        expected = std::move(outputs);  // pruning changes the function: later passes compare with the pruned model
      } else {
        KILN_REQUIRE(error <= options.tolerance, internal, "pass '", record.name,
                     "' changed the model's outputs: max abs diff is ", error, " x max|output| (tolerance ",
                     options.tolerance, ")");
      }
    }
    if (options.dump && wants_dump(options, record.name)) {
      *options.dump << "# IR after " << record.name << (record.changed ? "" : " (unchanged)") << '\n';
      if (record.changed) graph_print(graph, *options.dump);
    }
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace kiln
