#include "perfmodel/precision_compile.h"

#include <random>

#include "compilers/lower/to_plan.h"
#include "compilers/passes/pass_runner.h"
#include "compilers/passes/pipeline.h"

namespace kiln::perf {

std::string precision_dtype(const std::string& precision) {
  if (precision == "fp32") return "f32";
  if (precision == "bf16" || precision == "int8") return precision;
  return "";
}

Result<std::vector<std::string>> precision_pipeline(const std::string& precision, const std::string& fallback) {
  KILN_REQUIRE(!precision_dtype(precision).empty(), invalid_argument, "unknown precision '", precision,
               "': use fp32, bf16 or int8");
  KILN_REQUIRE(fallback == "fp32" || (fallback == "bf16" && precision == "int8"), invalid_argument,
               "a ", precision, " layer falls back to fp32", precision == "int8" ? " or bf16" : "", ", not '", fallback, "'");
  return pipeline_parse(precision == "bf16"                          ? "default+mixed_precision_bf16"
                        : precision == "int8" && fallback == "bf16" ? "default+mixed_precision_bf16+quantize_int8"
                        : precision == "int8"                       ? "default+quantize_int8"
                                                                    : "default");
}

Result<Plan> gpu_plan_compile(Graph graph) {
  PassRunOptions options;
  options.check_numerics = false;
  auto records = run_passes(graph, cuda_pipeline(), options);
  if (!records) return records.status();
  return graph_to_plan(graph);
}

Result<Plan> precision_compile(Graph graph, const std::string& precision, const KeptLayers& kept) {
  if (precision == kCudaPlan) return gpu_plan_compile(std::move(graph));
  KILN_ASSIGN(passes, precision_pipeline(precision, kept.fallback));
  PassRunOptions options;
  options.check_numerics = false;
  if (kept.in_bf16()) options.int8.keep = kept.layers;  // left bf16 by quantize_int8
  else options.keep_fp32 = kept.layers;
  CalibrationSet calibration;
  if (precision == "int8") {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (ValueId in : graph.inputs) {
      const ValueType& type = graph.value(in).type;
      KILN_REQUIRE(type.rank_known && sym_shape_is_concrete(type.shape), invalid_argument, "input '",
                   graph.value(in).name, "' has no concrete shape: bind its dimensions (--batch, --dims)");
      Shape s = sym_shape_concrete(type.shape);
      if (!s.empty()) s[0] = 1;
      Tensor t = Tensor::zeros(type.dtype, s);
      if (t.dtype() == DType::f32)
        for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
      calibration.inputs.push_back(std::move(t));
    }
    calibration.source = "random (1 seeded sample)";
    options.int8.calibration = &calibration;
  }
  auto records = run_passes(graph, passes, options);
  if (!records) return records.status();
  return graph_to_plan(graph);
}

}  // namespace kiln::perf
