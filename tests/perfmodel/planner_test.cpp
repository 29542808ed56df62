// The planner: a model's costs at batch 1 scaled to batch N agree with compiling at N; costs and
// fits survive their caches; the search ranks by the objective, marks the Pareto front, blocks
// candidates by their constraints (naming the numbers), answers "infeasible" with the closest,
// and refuses a cost objective without a price.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "compilers/ir/shape_inference.h"
#include "compilers/onnx/import.h"
#include "perfmodel/fingerprint.h"
#include "perfmodel/predictor_cache.h"
#include "perfmodel/prior_predictor.h"
#include "perfmodel/priors.h"
#include "perfmodel/search/model_costs.h"
#include "perfmodel/search/planner.h"
#include "tests/perfmodel/synthetic_profile.h"
#include "tests/perfmodel/temp_dir.h"

using namespace kiln;
using namespace kiln::perf;
using namespace kiln::perf::testing;

namespace {

const std::string kModel = std::string(KILN_EXAMPLES_DIR) + "/fashion-mnist/model.onnx";

Graph fashion_at(int64_t batch) {
  auto g = onnx_import_file(kModel);
  REQUIRE(g);
  ShapeInferenceOptions options;
  for (ValueId in : g->inputs) {
    const ValueType& t = g->value(in).type;
    REQUIRE((t.rank_known && !t.shape.empty() && !t.shape[0].known()));
    options.bindings[t.shape[0].symbol] = batch;
  }
  REQUIRE(graph_infer_shapes(*g, options));
  return std::move(*g);
}

const ModelCosts& fashion_costs(const std::string& precision) {
  static std::map<std::string, ModelCosts> cache;
  if (!cache.count(precision)) {
    auto c = model_costs_compute(fashion_at(1), precision);
    REQUIRE(c);
    cache.emplace(precision, std::move(*c));
  }
  return cache.at(precision);
}

const LatencyPredictor& synthetic_predictor() {
  static auto p = LatencyPredictor::fit(synthetic_profile_all_dtypes());
  REQUIRE(p);
  return *p;
}

PlanTarget two_core_target() {
  PlanTarget t;
  t.name = "test";
  t.profile_id = "synthetic";
  t.profile_source = "measured";
  t.cores = 2;
  t.memory_bytes = int64_t{8} << 30;
  t.measured_threads = {1, 2};
  return t;
}

std::map<std::string, ModelCosts> all_costs() {
  return {{"fp32", fashion_costs("fp32")}, {"bf16", fashion_costs("bf16")}, {"int8", fashion_costs("int8")}};
}

api::ApplicationDescription app_with(api::Objective objective) {
  api::ApplicationDescription app;
  app.name = "test";
  app.objective = objective;
  app.optimizations.batch_sizes = {1, 4, 16, 64};
  return app;
}

}  // namespace

TEST_CASE("model costs at batch 1, scaled to batch 8, match compiling at batch 8", "[perfmodel][planner]") {
  for (const std::string precision : {"fp32", "int8"}) {
    INFO(precision);
    const ModelCosts& one = fashion_costs(precision);
    auto eight = model_costs_compute(fashion_at(8), precision);
    REQUIRE(eight);
    const std::vector<StepFeatures> scaled = model_costs_steps_at(one, 8, 2);
    REQUIRE(scaled.size() == eight->steps.size());
    for (size_t i = 0; i < scaled.size(); ++i) {
      INFO(scaled[i].node);
      CHECK(scaled[i].m.op == eight->steps[i].m.op);
      CHECK(scaled[i].m.threads == 2);
      CHECK(scaled[i].m.batch == eight->steps[i].m.batch);
      CHECK(scaled[i].m.macs == Approx(eight->steps[i].m.macs));
      CHECK(scaled[i].m.bytes == Approx(eight->steps[i].m.bytes));
    }
    CHECK(one.packed_bytes > 0);
    CHECK(eight->packed_bytes == one.packed_bytes);  // weights do not grow with the batch
    const double predicted = static_cast<double>(model_costs_memory_at(one, 8));
    const double compiled = static_cast<double>(model_costs_memory_at(*eight, 1));
    CHECK(predicted >= compiled);  // the arena and scratch grow at most linearly
    // Scratch is priced as growing with the batch (an upper bound: oneDNN's int8 scratchpads do
    // on AVX2; elsewhere they may stay flat), so allow seven more batch-1 scratches than linear.
    CHECK(predicted <= 1.5 * compiled + 7.0 * static_cast<double>(one.scratch_bytes));
  }
}

