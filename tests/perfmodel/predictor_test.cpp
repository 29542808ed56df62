// The latency predictor: the roofline fit recovers known parameters from a synthetic sweep, the
// whole fit (through a store) predicts held-out points, drops loaded points, and sums a plan's
// steps with the bandwidth estimate for steps the sweep does not cover.
#include <catch2/catch.hpp>

#include "compilers/lower/to_plan.h"
#include "compilers/passes/pass_runner.h"
#include "kernels/engine.h"
#include "perfmodel/microbench/kernel_sweep.h"
#include "perfmodel/plan_features.h"
#include "perfmodel/predictor.h"
#include "perfmodel/prior_predictor.h"
#include "perfmodel/store.h"
#include "tests/perfmodel/store_samples.h"
#include "tests/perfmodel/synthetic_profile.h"
#include "tests/perfmodel/temp_dir.h"

using namespace kiln::perf;
using namespace kiln::perf::testing;

TEST_CASE("the roofline fit recovers known overhead, compute and bandwidth", "[perfmodel][predictor]") {
  const RooflineParams truth{0.02, 40e6, 15e6};  // 20 us, 40 GMAC/s, 15 GB/s
  const std::vector<Measurement> pts = synthetic_sweep(truth, "conv", "f32", 1);
  const RooflineParams fit = roofline_fit(pts);
  CHECK(fit.overhead_ms == Approx(truth.overhead_ms).epsilon(0.15));
  CHECK(fit.macs_per_ms == Approx(truth.macs_per_ms).epsilon(0.05));
  CHECK(fit.bytes_per_ms == Approx(truth.bytes_per_ms).epsilon(0.05));
}

TEST_CASE("a predictor fitted from a store predicts held-out points and drops loaded ones", "[perfmodel][predictor]") {
  TempDir dir;
  auto store = BenchmarkStore::open(dir.file("b.sqlite"));
  REQUIRE(store);
  const TargetFingerprint fp = sample_fingerprint();
  REQUIRE((*store)->target_put(fp, "measured"));
  auto run = (*store)->run_begin(fp.id, "synthetic");
  REQUIRE(run);
  const RooflineParams conv1{0.02, 40e6, 15e6}, conv2{0.03, 75e6, 25e6};
  std::vector<Measurement> rows = synthetic_sweep(conv1, "conv", "f32", 1);
  for (const Measurement& m : synthetic_sweep(conv2, "conv", "f32", 2)) rows.push_back(m);
  for (const Measurement& m : synthetic_bandwidth(20e6, 1)) rows.push_back(m);
  // Loaded points with absurd times must not move the fit.
  for (Measurement m : synthetic_sweep(conv1, "conv", "f32", 1)) {
    if (m.batch != 8 || m.in_c != 16) continue;
    m.key += " loaded";
    m.median_ms *= 10;
    m.load_avg = 6;
    rows.push_back(m);
  }
  for (const Measurement& m : rows) REQUIRE((*store)->measurement_put(fp.id, *run, m));
  auto stored = (*store)->measurements(fp.id);
  REQUIRE(stored);

  auto p = LatencyPredictor::fit(*stored);
  REQUIRE(p);
  const FitSummary& s = p->summary();
  CHECK(s.points_loaded == 4);
  CHECK_FALSE(s.loaded_kept);
  CHECK(s.points_used == 96);
  CHECK(s.groups.size() == 2);
  CHECK(s.heldout_median_roofline < 0.05);
  CHECK(s.bandwidth_points == 4);

  Measurement q = synthetic_sweep(conv2, "conv", "f32", 2)[17];
  q.in_c = q.out_c = 96;  // between grid points
  q.macs = static_cast<double>(q.batch * q.out_h * q.out_w * 96 * 96 * q.kernel_h * q.kernel_w);
  q.bytes = 4.0 * static_cast<double>(2 * q.batch * 96 * q.out_h * q.out_w + 96 * 96);
  CHECK(p->kernel_ms(q).ms == Approx(roofline_ms(conv2, q.macs, q.bytes)).epsilon(0.10));
  // An unmeasured thread count uses the nearest measured one, scaled.
  q.threads = 4;
  CHECK(p->kernel_ms(q).ms == Approx(roofline_ms(conv2, q.macs, q.bytes) / 2).epsilon(0.10));

  // A plan: one conv kernel, one view, one conversion of 1 MB (bandwidth table: 20 GB/s).
  std::vector<StepFeatures> steps(3);
  steps[0].m = synthetic_sweep(conv1, "conv", "f32", 1)[5];
  steps[1].view = true;
  steps[2].m.bytes = 1e6;
  steps[2].m.threads = 1;
  const PlanPrediction plan = p->predict(steps);
  REQUIRE(plan.steps.size() == 3);
  CHECK(plan.steps[1].ms == 0);
  CHECK(plan.steps[2].ms == Approx(s.step_overhead_ms + 1e6 / 20e6).epsilon(0.01));
  CHECK(plan.total_ms == Approx(plan.steps[0].ms + plan.steps[2].ms));
}

