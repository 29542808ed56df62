// Weights pushed out of the caches: the weight_reuse points (a conv per copy among copies with
// weights of their own), and the predictor's refetch term fitted on them.
#include <catch2/catch.hpp>

#include <algorithm>

#include "perfmodel/microbench/kernel_sweep.h"
#include "perfmodel/microbench/weight_reuse.h"
#include "perfmodel/predictor.h"
#include "tests/perfmodel/synthetic_profile.h"

using namespace kiln;
using namespace kiln::perf;
using namespace kiln::perf::testing;

TEST_CASE("copies of a sweep conv read one producer, each with weights of its own, keyed by the count", "[perfmodel][weights]") {
  SweepShape s = weight_reuse_shape(true);
  const std::string one_key = sweep_key(s);
  s.copies = 3;
  CHECK(sweep_key(s) == one_key + " x3");
  const Graph g = sweep_graph(s);
  int convs = 0;
  std::vector<ValueId> weights;
  for (const Node& n : g.nodes)
    if (n.op == OpKind::Conv && n.name.rfind(kSweepProducerNode, 0) != 0) {
      ++convs;
      CHECK(n.inputs[0] == g.nodes[1].outputs[0]);  // the producer's ReLU
      weights.push_back(n.inputs[1]);
    }
  CHECK(convs == 3);
  std::sort(weights.begin(), weights.end());
  CHECK(std::unique(weights.begin(), weights.end()) == weights.end());
  CHECK(g.outputs.size() == 3);
}

TEST_CASE("the copy counts reach 256 MiB of stored weights within an eighth of memory", "[perfmodel][weights]") {
  TargetFingerprint fp;
  fp.memory_bytes = int64_t{24} << 30;
  const SweepShape s = weight_reuse_shape(false);
  CHECK(weight_reuse_copy_bytes(s, "f32") == 4.0 * 512 * 512 * 9 + 4.0 * 512);
  const std::vector<int64_t> f32 = weight_reuse_copies(fp, s, "f32", false);
  CHECK(f32 == std::vector<int64_t>{1, 2, 4, 7, 14, 28});
  const std::vector<int64_t> int8 = weight_reuse_copies(fp, s, "int8", false);
  CHECK(int8.back() * weight_reuse_copy_bytes(s, "int8") == Approx(256.0 * (1 << 20)).epsilon(0.01));
  fp.memory_bytes = int64_t{1} << 30;  // 128 MiB for the graph's float32 weights and the packed ones
  for (int64_t k : weight_reuse_copies(fp, s, "f32", false)) CHECK(k * 2 * weight_reuse_copy_bytes(s, "f32") <= 128.0 * (1 << 20));
  CHECK(weight_reuse_copies(fp, s, "f32", true) == std::vector<int64_t>{1, 4});
}

TEST_CASE("a weight_reuse point is timed per copy, with the one copy's kernel", "[perfmodel][weights]") {
  const TargetFingerprint fp = fingerprint_local();
  BenchPlanOptions options;
  options.quick = true;
  options.threads = {1};
  options.timing = {1, 3, 20, 5};
  std::vector<BenchPoint> points = weight_reuse_points(fp, options);
  const auto four = std::find_if(points.begin(), points.end(), [](const BenchPoint& p) {
    return p.record.dtype == "f32" && p.record.key.ends_with(" x4");
  });
  REQUIRE(four != points.end());
  Measurement m = four->record;
  CHECK(m.kind == kKindWeightReuse);
  CHECK(m.working_set_bytes == static_cast<int64_t>(4 * weight_reuse_copy_bytes(weight_reuse_shape(true), "f32")));
  const Status ok = four->measure(m);
  INFO((ok ? "" : ok.message()));
  REQUIRE(ok);
  CHECK(m.median_ms > 0);
  CHECK(m.total_median_ms > 3 * m.median_ms);  // the whole graph ran four convs
  CHECK(m.kernel.find("conv") != std::string::npos);
  CHECK(m.kernel.find("+") == std::string::npos);
}