TEST_CASE("model costs and fits read back from their caches as they were written", "[perfmodel][planner]") {
  TempDir dir;
  const ModelCosts& costs = fashion_costs("bf16");
  const std::string path = model_costs_cache_path(dir.file("costs"), "abc", "bf16", "fp");
  REQUIRE(model_costs_write(costs, path));
  auto back = model_costs_read(path);
  REQUIRE(back);
  CHECK(back->from_cache);
  CHECK(back->steps.size() == costs.steps.size());
  CHECK(back->packed_bytes == costs.packed_bytes);
  CHECK(back->arena_bytes == costs.arena_bytes);
  for (size_t i = 0; i < costs.steps.size(); ++i) {
    CHECK(back->steps[i].m.bytes == costs.steps[i].m.bytes);
    CHECK(back->steps[i].weight_bytes == costs.steps[i].weight_bytes);
    CHECK(back->steps[i].kernel == costs.steps[i].kernel);
  }
  CHECK_FALSE(model_costs_read(dir.file("missing.json")));

  const std::vector<Measurement> rows = synthetic_profile_all_dtypes();
  bool cached = true;
  auto fresh = predictor_fit_cached(rows, {}, dir.file("fits"), &cached);
  REQUIRE(fresh);
  CHECK_FALSE(cached);
  auto again = predictor_fit_cached(rows, {}, dir.file("fits"), &cached);
  REQUIRE(again);
  CHECK(cached);
  const std::vector<StepFeatures> steps = model_costs_steps_at(costs, 4, 2);
  CHECK(again->predict(steps).total_ms == Approx(fresh->predict(steps).total_ms).epsilon(1e-12));
  CHECK(again->summary().method == fresh->summary().method);
  // Another timing anywhere in the profile is another fit.
  std::vector<Measurement> changed = rows;
  changed[3].median_ms *= 1.5;
  CHECK(predictor_fit_digest(changed, {}) != predictor_fit_digest(rows, {}));
  auto refit = predictor_fit_cached(changed, {}, dir.file("fits"), &cached);
  REQUIRE(refit);
  CHECK_FALSE(cached);
}

TEST_CASE("the search ranks by the objective and keeps the Pareto front", "[perfmodel][planner]") {
  for (api::Objective objective : {api::Objective::throughput, api::Objective::latency}) {
    INFO(api::objective_name(objective));
    auto r = plan_search(app_with(objective), two_core_target(), all_costs(), synthetic_predictor());
    REQUIRE(r);
    CHECK(r->status == "ok");
    REQUIRE(r->chosen == size_t{0});
    CHECK(r->candidates.size() == 3 * 2 * 4);  // precisions x threads {1, 2} x batches
    const Candidate& best = r->candidates[0];
    for (const Candidate& c : r->candidates) {
      CHECK(c.feasible());
      if (objective == api::Objective::throughput) CHECK(c.throughput_per_s <= best.throughput_per_s * 1.01);
      else CHECK(c.latency_ms >= best.latency_ms * 0.99);
      CHECK(c.instances * c.threads == 2);
      CHECK(c.throughput_per_s == Approx(c.instances * c.batch * 1000.0 / c.latency_ms));
      CHECK(c.accuracy == (c.precision == "fp32" ? "reference" : "unverified"));
    }
    CHECK(best.pareto);
    // The front: nothing dominates a member, something dominates every other candidate.
    for (const Candidate& c : r->candidates) {
      bool dominated = false;
      for (const Candidate& o : r->candidates)
        dominated = dominated || (o.latency_ms <= c.latency_ms && o.throughput_per_s >= c.throughput_per_s &&
                                  o.memory_bytes <= c.memory_bytes &&
                                  (o.latency_ms < c.latency_ms || o.throughput_per_s > c.throughput_per_s || o.memory_bytes < c.memory_bytes));
      CHECK(c.pareto == !dominated);
    }
    // int8 is four times fp32's compute in this profile: the choice is int8, and said so.
    CHECK(best.precision == "int8");
    const std::string said = r->explanation[1];
    CHECK(said.find("Chosen: int8") == 0);
  }
}