// A 3-channel stem runs at a tenth of a wider conv's rate: priced from its own points, not the conv group's roofline.
TEST_CASE("a stem conv is priced from the stem points where the profile has them", "[perfmodel][predictor]") {
  const RooflineParams conv{0.01, 40e6, 15e6}, stem{0.01, 4e6, 15e6};
  std::vector<Measurement> rows = synthetic_sweep(conv, "conv", "f32", 1);
  Measurement q = rows[12];
  q.in_c = 3;
  auto without = LatencyPredictor::fit(rows, {false, 4, "roofline"});
  REQUIRE(without);
  CHECK(without->kernel_ms(q).how.rfind("conv/f32/t1", 0) == 0);  // an older profile: priced as a conv
  for (Measurement m : synthetic_sweep(stem, kStemConvOp, "f32", 1)) rows.push_back(m);
  auto with = LatencyPredictor::fit(rows, {false, 4, "roofline"});
  REQUIRE(with);
  const StepPrediction priced = with->kernel_ms(q);
  CHECK(priced.how.rfind(std::string(kStemConvOp) + "/f32/t1", 0) == 0);
  CHECK(priced.ms == Approx(roofline_ms(stem, q.macs, q.bytes)).epsilon(0.10));
  q.in_c = 16;  // a wider conv keeps the conv group
  CHECK(with->kernel_ms(q).how.rfind("conv/f32/t1", 0) == 0);
}

TEST_CASE("a store without kernel points cannot be fitted", "[perfmodel][predictor]") {
  auto p = LatencyPredictor::fit(synthetic_bandwidth(20e6, 1));
  REQUIRE_FALSE(p);
  CHECK(p.error().message.find("kiln bench-target") != std::string::npos);
}

TEST_CASE("steps without a sweep counterpart are priced like the sweep's Add when it was measured", "[perfmodel][predictor]") {
  const RooflineParams add{0.004, 5e6, 25e6};  // 4 us, 25 GB/s
  std::vector<Measurement> rows = synthetic_sweep(add, "add", "f32", 1);
  for (Measurement m : synthetic_bandwidth(150e6, 1)) {  // 150 GB/s in cache, 10 GB/s from DRAM
    if (m.working_set_bytes > (int64_t{16} << 20)) m.median_ms = static_cast<double>(m.working_set_bytes) / 10e6;
    rows.push_back(m);
  }
  auto p = LatencyPredictor::fit(rows, {false, 4, "roofline"});
  REQUIRE(p);
  StepFeatures concat;
  concat.m.bytes = 2e6;
  concat.m.threads = 1;
  const StepPrediction s = p->step_ms(concat);
  CHECK(s.how == "add bandwidth");
  CHECK(s.ms == Approx(roofline_ms(add, 0, 2e6)).epsilon(0.10));  // not 2e6 / 150e6 from the read table

  // A LayerNorm in a profile taken before the sweep had LayerNorm points: streamed like the Add as before;
  // with them, priced from them (here 4x slower than the Add's stream).
  StepFeatures norm;
  norm.m.op = "layernorm";
  norm.m.dtype = "f32";
  norm.m.threads = 1;
  const Measurement shape = synthetic_sweep(add, "add", "f32", 1)[30];
  norm.m.macs = shape.macs, norm.m.bytes = shape.bytes, norm.m.batch = shape.batch;
  norm.m.in_c = norm.m.out_c = shape.in_c, norm.m.out_h = shape.out_h, norm.m.out_w = shape.out_w;
  CHECK(p->step_ms(norm).how == "add bandwidth");
  CHECK(p->step_ms(norm).ms == Approx(roofline_ms(add, 0, shape.bytes)).epsilon(0.10));
  const RooflineParams layernorm{0.004, 5e6 / 4, 25e6 / 4};
  for (const Measurement& m : synthetic_sweep(layernorm, "layernorm", "f32", 1)) rows.push_back(m);
  auto with_norms = LatencyPredictor::fit(rows, {false, 4, "roofline"});
  REQUIRE(with_norms);
  CHECK(with_norms->step_ms(norm).how.starts_with("layernorm/f32/t1"));
  CHECK(with_norms->step_ms(norm).ms == Approx(roofline_ms(layernorm, shape.macs, shape.bytes)).epsilon(0.05));
}