namespace {

Measurement reuse_row(const std::string& dtype, int threads, double copies, double ms) {
  Measurement m;
  m.kind = kKindWeightReuse;
  m.op = "conv";
  m.key = "conv k3 s1 512->512 7x7 b1 x" + std::to_string(static_cast<int>(copies));
  m.dtype = dtype;
  m.threads = threads;
  m.in_c = m.out_c = 512;
  m.kernel_h = m.kernel_w = 3;
  m.working_set_bytes = static_cast<int64_t>(copies * weight_reuse_copy_bytes(weight_reuse_shape(false), dtype));
  m.median_ms = ms;
  m.load_avg = threads;
  return m;
}

}  // namespace

TEST_CASE("a layer's weights cost the weight_reuse curve's time beyond one copy, at the run's working set", "[perfmodel][weights]") {
  const RooflineParams conv{0.01, 40e6, 15e6};
  std::vector<Measurement> rows = synthetic_sweep(conv, "conv", "f32", 1);
  for (const Measurement& m : synthetic_bandwidth(150e6, 1)) rows.push_back(m);  // the streaming floor far below
  const double copy = weight_reuse_copy_bytes(weight_reuse_shape(false), "f32");
  // 1.0 ms alone; +0.1 at 4 copies, a noisy dip at 8, +0.5 from 16 on.
  for (const auto& [k, ms] : std::vector<std::pair<double, double>>{{1, 1.0}, {4, 1.2}, {8, 1.1}, {16, 1.5}})
    rows.push_back(reuse_row("f32", 1, k, ms));
  Measurement loaded = reuse_row("f32", 1, 32, 9.0);  // under load: not a reading of the caches
  loaded.load_avg = 5;
  rows.push_back(loaded);
  auto p = LatencyPredictor::fit(rows, {false, 4, "roofline"});
  REQUIRE(p);
  CHECK(p->summary().weight_reuse_points == 4);
  CHECK(p->weight_refetch_ms_per_byte("f32", 1, copy) == 0);
  // The dip is pooled with its neighbour: 4 and 8 copies both cost (0.2 + 0.1) / 2 per copy.
  CHECK(p->weight_refetch_ms_per_byte("f32", 1, 4 * copy) * copy == Approx(0.15));
  CHECK(p->weight_refetch_ms_per_byte("f32", 1, 8 * copy) * copy == Approx(0.15));
  CHECK(p->weight_refetch_ms_per_byte("f32", 1, 100 * copy) * copy == Approx(0.5));
  CHECK(p->weight_refetch_ms_per_byte("bf16", 2, 100 * copy) * copy == Approx(0.5));  // f32's curve, the nearest threads

  // A step with 4 MB of weights: nothing extra in a run that fits one copy's working set, the
  // curve's cost per byte in a run of 20 copies' bytes.
  StepFeatures step = {};
  step.m = synthetic_sweep(conv, "conv", "f32", 1)[40];
  step.weight_bytes = 4e6;
  step.m.bytes = std::max(step.m.bytes, 4.1e6);
  const double alone = p->predict({step}).total_ms;
  StepFeatures rest = {};
  rest.m.bytes = 20 * copy;
  rest.m.threads = 1;
  const PlanPrediction in_model = p->predict({step, rest});
  CHECK(in_model.steps[0].ms == Approx(alone + 4e6 * 0.5 / copy).epsilon(0.01));
  CHECK(in_model.steps[0].how.find("weights refetched") != std::string::npos);

  // The fitted state survives the cache's JSON.
  auto back = LatencyPredictor::from_json(p->to_json());
  REQUIRE(back);
  CHECK(back->weight_refetch_ms_per_byte("f32", 1, 100 * copy) == Approx(p->weight_refetch_ms_per_byte("f32", 1, 100 * copy)));
  CHECK(back->summary().weight_reuse_points == 4);
}
