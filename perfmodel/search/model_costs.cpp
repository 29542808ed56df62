#include "perfmodel/search/model_costs.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "kernels/engine.h"
#include "perfmodel/cache_file.h"
#include "perfmodel/measurement_json.h"
#include "perfmodel/precision_compile.h"

namespace kiln::perf {
namespace {

using nlohmann::json;

// Bumped whenever plan_features or this file's format changes meaning: old files are then missed.
constexpr int kCostsFormatVersion = 12;  // 2: io_bytes, epilogue_ops (dropped by v1); 3: input_conversion; 4: ToPlain "from layout"; 5: residual_elements; 6: ConcatAffine in the dtype it writes (bf16/int8 plans: it writes what its convs read); 7: MatMul with its bias and GELU (fuse_matmul_bias); 8: int8 MatMul reading an int8 MatMul's codes (no ToPlain between); 9: bf16 LayerNorm writing rows for bf16 MatMuls; 10: a bf16/int8 gemm reading float32 marked "precision"; 11: LayerNorm and cheap chains mapped (layernorm, add); 12: ChannelShuffle (fuse_channel_shuffle) in place of ShuffleNet's Concat/Transpose/Slice steps
constexpr const char* kCostsFormat = "kiln-model-costs";

}  // namespace

std::string model_costs_cache_dir() { return kiln_cache_dir() + "/model-costs"; }

std::string model_costs_cache_path(const std::string& cache_dir, const std::string& model_digest,
                                   const std::string& precision, const std::string& fingerprint_id) {
  return cache_dir + "/" + model_digest + "-" + precision + "-" + fingerprint_id + "-v" +
         std::to_string(kCostsFormatVersion) + ".json";
}

Result<ModelCosts> model_costs_compute(Graph graph, const std::string& precision, const KeptLayers& kept) {
  const auto start = std::chrono::steady_clock::now();
  KILN_ASSIGN(plan, precision_compile(std::move(graph), precision, kept));
  // One thread: the kernels are the same at every thread count (threads only split their work).
  KILN_ASSIGN(engine, Engine::create(plan, {1, nullptr}));
  ModelCosts costs;
  costs.precision = precision;
  costs.steps = plan_features(plan, engine->steps(), 1);
  const EngineMemory& mem = engine->memory();
  costs.constant_bytes = mem.weight_bytes;
  costs.arena_bytes = mem.arena_bytes;
  costs.scratch_bytes = mem.scratch_bytes;
  for (const StepFeatures& f : costs.steps) costs.packed_bytes += static_cast<int64_t>(f.weight_bytes);
  costs.io_bytes = plan_io_bytes(plan);
  costs.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return costs;
}

Result<ModelCosts> model_costs_read(const std::string& path) {
  KILN_ASSIGN(text, cache_file_read(path));
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  KILN_REQUIRE(j.is_object() && j.value("format", "") == kCostsFormat && j.value("version", 0) == kCostsFormatVersion,
               parse, path, ": not a ", kCostsFormat, " v", kCostsFormatVersion, " file");
  ModelCosts c;
  KILN_TRY(json_read_field(j, "precision", c.precision, path));
  KILN_TRY(json_read_field(j, "constant_bytes", c.constant_bytes, path));
  KILN_TRY(json_read_field(j, "packed_bytes", c.packed_bytes, path));
  KILN_TRY(json_read_field(j, "arena_bytes", c.arena_bytes, path));
  KILN_TRY(json_read_field(j, "scratch_bytes", c.scratch_bytes, path));
  KILN_TRY(json_read_field(j, "io_bytes", c.io_bytes, path));
  const auto steps = j.find("steps");
  KILN_REQUIRE(steps != j.end() && steps->is_array(), parse, path, ": steps: expected an array");
  for (size_t i = 0; i < steps->size(); ++i) {
    const json& s = (*steps)[i];
    const std::string where = path + ": steps[" + std::to_string(i) + "]";
    StepFeatures f;
    KILN_TRY(json_read_field(s, "node", f.node, where));
    KILN_TRY(json_read_field(s, "op", f.op, where));
    KILN_TRY(json_read_field(s, "kernel", f.kernel, where));
    KILN_TRY(json_read_field(s, "view", f.view, where));
    KILN_TRY(json_read_field(s, "weight_bytes", f.weight_bytes, where));
    KILN_TRY(json_read_field(s, "epilogue_ops", f.epilogue_ops, where));
    KILN_TRY(json_read_field(s, "residual_elements", f.residual_elements, where));
    KILN_TRY(json_read_field(s, "input_conversion", f.input_conversion, where));
    KILN_REQUIRE(s.contains("m"), parse, where, ": missing field 'm'");
    KILN_ASSIGN(m, measurement_from_json(s["m"], where + ".m"));
    f.m = std::move(m);
    c.steps.push_back(std::move(f));
  }
  c.from_cache = true;
  return c;
}

Status model_costs_write(const ModelCosts& costs, const std::string& path) {
  json steps = json::array();
  for (const StepFeatures& f : costs.steps)
    steps.push_back({{"node", f.node}, {"op", f.op}, {"kernel", f.kernel}, {"view", f.view},
                     {"weight_bytes", f.weight_bytes}, {"epilogue_ops", f.epilogue_ops},
                     {"residual_elements", f.residual_elements}, {"input_conversion", f.input_conversion}, {"m", measurement_to_json(f.m)}});
  const json j = {{"format", kCostsFormat}, {"version", kCostsFormatVersion}, {"precision", costs.precision},
                  {"constant_bytes", costs.constant_bytes}, {"packed_bytes", costs.packed_bytes},
                  {"arena_bytes", costs.arena_bytes}, {"scratch_bytes", costs.scratch_bytes}, {"io_bytes", costs.io_bytes}, {"steps", steps}};
  return cache_file_write(path, j.dump());
}

std::vector<StepFeatures> model_costs_steps_at(const ModelCosts& costs, int64_t batch, int threads) {
  std::vector<StepFeatures> steps = costs.steps;
  const double r = static_cast<double>(batch);
  for (StepFeatures& f : steps) {
    Measurement& m = f.m;
    m.threads = threads;
    m.batch *= batch;
    if (m.op == "gemm") m.m *= batch;
    m.macs *= r;
    m.bytes = f.weight_bytes + (m.bytes - f.weight_bytes) * r;
    f.epilogue_ops *= r;  // per output element
    f.residual_elements *= r;
  }
  return steps;
}

int64_t model_costs_memory_at(const ModelCosts& costs, int64_t batch) {
  // Scratch grows with the batch too (oneDNN's int8 scratchpads: 1.7 KB at batch 1, 12.6 KB at 8
  // for the Fashion-MNIST model on an AVX2 machine); scaling it keeps the estimate an upper bound.
  return costs.constant_bytes + costs.packed_bytes + (costs.arena_bytes + costs.scratch_bytes) * batch;
}

}  // namespace kiln::perf