TEST_CASE("a fused transcendental epilogue costs its element-ops, cold weights cost their streaming", "[perfmodel][predictor]") {
  const RooflineParams conv{0.01, 40e6, 15e6}, eltwise{0.01, 2e6, 20e6};  // eltwise: 2 G element-ops/s
  std::vector<Measurement> rows = synthetic_sweep(conv, "conv", "f32", 1);
  for (const Measurement& m : synthetic_sweep(eltwise, "eltwise", "f32", 1)) rows.push_back(m);
  for (Measurement m : synthetic_bandwidth(150e6, 1)) {  // 150 GB/s in cache, 10 GB/s from DRAM
    if (m.working_set_bytes > (int64_t{16} << 20)) m.median_ms = static_cast<double>(m.working_set_bytes) / 10e6;
    rows.push_back(m);
  }
  auto p = LatencyPredictor::fit(rows, {false, 4, "roofline"});
  REQUIRE(p);
  CHECK(p->epilogue_ms(4e6, 1) == Approx(2.0).epsilon(0.05));  // 4 M element-ops at 2 G/s

  StepFeatures step = {};
  step.m = synthetic_sweep(conv, "conv", "f32", 1)[40];
  const double plain = p->predict({step}).total_ms;
  step.epilogue_ops = 4e6;
  CHECK(p->predict({step}).total_ms == Approx(plain + 2.0).epsilon(0.01));

  // A fully-connected layer's 8 MB of weights in a run that streams 100 MB: at least 8 MB / 10 GB/s.
  StepFeatures fc = {};
  fc.m = step.m;
  fc.m.macs = 2e6;  // little compute: the roofline alone says microseconds
  fc.m.bytes = 8.2e6;
  fc.weight_bytes = 8e6;
  StepFeatures rest = {};
  rest.m.bytes = 100e6;
  rest.m.threads = 1;
  const PlanPrediction cold = p->predict({fc, rest});
  CHECK(cold.steps[0].ms >= 0.8 - 1e-9);
  CHECK(cold.steps[0].how.find("weights streamed") != std::string::npos);
  CHECK(p->predict({fc}).steps[0].ms < 0.8);  // alone, the run fits in cache
}

namespace {

// The steps of a sweep shape's graph compiled for the CPU in fp32 (what the planner's GPU costs
// start from), Engine built but not run.
std::vector<StepFeatures> cpu_fp32_steps(const SweepShape& shape) {
  kiln::Graph g = sweep_graph(shape);
  kiln::PassRunOptions options;
  options.check_numerics = false;
  REQUIRE(kiln::run_passes(g, sweep_pipeline("f32"), options));
  const kiln::Plan plan = kiln::graph_to_plan(g);
  auto engine = kiln::Engine::create(plan, {1, nullptr});
  REQUIRE(engine);
  return plan_features(plan, (*engine)->steps(), 1);
}

}  // namespace

TEST_CASE("a GPU profile (threads 1, f32 and f16 groups) fits and predicts the GPU steps of a plan", "[perfmodel][predictor]") {
  auto p = LatencyPredictor::fit(synthetic_gpu_profile());
  REQUIRE(p);
  const FitSummary& s = p->summary();
  CHECK(s.points_used == static_cast<int>(synthetic_gpu_ops().size()) * 2 * 48);
  CHECK(s.groups.size() == synthetic_gpu_ops().size() * 2);  // "conv|f16|1", "conv|f32|1", ...
  CHECK(s.heldout_median_chosen < 0.05);
  for (const GroupSummary& g : s.groups) CHECK(g.threads == 1);

  // One step list over the sweep's ops: producer depthwise convs, a conv, a Gemm, pools, Add,
  // Concat and a SiLU chain, compiled for the CPU in fp32, as the GPU runs them (steps_on_gpu).
  std::vector<StepFeatures> cpu;
  SweepShape gemm{SweepOp::gemm, 8};
  gemm.m = 8, gemm.k = 512, gemm.n = 1000;
  for (const SweepShape& shape : {SweepShape{SweepOp::conv, 8, 64, 128, 28, 28, 3, 1, 1}, gemm,
                                  SweepShape{SweepOp::maxpool, 8, 64, 64, 56, 56, 3, 2, 1},
                                  SweepShape{SweepOp::global_avgpool, 8, 512, 512, 7, 7, 0, 1, 0},
                                  SweepShape{SweepOp::add, 8, 128, 128, 28, 28}, SweepShape{SweepOp::concat, 8, 96, 192, 28, 28},
                                  SweepShape{SweepOp::eltwise, 8, 96, 96, 56, 56, 2}})
    for (const StepFeatures& f : cpu_fp32_steps(shape)) cpu.push_back(f);
  for (const char* dtype : {"f16", "f32"}) {
    INFO(dtype);
    const std::vector<StepFeatures> gpu = steps_on_gpu(cpu, dtype);
    double expected = 0;
    for (const StepFeatures& f : gpu) {
      if (f.view) continue;
      REQUIRE_FALSE(f.m.op.empty());  // every step has its sweep op: the fit prices it from that group
      CHECK(f.m.threads == 1);
      expected += roofline_ms(synthetic_gpu_roofline(f.m.op, dtype), f.m.macs, f.m.bytes);
    }
    const PlanPrediction predicted = p->predict(gpu);
    for (const StepPrediction& step : predicted.steps) CHECK_THAT(step.how, !Catch::Contains("bandwidth ("));
    CHECK(predicted.total_ms == Approx(expected).epsilon(0.10));
  }
  // f16 on tensor cores: the same steps take less time than in f32.
  CHECK(p->predict(steps_on_gpu(cpu, "f16")).total_ms < p->predict(steps_on_gpu(cpu, "f32")).total_ms);
}