TEST_CASE("constraints block candidates with their numbers, and none left is infeasible with the closest", "[perfmodel][planner]") {
  api::ApplicationDescription app = app_with(api::Objective::throughput);
  auto unconstrained = plan_search(app, two_core_target(), all_costs(), synthetic_predictor());
  REQUIRE(unconstrained);
  double fastest = 1e9;
  for (const Candidate& c : unconstrained->candidates) fastest = std::min(fastest, c.latency_ms);

  app.constraints.max_latency_ms = fastest * 1.5;
  auto limited = plan_search(app, two_core_target(), all_costs(), synthetic_predictor());
  REQUIRE(limited);
  REQUIRE(limited->chosen);
  CHECK(limited->candidates[0].latency_ms <= fastest * 1.5);
  bool some_blocked = false;
  for (const Candidate& c : limited->candidates)
    if (!c.feasible()) {
      some_blocked = true;
      CHECK(c.blocked_by[0].find("max_latency_ms") != std::string::npos);
    }
  CHECK(some_blocked);

  app.constraints.max_latency_ms = fastest / 10;
  auto none = plan_search(app, two_core_target(), all_costs(), synthetic_predictor());
  REQUIRE(none);
  CHECK(none->status == "infeasible");
  CHECK_FALSE(none->chosen);
  for (size_t i = 1; i < none->candidates.size(); ++i) CHECK(none->candidates[i - 1].violation <= none->candidates[i].violation);
  CHECK(none->candidates[0].latency_ms == Approx(fastest));  // the closest is the fastest
  const std::string all = [&] {
    std::string s;
    for (const std::string& l : none->explanation) s += l + "\n";
    return s;
  }();
  CHECK(all.find("Infeasible") != std::string::npos);
  CHECK(all.find("max_latency_ms") != std::string::npos);

  api::ApplicationDescription fp32_only = app_with(api::Objective::latency);
  fp32_only.constraints.max_accuracy_drop = 0.0;
  auto exact = plan_search(fp32_only, two_core_target(), all_costs(), synthetic_predictor());
  REQUIRE(exact);
  CHECK(exact->candidates[0].precision == "fp32");
}

TEST_CASE("cost needs a price, and with one the cost per million follows the throughput", "[perfmodel][planner]") {
  const api::ApplicationDescription app = app_with(api::Objective::cost);
  auto refused = plan_search(app, two_core_target(), all_costs(), synthetic_predictor());
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("price_per_node_hour") != std::string::npos);

  PlanTarget priced = two_core_target();
  priced.price_per_node_hour = 2.0;
  priced.nodes = 3;
  auto r = plan_search(app, priced, all_costs(), synthetic_predictor());
  REQUIRE(r);
  for (const Candidate& c : r->candidates) {
    REQUIRE(c.cost_per_million);
    CHECK(*c.cost_per_million == Approx(2.0 * 1e6 / (c.throughput_per_s / 3 * 3600.0)));
  }
  for (size_t i = 1; i < r->candidates.size(); ++i)
    CHECK(*r->candidates[i - 1].cost_per_million <= *r->candidates[i].cost_per_million * 1.01);
}

TEST_CASE("precisions the target cannot run natively are excluded with the reason", "[perfmodel][planner]") {
  api::ApplicationDescription app;
  app.optimizations.precisions = {api::Precision::fp32, api::Precision::fp16, api::Precision::bf16, api::Precision::int8};
  TargetFingerprint avx2_cpu;
  avx2_cpu.isa = {"avx2", "fma"};
  std::vector<ExcludedChoice> excluded;
  // int8 without VNNI still runs (and ran 2x float32 on an AVX2 EPYC); bf16 would be emulated.
  const std::vector<std::string> kept = plan_precisions(app, avx2_cpu, &excluded);
  CHECK(kept == std::vector<std::string>{"fp32", "int8"});
  REQUIRE(excluded.size() == 2);
  CHECK(excluded[0].what == "precision fp16");
  CHECK(excluded[1].what == "precision bf16");
  CHECK_FALSE(excluded[1].reason.empty());
  TargetFingerprint old_cpu;
  old_cpu.isa = {"sse4_2"};
  excluded.clear();
  CHECK(plan_precisions(app, old_cpu, &excluded) == std::vector<std::string>{"fp32"});
  REQUIRE(excluded.size() == 3);
  CHECK(excluded[2].what == "precision int8");
  CHECK(plan_thread_counts(6) == std::vector<int>{1, 2, 4, 6});
  CHECK(plan_thread_counts(1) == std::vector<int>{1});
  CHECK(plan_batch_sizes(app).size() == 7);
}

