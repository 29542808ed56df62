#include "compilers/quantize/calibrate.h"

#include <algorithm>

#include "compilers/lower/to_plan.h"
#include "kernels/engine.h"
#include "kernels/verify/verify.h"

namespace kiln {

Status check_calibration_set(const Graph& graph, const CalibrationSet& set) {
  KILN_REQUIRE(set.inputs.size() == graph.inputs.size(), invalid_argument, "calibration data has ", set.inputs.size(),
               " input tensors but the model has ", graph.inputs.size(), " inputs");
  int64_t samples = -1;
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const Value& in = graph.value(graph.inputs[i]);
    const Tensor& t = set.inputs[i];
    KILN_REQUIRE(in.type.rank_known && sym_shape_is_concrete(in.type.shape) && !in.type.shape.empty(), invalid_argument,
                 "model input '", in.name, "' has no concrete shape to calibrate with (bind its dims)");
    const Shape want = sym_shape_concrete(in.type.shape);
    Shape sample(want.begin() + 1, want.end());
    KILN_REQUIRE(t.dtype() == in.type.dtype, invalid_argument, "calibration data for input '", in.name, "' is ",
                 t.describe(), " but the input is ", dtype_name(in.type.dtype));
    KILN_REQUIRE(t.rank() >= 1 && t.dim(0) > 0, invalid_argument, "calibration data for input '", in.name,
                 "' is empty (", t.describe(), "): give at least one sample");
    // A sample may come flat or shaped ([N, 784] for [N, 1, 28, 28]) as long as the counts agree.
    const Shape got(t.shape().begin() + 1, t.shape().end());
    KILN_REQUIRE(got == sample || shape_numel(got) == shape_numel(sample), invalid_argument, "calibration data for input '",
                 in.name, "' has samples of shape ", shape_to_string(got), ", the model expects ",
                 shape_to_string(sample), " per sample");
    KILN_REQUIRE(samples < 0 || t.dim(0) == samples, invalid_argument, "calibration data has ", samples,
                 " samples for one input and ", t.dim(0), " for input '", in.name, "'");
    samples = t.dim(0);
  }
  return Status::ok();
}

Result<std::map<ValueId, TensorRange>> calibrate_values(const Graph& graph, const std::vector<ValueId>& values,
                                                        const CalibrationSet& set, const CalibrationOptions& options) {
  KILN_TRY(check_calibration_set(graph, set));
  // The graph with every value of interest as an extra output.
  Graph probe = graph;
  std::vector<ValueId> wanted;
  for (ValueId v : values) {
    KILN_REQUIRE(graph.value(v).type.dtype == DType::f32, internal, "calibrating non-float value '", graph.value(v).name, "'");
    if (std::find(wanted.begin(), wanted.end(), v) != wanted.end()) continue;
    wanted.push_back(v);
    if (std::find(probe.outputs.begin(), probe.outputs.end(), v) == probe.outputs.end()) probe.outputs.push_back(v);
  }
  std::vector<size_t> output_index;
  for (ValueId v : wanted)
    output_index.push_back(static_cast<size_t>(std::find(probe.outputs.begin(), probe.outputs.end(), v) - probe.outputs.begin()));
  KILN_ASSIGN(engine, Engine::create(graph_to_plan(probe), {options.threads, nullptr}));

  std::vector<Shape> input_shapes;
  for (ValueId in : graph.inputs) input_shapes.push_back(sym_shape_concrete(graph.value(in).type.shape));
  const int64_t batch = input_shapes.at(0).at(0);
  const int64_t samples = set.inputs.at(0).dim(0);
  const int64_t batches = (samples + batch - 1) / batch;
  std::vector<TensorStats> stats(wanted.size());
  const int sweeps = options.method == CalibrationMethod::minmax ? 1 : 2;
  for (int sweep = 0; sweep < sweeps; ++sweep) {
    if (options.progress)
      *options.progress << "  calibration sweep " << sweep + 1 << "/" << sweeps << ": " << samples << " samples in "
                        << batches << " batches of " << batch << " (" << set.source << ")\n"
                        << std::flush;
    for (int64_t b = 0; b < batches; ++b) {
      const int64_t rows = std::min(batch, samples - b * batch);
      std::vector<Tensor> inputs;
      for (size_t i = 0; i < set.inputs.size(); ++i) inputs.push_back(batch_slice(set.inputs[i], input_shapes[i], set.inputs[i].dtype(), b * batch, rows));
      KILN_ASSIGN(outputs, engine->run(inputs));
      for (size_t k = 0; k < wanted.size(); ++k) {
        const Tensor& t = outputs.at(output_index[k]);
        // Padding rows of the last batch are not calibration data.
        const int64_t n = t.rank() >= 1 && t.dim(0) == batch ? t.numel() / batch * rows : t.numel();
        if (sweep == 0) stats[k].add_range(t.data<float>(), n);
        else stats[k].add_histogram(t.data<float>(), n);
      }
    }
  }
  std::map<ValueId, TensorRange> ranges;
  for (size_t k = 0; k < wanted.size(); ++k) {
    KILN_REQUIRE(stats[k].count() > 0, invalid_argument, "value '", graph.value(wanted[k]).name,
                 "' was NaN or infinite for every calibration sample");
    ranges[wanted[k]] = calibrated_range(stats[k], options.method, options.percentile);
  }
  return ranges;
}

}  // namespace kiln