TEST_CASE("border points fit the conversion and epilogue groups as their time beyond the interior kernel", "[perfmodel][predictor]") {
  const RooflineParams conv{0.01, 40e6, 15e6};
  std::vector<Measurement> rows = synthetic_sweep(conv, "conv", "f32", 1);
  // The same shapes reading plain float32: 2 ns per input element more; with SiLU: 1 ns per output element more.
  for (Measurement m : synthetic_sweep(conv, "conv", "f32", 1)) {
    Measurement plain = m, silu = m;
    plain.op = std::string("conv") + kFromPlainSuffix;
    plain.median_ms += 2e-6 * static_cast<double>(m.batch * m.in_c * m.in_h * m.in_w);
    silu.op = std::string("conv") + kSiluSuffix;
    silu.median_ms += 1e-6 * static_cast<double>(m.batch * m.out_c * m.out_h * m.out_w);
    rows.push_back(plain);
    rows.push_back(silu);
  }
  auto p = LatencyPredictor::fit(rows, {false, 4, "roofline"});
  REQUIRE(p);
  CHECK(p->has_group("convert", "f32"));
  CHECK(p->has_group("epilogue", "f32"));
  CHECK_FALSE(p->has_group("conv_from_plain", "f32"));  // not a kernel of its own
  CHECK_FALSE(p->has_group("residual", "f32"));

  StepFeatures step = {};
  step.m = synthetic_sweep(conv, "conv", "f32", 1)[40];
  const double elements = static_cast<double>(step.m.batch * step.m.in_c * step.m.in_h * step.m.in_w);
  const double interior = p->predict({step}).total_ms;
  step.input_conversion = "layout";
  CHECK(p->predict({step}).total_ms == Approx(interior + 2e-6 * elements).epsilon(0.05));
  CHECK(p->predict({step}).steps[0].how.find("input layout conversion") != std::string::npos);
  step.input_conversion = "precision";  // no convert_precision points: a streaming pass, cheaper than the layout's
  const double precision = p->predict({step}).total_ms;
  CHECK(precision > interior);
  step.input_conversion.clear();
  step.epilogue_ops = 2.0 * elements;  // SiLU on as many outputs (in == out channels here)
  CHECK(p->predict({step}).total_ms == Approx(interior + 1e-6 * elements).epsilon(0.05));

  // A value leaving a oneDNN format (ToPlain) costs what the conversion into it costs, not a stream.
  StepFeatures to_plain = {};
  to_plain.op = "ToPlain";
  to_plain.input_conversion = "from layout";
  to_plain.m = conversion_features("f32", 1, step.m.batch, step.m.in_c, step.m.in_h, step.m.in_w);
  to_plain.m.op.clear();
  const PlanPrediction converted = p->predict({to_plain});
  CHECK(converted.total_ms == Approx(2e-6 * elements).epsilon(0.05));
  CHECK(converted.steps[0].how.find("convert") != std::string::npos);
  to_plain.op = "Transpose";  // NCHW <-> NHWC: the same permutation
  to_plain.input_conversion = "transpose";
  CHECK(p->predict({to_plain}).total_ms == Approx(converted.total_ms));
}