TEST_CASE("a GPU space beside the CPU one: one instance per GPU, its memory per GPU, priced by its prior", "[perfmodel][planner]") {
  const PlanTarget target = two_core_target();
  PlanSpace gpu;
  gpu.device = "cuda";
  gpu.what = "4 x test GPU (spec prior, not measured)";
  ModelCosts fp16 = fashion_costs("fp32");
  fp16.precision = "fp16";
  fp16.steps = steps_on_gpu(fp16.steps, "f16");
  gpu.costs = {{"fp16", fp16}};
  const PriorPredictor h100(*target_prior_find("nvidia-h100-sxm"));
  gpu.latency_ms = [&h100](const ModelCosts& m, int64_t batch, int) { return h100.run_ms(model_costs_steps_at(m, batch, 1), 1, 0); };
  gpu.latency_source = "prior";
  gpu.slots = 4;
  gpu.threads = {1};
  // Each instance must fit one GPU: batch 64's intermediates do not fit this (tiny) one.
  gpu.instance_memory_bytes = model_costs_memory_at(fp16, 16);
  api::ApplicationDescription app = app_with(api::Objective::throughput);
  auto r = plan_search(app, target, {plan_space_cpu(target, all_costs(), synthetic_predictor()), gpu});
  REQUIRE(r);
  int gpu_candidates = 0;
  for (const Candidate& c : r->candidates) {
    if (c.device != "cuda") {
      CHECK(c.latency_source == "predicted");
      continue;
    }
    ++gpu_candidates;
    INFO(c.name());
    CHECK(c.name() == "fp16 b" + std::to_string(c.batch) + " cuda x4");
    CHECK(c.instances == 4);
    CHECK(c.threads == 1);
    CHECK(c.latency_source == "prior");
    CHECK(c.latency_ms == Approx(h100.run_ms(model_costs_steps_at(fp16, c.batch, 1), 1, 0)));
    CHECK(c.memory_bytes == 4 * model_costs_memory_at(fp16, c.batch));
    CHECK(c.feasible() == (c.batch <= 16));
    if (!c.feasible()) CHECK(c.blocked_by.at(0).find("per GPU > its") != std::string::npos);
  }
  CHECK(gpu_candidates == 4);  // batches 1, 4, 16, 64
  CHECK(r->explanation.at(0).find("4 x test GPU (spec prior, not measured)") != std::string::npos);
}

TEST_CASE("a p99 latency bound uses the profile's spread, taken to p99 as a log-normal tail", "[perfmodel][planner]") {
  // The ratio: median p90/p50 of the whole-model rows when there are any, else of the kernel rows.
  std::vector<Measurement> rows(3);
  for (Measurement& m : rows) m.kind = kKindKernel, m.median_ms = 1.0, m.p90_ms = 1.2;
  std::string source;
  CHECK(tail_ratio_from_profile(rows, &source) == Approx(std::pow(1.2, 2.3263 / 1.2816)));
  CHECK(source.find("3 kernel timings") != std::string::npos);
  Measurement run;
  run.kind = kKindModel;
  run.median_ms = 10;
  run.p90_ms = 10.5;
  rows.push_back(run);
  CHECK(tail_ratio_from_profile(rows, &source) == Approx(std::pow(1.05, 2.3263 / 1.2816)));
  CHECK(source.find("1 whole-model timings") != std::string::npos);
  CHECK(tail_ratio_from_profile({}, &source) == 0);

  // A bound between the fastest candidate's median and its p99 holds at p50 and blocks at p99.
  api::ApplicationDescription app = app_with(api::Objective::latency);
  PlanSpace space = plan_space_cpu(two_core_target(), all_costs(), synthetic_predictor());
  space.p99_ratio = 1.5;
  space.p99_source = "a test's";
  auto free = plan_search(app, two_core_target(), {space});
  REQUIRE(free);
  const Candidate fastest = free->candidates.at(0);
  CHECK(fastest.latency_p99_ms == Approx(1.5 * fastest.latency_ms));
  app.constraints.max_latency_ms = 1.2 * fastest.latency_ms;
  auto p50 = plan_search(app, two_core_target(), {space});
  REQUIRE(p50);
  CHECK(p50->candidates.at(0).name() == fastest.name());
  CHECK(p50->candidates.at(0).feasible());
  app.constraints.latency_p99 = true;
  auto p99 = plan_search(app, two_core_target(), {space});
  REQUIRE(p99);
  for (const Candidate& c : p99->candidates)
    if (c.name() == fastest.name()) {
      REQUIRE_FALSE(c.feasible());
      CHECK(c.blocked_by.at(0).find("p99 latency") == 0);
    }
  for (const Candidate& c : p99->candidates)
    if (c.feasible()) CHECK(c.latency_p99_ms <= *app.constraints.max_latency_ms);
  std::string said;
  for (const std::string& l : p99->explanation) said += l + "\n";
  CHECK(said.find("predicted as 1.500x the median (a test's)") != std::string::npos);
}