// bf16/int8 gemm points read a producer's rows; "gemm_from_f32" points convert a float32 A in the step. The
// difference is the "convert_rows" group, which prices a plan's gemm reading float32 (and only that one).
TEST_CASE("gemm border points reading float32 fit the row conversion group", "[perfmodel][predictor]") {
  const RooflineParams gemm{0.01, 200e6, 30e6};
  std::vector<Measurement> rows, with_border;
  for (int64_t m : {1, 8, 64, 512, 4096})
    for (int64_t k : {64, 256, 1024})
      for (int64_t n : {64, 256, 1000}) {
        Measurement p;
        p.kind = kKindKernel;
        p.op = "gemm";
        p.dtype = "bf16";
        p.threads = 1;
        p.batch = p.m = m, p.k = k, p.n = n;
        p.key = std::string(kGemmRowsInputKeyPrefix) + "gemm " + std::to_string(m) + "x" + std::to_string(k) + "->" + std::to_string(n);
        p.macs = static_cast<double>(m * k * n);
        p.bytes = 2.0 * static_cast<double>(m * k + k * n + m * n);
        p.median_ms = roofline_ms(gemm, p.macs, p.bytes);
        rows.push_back(p);
        Measurement border = p;  // 1 ns per A element more
        border.op = std::string("gemm") + kFromFloatSuffix;
        border.key = "f32in " + p.key.substr(std::string(kGemmRowsInputKeyPrefix).size());
        border.median_ms += 1e-6 * static_cast<double>(m * k);
        with_border.push_back(border);
      }
  with_border.insert(with_border.end(), rows.begin(), rows.end());
  auto p = LatencyPredictor::fit(with_border, {false, 4, "roofline"});
  REQUIRE(p);
  CHECK(p->has_group(kRowConversionOp, "bf16"));
  CHECK_FALSE(p->has_group("convert_precision", "bf16"));  // the convs' conversion is another group
  CHECK_FALSE(p->has_group(std::string("gemm") + kFromFloatSuffix, "bf16"));

  StepFeatures step = {};
  step.m = rows[40];  // 512 x 1024 -> 64
  const double interior = p->predict({step}).total_ms;
  CHECK(interior == Approx(step.m.median_ms).epsilon(0.05));
  step.input_conversion = "precision";
  const PlanPrediction converting = p->predict({step});
  CHECK(converting.total_ms == Approx(interior + 1e-6 * static_cast<double>(step.m.m * step.m.k)).epsilon(0.05));
  CHECK(converting.steps[0].how.find("input precision conversion") != std::string::npos);
  // A profile without such points timed its gemms converting float32 already: nothing is added.
  auto without = LatencyPredictor::fit(rows, {false, 4, "roofline"});
  REQUIRE(without);
  StepFeatures reading_rows = step;
  reading_rows.input_conversion.clear();
  CHECK(without->predict({step}).total_ms == Approx(without->predict({reading_rows}).total_ms));
}

TEST_CASE("element sizes: a GPU step's f16 moves 2 bytes per element, TF32 4", "[perfmodel][predictor]") {
  CHECK(dtype_element_bytes("f32") == 4);
  CHECK(dtype_element_bytes("tf32") == 4);
  CHECK(dtype_element_bytes("bf16") == 2);
  CHECK(dtype_element_bytes("f16") == 2);
  CHECK(dtype_element_bytes("int8") == 1);
  // A conversion into f16 streams a float32 read and an f16 write: 6 bytes per element (was 5).
  CHECK(conversion_features("f16", 1, 1, 8, 4, 4, 0).bytes == Approx(6.0 * 8 * 4 * 4));
}

// A shared VM's slow mode can flag a whole group (bench-target's thread pace probe: every
// two-thread Add of a run); the fit then prices it from the nearest thread count and says so.
TEST_CASE("a group whose every point was loaded is named in the fit summary and priced from another thread count",
          "[perfmodel][predictor]") {
  const RooflineParams add{0.004, 5e6, 25e6};
  std::vector<Measurement> rows = synthetic_sweep(add, "add", "f32", 1);
  for (Measurement m : synthetic_sweep(add, "add", "f32", 2)) {
    m.median_ms *= 3;             // the slow mode: two threads three times slower
    m.load_avg = m.threads + 1.3; // as the probe flags it
    rows.push_back(m);
  }
  for (const Measurement& m : synthetic_sweep({0.01, 40e6, 15e6}, "conv", "f32", 2)) rows.push_back(m);
  auto p = LatencyPredictor::fit(rows, {false, 4, "roofline"});
  REQUIRE(p);
  const FitSummary& s = p->summary();
  REQUIRE(s.groups_only_loaded.size() == 1);
  CHECK(s.groups_only_loaded[0].rfind("add f32 t2 (", 0) == 0);
  CHECK_FALSE(s.loaded_kept);
  Measurement two = synthetic_sweep(add, "add", "f32", 2)[10];
  const StepPrediction priced = p->kernel_ms(two);
  CHECK(priced.how.rfind("add/f32/t1", 0) == 0);  // not the slow points
  CHECK(priced.ms < two.median_ms * 1.5);
  // The summary survives the fit cache.
  auto cached = LatencyPredictor::from_json(p->to_json());
  REQUIRE(cached);
  CHECK(cached->summary().groups_only_loaded == s.groups_only_loaded);
}

TEST_CASE("T threads are never priced below 1/T of one thread's price", "[perfmodel][predictor]") {
  // A two-thread group fitted 4x faster than one thread (differences of noisy times can do that):
  // two threads are priced at half the one-thread time, the most two threads can save.
  std::vector<Measurement> rows = synthetic_sweep({0.0, 40e6, 15e6}, "conv", "f32", 1);
  for (const Measurement& m : synthetic_sweep({0.0, 160e6, 60e6}, "conv", "f32", 2)) rows.push_back(m);
  auto p = LatencyPredictor::fit(rows, {false, 4, "roofline"});
  REQUIRE(p);
  StepFeatures one = {};
  one.m = synthetic_sweep({0.0, 40e6, 15e6}, "conv", "f32", 1)[20];
  StepFeatures two = one;
  two.m.threads = 2;
  const PlanPrediction single = p->predict({one}), pair = p->predict({two});
  CHECK(pair.total_ms == Approx(single.total_ms / 2));
  CHECK(pair.steps[0].how.find("floor: one thread's price / threads") != std::string::npos);
  // A two-thread group at 1.6x stands as fitted.
  std::vector<Measurement> sane = synthetic_sweep({0.0, 40e6, 15e6}, "conv", "f32", 1);
  for (const Measurement& m : synthetic_sweep({0.0, 64e6, 24e6}, "conv", "f32", 2)) sane.push_back(m);
  auto q = LatencyPredictor::fit(sane, {false, 4, "roofline"});
  REQUIRE(q);
  CHECK(q->predict({two}).total_ms == Approx(q->predict({one}).total_ms / 1.6).epsilon(0.02));
}

TEST_CASE("residual points fit the residual group as the sum's time beyond the interior kernel", "[perfmodel][predictor]") {
  const RooflineParams conv{0.01, 40e6, 15e6};
  std::vector<Measurement> rows = synthetic_sweep(conv, "conv", "f32", 1);
  StepFeatures step = {};
  step.m = synthetic_sweep(conv, "conv", "f32", 1)[40];
  const double out_elements = static_cast<double>(step.m.batch * step.m.out_c * step.m.out_h * step.m.out_w);
  step.residual_elements = out_elements;
  // Without residual points the residual is one more input of the step: its bytes count in the roofline.
  auto without = LatencyPredictor::fit(rows, {false, 4, "roofline"});
  REQUIRE(without);
  StepFeatures more_bytes = step;
  more_bytes.residual_elements = 0;
  more_bytes.m.bytes += 4 * out_elements;
  CHECK(without->predict({step}).total_ms == Approx(without->predict({more_bytes}).total_ms));

  // The same shapes with a fused residual sum: 3 ns per output element more.
  for (Measurement m : synthetic_sweep(conv, "conv", "f32", 1)) {
    m.op = std::string("conv") + kResidualSuffix;
    m.median_ms += 3e-6 * static_cast<double>(m.batch * m.out_c * m.out_h * m.out_w);
    rows.push_back(m);
  }
  auto p = LatencyPredictor::fit(rows, {false, 4, "roofline"});
  REQUIRE(p);
  CHECK(p->has_group("residual", "f32"));
  CHECK_FALSE(p->has_group("conv_sum", "f32"));  // not a kernel of its own
  StepFeatures interior = step;
  interior.residual_elements = 0;
  const PlanPrediction with = p->predict({step});
  CHECK(with.total_ms == Approx(p->predict({interior}).total_ms + 3e-6 * out_elements).epsilon(0.05));
  CHECK(with.steps[0].how.find("fused residual") != std::string::npos);
}

TEST_CASE("int8 convs reading s8 add the signed group's time, points measured on s8 before the u8 sweep are superseded",
          "[perfmodel][predictor]") {
  const RooflineParams conv{0.01, 40e6, 15e6};
  std::vector<Measurement> rows;
  for (Measurement m : synthetic_sweep(conv, "conv", "int8", 1)) {
    Measurement old = m;  // keyed as before 2026-11-29 (on s8; as before 12-07, writing float32): 30% slower
    old.median_ms *= 1.3;
    rows.push_back(old);
    m.key = kInt8CodesOutU8KeyPrefix + m.key;
    rows.push_back(m);
  }
  const std::vector<Measurement> interior = synthetic_sweep(conv, "conv", "int8", 1);
  StepFeatures step = {};
  step.m = interior[40];
  auto p = LatencyPredictor::fit(rows, {false, 4, "roofline"});
  REQUIRE(p);
  CHECK(p->summary().points_superseded == static_cast<int>(interior.size()));
  CHECK(p->predict({step}).total_ms == Approx(roofline_ms(conv, step.m.macs, step.m.bytes)).epsilon(0.03));
  // Alone, the old points still price the group.
  std::vector<Measurement> old_only;
  for (const Measurement& m : rows)
    if (!m.key.starts_with(kInt8CodesOutU8KeyPrefix)) old_only.push_back(m);
  auto q = LatencyPredictor::fit(old_only, {false, 4, "roofline"});
  REQUIRE(q);
  CHECK(q->summary().points_superseded == 0);
  CHECK(q->predict({step}).total_ms == Approx(1.3 * roofline_ms(conv, step.m.macs, step.m.bytes)).epsilon(0.03));

  // The same for bf16/int8 gemm points that converted a float32 A in the step (int8 on AVX2 without VNNI:
  // also those timed as the repacking matmul, keyed "1x1conv "), once points reading rows exist, and for max pools timed on oneDNN's pools, once points on kiln's own exist: per group, so a
  // precision whose old pool points have no new ones beside them keeps them. int8 pools keyed "codes "
  // (12-06/07) had no int8 reader, so they ran on floats: superseded by those an int8 conv reads; and every
  // pool point behind a depthwise producer ("codes ", "read codes ") by those whose input is warm ("warm ").
  struct Superseding {
    std::string op, dtype, prefix;
    double old_factor;
    std::string other_dtype;  // a group of the same op with old points only, or ""
    std::string old_prefix;
  };
  for (const Superseding& c : {Superseding{"gemm", "int8", kGemmRowsInputKeyPrefix, 3.0, "", ""},
                               Superseding{"gemm", "int8", kGemmRowsInputKeyPrefix, 1.5, "f32", kGemmAsConvKeyPrefix},
                               Superseding{"gemm", "bf16", kGemmRowsInputKeyPrefix, 1.8, "f32", ""},
                               Superseding{"maxpool", "bf16", kPoolWarmCodesKeyPrefix, 2.5, "f32", ""},
                               Superseding{"maxpool", "int8", kPoolWarmInt8CodesKeyPrefix, 1.4, "f32", ""},
                               Superseding{"maxpool", "int8", kPoolWarmInt8CodesKeyPrefix, 4.5, "f32", kPoolCodesKeyPrefix},
                               Superseding{"maxpool", "int8", kPoolWarmInt8CodesKeyPrefix, 2.0, "f32", kPoolInt8CodesKeyPrefix},
                               Superseding{"maxpool", "bf16", kPoolWarmCodesKeyPrefix, 1.7, "int8", kPoolCodesKeyPrefix},
                               Superseding{"maxpool", "f32", kPoolWarmCodesKeyPrefix, 1.6, "bf16", ""},
                               Superseding{"maxpool", "f32", kPoolWarmCodesKeyPrefix, 1.5, "bf16", kPoolCodesKeyPrefix}}) {
    INFO(c.op << " " << c.dtype << " old '" << c.old_prefix << "'");
    std::vector<Measurement> case_rows;
    if (!c.other_dtype.empty()) case_rows = synthetic_sweep(conv, c.op, c.other_dtype, 1);
    for (Measurement m : synthetic_sweep(conv, c.op, c.dtype, 1)) {
      Measurement old = m;
      old.key = c.old_prefix + old.key;
      old.median_ms *= c.old_factor;
      case_rows.push_back(old);
      m.key = c.prefix + m.key;
      case_rows.push_back(m);
    }
    StepFeatures case_step = {};
    case_step.m = synthetic_sweep(conv, c.op, c.dtype, 1)[40];
    auto fit = LatencyPredictor::fit(case_rows, {false, 4, "roofline"});
    REQUIRE(fit);
    CHECK(fit->summary().points_superseded == static_cast<int>(interior.size()));
    CHECK(fit->predict({case_step}).total_ms == Approx(roofline_ms(conv, case_step.m.macs, case_step.m.bytes)).epsilon(0.03));
  }

  // Signed points: 15% more than the u8 interior. Without them a signed step is priced as an interior one.
  StepFeatures signed_step = step;
  signed_step.signed_input = true;
  CHECK(p->predict({signed_step}).total_ms == Approx(p->predict({step}).total_ms));
  for (Measurement m : interior) {
    m.op = std::string("conv") + kFromSignedSuffix;
    m.key = "s8in " + m.key;
    m.median_ms *= 1.15;
    rows.push_back(m);
  }
  auto s = LatencyPredictor::fit(rows, {false, 4, "roofline"});
  REQUIRE(s);
  CHECK(s->has_group(std::string("conv") + kSignedInputGroupSuffix, "int8"));
  CHECK_FALSE(s->has_group(std::string("conv") + kFromSignedSuffix, "int8"));  // not a kernel of its own
  const PlanPrediction priced = s->predict({signed_step});
  CHECK(priced.total_ms == Approx(1.15 * s->predict({step}).total_ms).epsilon(0.05));
  CHECK(priced.steps[0].how.find("signed input") != std::string::npos);
  CHECK(s->predict({step}).total_ms == Approx(p->predict({step}).total_ms).epsilon(0.01));
}

TEST_CASE("a u8 max pool is priced from the float32 pools at a quarter of their compares, bf16 at half", "[perfmodel][predictor]") {
  // The sweep pools float32 only; a compute-bound float32 pool point priced again as int8 and bf16.
  const std::vector<Measurement> rows = synthetic_sweep({0.0, 2e6, 15e6}, "maxpool", "f32", 1);
  auto p = LatencyPredictor::fit(rows, {false, 4, "roofline"});
  REQUIRE(p);
  Measurement pool = rows[20];
  pool.bytes = pool.macs / 4;  // compute-bound at any element size
  const double f32 = p->kernel_ms(pool).ms;
  CHECK(f32 == Approx(roofline_ms({0.0, 2e6, 15e6}, pool.macs, pool.bytes)).epsilon(0.02));
  auto q = LatencyPredictor::fit(synthetic_sweep({0.0, 2e6, 15e6}, "conv", "f32", 1), {false, 4, "roofline"});
  REQUIRE(q);
  Measurement conv_f32 = pool;
  conv_f32.op = "conv";
  for (const auto& [dtype, share] : std::vector<std::pair<std::string, double>>{{"int8", 0.25}, {"bf16", 0.5}}) {
    Measurement reduced = pool;
    reduced.dtype = dtype;
    reduced.bytes = pool.bytes * dtype_element_bytes(dtype) / 4;
    INFO(dtype);
    CHECK(p->kernel_ms(reduced).ms == Approx(share * f32).epsilon(0.02));
    // Other ops priced from float32 keep their operation count (a conv's MACs are its MACs).
    Measurement conv = reduced;
    conv.op = "conv";
    CHECK(q->kernel_ms(conv).ms == Approx(q->kernel_ms(conv_f32).ms).epsilon(0.02));
  }
}

TEST_CASE("a batched conv beyond the sweep's largest point is priced as batches of a measured batch", "[perfmodel][predictor]") {
  // Batch-8 points run at the roofline, batch-1 points 1.5x slower (a per-image cost the roofline
  // cannot fit): a batch-32 layer with 4x the largest point's work must be priced as four of its
  // batch-8 quarters, not from neighbours in feature space that include the slow batch-1 points.
  const RooflineParams conv{0.01, 40e6, 15e6};
  std::vector<Measurement> rows = synthetic_sweep(conv, "conv", "f32", 1);
  double max_macs = 0;
  for (Measurement& m : rows) {
    if (m.batch == 1) m.median_ms *= 1.5;
    max_macs = std::max(max_macs, m.macs);
  }
  auto p = LatencyPredictor::fit(rows, {false, 4, "knn"});
  REQUIRE(p);
  const auto largest = std::max_element(rows.begin(), rows.end(), [](const Measurement& a, const Measurement& b) { return a.macs < b.macs; });
  REQUIRE(largest->batch == 8);
  Measurement big = *largest;
  big.batch = 32;
  big.macs *= 4;
  big.bytes *= 4;
  const StepPrediction whole = p->kernel_ms(big), quarter = p->kernel_ms(*largest);
  CHECK(whole.ms == Approx(4 * quarter.ms).epsilon(1e-9));
  CHECK(whole.ms == Approx(4 * largest->median_ms).epsilon(0.05));
  CHECK(whole.how.find("4 x batch 8") != std::string::npos);
  CHECK(quarter.how.find(" x batch ") == std::string::npos);
  // Within the sweep's work a layer is priced whole.
  Measurement within = *largest;
  within.batch = 16;
  within.macs = max_macs / 2;
  CHECK(p->kernel_ms(within).how.find(" x batch ") == std::string::npos);
}
