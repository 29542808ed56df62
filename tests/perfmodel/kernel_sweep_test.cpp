// The kernel sweep: the graph of a point (producer + op + activation), the pipelines per dtype,
// and one measured point with every feature filled in.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "compilers/lower/to_plan.h"
#include "compilers/passes/pass_runner.h"
#include "kernels/cpu/isa.h"
#include "kernels/engine.h"
#include "kernels/onednn/onednn_kernels.h"
#include "perfmodel/microbench/kernel_sweep.h"

using namespace kiln;
using namespace kiln::perf;

namespace {

// The shape's sweep graph compiled as the sweep compiles `dtype` (int8 calibrated on one seeded
// sample per input), on a one-thread Engine.
std::unique_ptr<Engine> compiled_sweep_engine(const SweepShape& shape, const std::string& dtype) {
  Graph g = sweep_graph(shape);
  CalibrationSet calibration;
  for (ValueId in : g.inputs) {
    Shape sample = sym_shape_concrete(g.value(in).type.shape);
    sample[0] = 1;
    calibration.inputs.push_back(sweep_random_tensor(sample, 7));
  }
  PassRunOptions options;
  options.check_numerics = false;
  options.int8.calibration = &calibration;
  REQUIRE(run_passes(g, sweep_pipeline(dtype), options));
  auto engine = Engine::create(graph_to_plan(g), {1, nullptr});
  REQUIRE(engine);
  return std::move(*engine);
}

}  // namespace

TEST_CASE("a sweep graph is producer + op (+ ReLU) and compiles without depth-first fusion", "[perfmodel][sweep]") {
  const SweepShape conv{SweepOp::conv, 1, 16, 32, 14, 14, 3, 2, 1};
  const Graph g = sweep_graph(conv);
  REQUIRE(g.nodes.size() == 4);
  CHECK(g.nodes[0].name == "producer");
  CHECK(g.nodes[1].name == "producer_relu");  // an int8 producer writes u8, as in a ReLU network
  CHECK(g.nodes[2].op == OpKind::Conv);
  CHECK(g.nodes[3].op == OpKind::Relu);
  SweepShape signed_conv = conv;
  signed_conv.signed_input = true;
  CHECK(sweep_graph(signed_conv).nodes.size() == 3);
  SweepShape gemm{SweepOp::gemm, 8};
  gemm.m = 8;
  gemm.k = 64;
  gemm.n = 32;
  CHECK(sweep_graph(gemm).nodes.size() == 1);  // a Gemm reads plain rows anyway
  for (const char* dtype : {"f32", "bf16", "int8"}) {
    const auto passes = sweep_pipeline(dtype);
    CHECK(std::find(passes.begin(), passes.end(), "fuse_depth_first") == passes.end());
    CHECK(std::find(passes.begin(), passes.end(), "fuse_activation") != passes.end());
  }
  const auto bf16 = sweep_pipeline("bf16");
  CHECK(std::find(bf16.begin(), bf16.end(), "mixed_precision_bf16") != bf16.end());
  const auto int8 = sweep_pipeline("int8");
  CHECK(std::find(int8.begin(), int8.end(), "quantize_int8") != int8.end());
}

TEST_CASE("int8 sweep convs read u8 and are keyed so, signed_input ones read s8, in int8 only", "[perfmodel][sweep]") {
  const SweepShape conv{SweepOp::conv, 1, 16, 32, 14, 14, 3, 1, 1};
  SweepShape signed_conv = conv;
  signed_conv.signed_input = true;
  // What the conv reads is what the producer's step writes, once compiled as the int8 sweep compiles it.
  for (const SweepShape& shape : {conv, signed_conv}) {
    const auto engine = compiled_sweep_engine(shape, "int8");
    std::string producer_layout;
    for (const EngineStep& s : engine->steps())
      if (s.node.rfind(kSweepProducerNode, 0) == 0) producer_layout = s.output_layout;
    INFO(producer_layout);
    CHECK(producer_layout.find(shape.signed_input ? ":s8" : ":u8") != std::string::npos);
  }
  CHECK(sweep_record(conv, "int8", 1, 1).key == std::string(kUnsignedInputKeyPrefix) + sweep_key(conv));
  CHECK(sweep_record(sweep_as_run(conv, "int8"), "int8", 1, 1).key == std::string(kInt8CodesOutU8KeyPrefix) + sweep_key(conv));
  CHECK(sweep_record(conv, "f32", 1, 4).key == sweep_key(conv));
  CHECK(sweep_record(sweep_as_run(conv, "f32"), "f32", 1, 4).key == sweep_key(conv));
  const Measurement s8 = sweep_record(signed_conv, "int8", 1, 1);
  CHECK(s8.key == "s8in " + sweep_key(conv));
  CHECK(s8.op == std::string("conv") + kFromSignedSuffix);
  // The full plan: signed points in int8 only; every other int8 conv point keyed as reading u8.
  BenchPlanOptions options;
  options.threads = {1};
  int signed_points = 0;
  for (const BenchPoint& p : sweep_points(fingerprint_local(), options, nullptr)) {
    const Measurement& m = p.record;
    if (m.op.ends_with(kFromSignedSuffix)) {
      ++signed_points;
      CHECK(m.dtype == "int8");
    }
    if (m.dtype == "int8" && (m.op == "conv" || m.op == "depthwise_conv")) CHECK(m.key.starts_with(kInt8CodesOutU8KeyPrefix));
    // Every point is keyed as current, so none is superseded by the points of its own plan.
    INFO(m.key << " " << m.op << " " << m.dtype);
    CHECK(m.key.starts_with(current_key_prefix(m.op, m.dtype)));
  }
  if (fingerprint_dtype_unsupported(fingerprint_local(), "int8").empty()) CHECK(signed_points == 40);
}

// A model's max pool is read by a conv, so in an int8 region it passes codes. The sweep's pool has a
// reader too (excluded from its time): without one the int8 pool's output left the graph as floats
// and the point timed oneDNN's float pool, 2-8x slower than the model's (12-06/07 stores).
TEST_CASE("a sweep max pool runs on codes as in a model, its reader not timed", "[perfmodel][sweep]") {
  SweepShape pool{SweepOp::maxpool, 2, 32, 32, 28, 28, 3, 2, 1};
  for (const char* dtype : {"f32", "bf16", "int8"}) {
    INFO(dtype);
    const auto engine = compiled_sweep_engine(pool, dtype);
    int timed = 0, readers = 0;
    for (const EngineStep& s : engine->steps()) {
      if (s.node.rfind(kSweepReaderNode, 0) == 0) {
        readers += s.op == "Conv";  // and the conversion of its output to plain
        CHECK_FALSE(sweep_is_op_step(s));
      }
      if (!sweep_is_op_step(s)) continue;
      ++timed;
      CHECK(s.op == "MaxPool");
      CHECK(s.kernel == "cpu.max_pool_codes");
      INFO(s.output_layout);
      if (std::string(dtype) == "int8") CHECK(s.output_layout.find(":u8") != std::string::npos);
      // bf16 values only where oneDNN 2.6 computes bf16 (AVX-512).
      if (std::string(dtype) == "bf16" && cpu_has_bf16_compute()) CHECK(s.output_layout.find(":bf16") != std::string::npos);
    }
    CHECK(timed == 1);
    CHECK(readers == 1);
  }
  // Its input is warm in the caches, as a model's previous layer leaves it: the producer widens 16 float32
  // channels (a depthwise producer read as many as the pool, in float32, and evicted what it wrote).
  for (const int64_t channels : {int64_t{32}, int64_t{256}, int64_t{8}}) {
    SweepShape wide = pool;
    wide.in_c = wide.out_c = channels;
    const Graph g = sweep_graph(wide);
    REQUIRE(g.inputs.size() == 1);
    CHECK(sym_shape_concrete(g.value(g.inputs[0]).type.shape) == Shape{2, std::min<int64_t>(channels, 16), 28, 28});
  }
}

// A model's Concat is read by a conv, so in an int8 region it joins the codes its producers write at one
// scale, in bf16 bfloat16. The sweep's Concat has a reader too (not timed): with its output leaving the graph,
// an int8 Concat joined floats and the concat points were float32 only (SqueezeNet int8's Concats of codes
// were priced from them at 2-3x their time).
TEST_CASE("a sweep concat joins codes as in a model, its reader not timed", "[perfmodel][sweep]") {
  const SweepShape concat{SweepOp::concat, 2, 32, 64, 14, 14};
  for (const char* dtype : {"f32", "bf16", "int8"}) {
    INFO(dtype);
    const auto engine = compiled_sweep_engine(concat, dtype);
    int timed = 0, readers = 0;
    for (const EngineStep& s : engine->steps()) {
      readers += s.node.rfind(kSweepReaderNode, 0) == 0 && s.op == "Conv";
      if (!sweep_is_op_step(s)) continue;
      ++timed;
      CHECK(s.op == "Concat");
      INFO(s.kernel << " writes " << s.output_layout);
      if (std::string(dtype) == "int8") CHECK(s.output_layout.find(":u8*") != std::string::npos);
      if (std::string(dtype) == "bf16" && cpu_has_bf16_compute()) CHECK(s.output_layout.find(":bf16") != std::string::npos);
    }
    CHECK(timed == 1);
    CHECK(readers == 1);
    CHECK(sweep_record(concat, dtype, 1, 1).key == kConcatReadKeyPrefix + sweep_key(concat));
    CHECK(current_key_prefix("concat", dtype) == kConcatReadKeyPrefix);
  }
  CHECK(sweep_op_has_precisions(SweepOp::concat));
}

// An int8 conv reading a float32 value (one that something else reads too, so it stays float32)
// quantizes it in its step. The sweep's float-input point must do the same: a bare Concat of int8
// producers joined their codes, and a ConcatAffine read only by the int8 conv writes codes, so the
// conv converted nothing (stores before 2026-12-08).
TEST_CASE("an int8 sweep conv reading float32 quantizes it in its own step", "[perfmodel][sweep]") {
  SweepShape conv{SweepOp::conv, 1, 64, 32, 14, 14, 1, 1, 0};
  conv.float_input = true;
  const auto engine = compiled_sweep_engine(conv, "int8");
  std::string read_layout;  // what the last producer step writes: the conv's input
  int timed = 0;
  for (const EngineStep& s : engine->steps()) {
    if (s.node.rfind(kSweepProducerNode, 0) == 0) read_layout = s.output_layout;
    if (!sweep_is_op_step(s)) continue;
    ++timed;
    CHECK(s.op == "Conv");
  }
  INFO(read_layout);
  CHECK(timed == 1);
  CHECK(read_layout.find(":u8") == std::string::npos);
  CHECK(read_layout.find(":s8") == std::string::npos);
  CHECK(sweep_record(conv, "int8", 1, 1).key == std::string(kQuantizedFloatInputKeyPrefix) + sweep_key(conv));
  CHECK(sweep_record(conv, "bf16", 1, 2).key == sweep_key(conv));
  CHECK(sweep_record(sweep_as_run(conv, "int8"), "int8", 1, 1).key == std::string(kInt8CodesOutQuantizedKeyPrefix) + sweep_key(conv));
  CHECK(current_key_prefix(std::string("conv") + kFromFloatSuffix, "int8") == kInt8CodesOutQuantizedKeyPrefix);
}

// A model's interior int8 conv writes codes for the next layer. The sweep's int8 convs have a reader too
// (not timed): with their output leaving the graph they wrote float32, 4x the bytes (SqueezeNet's 16->64
// 3x3 55x55 b32, one thread: 3.9 ms in the sweep, 2.8 in the model). Float32 and bf16 points are as before.
TEST_CASE("int8 sweep convs write codes for a reader, as in a model", "[perfmodel][sweep]") {
  const SweepShape conv{SweepOp::conv, 1, 16, 32, 14, 14, 3, 1, 1};
  SweepShape silu = conv, depthwise{SweepOp::depthwise_conv, 1, 32, 32, 14, 14, 3, 1, 1};
  silu.silu = true;
  for (const SweepShape& shape : {conv, silu, depthwise}) {
    const SweepShape as_run = sweep_as_run(shape, "int8");
    CHECK(as_run.codes_out);
    CHECK_FALSE(sweep_as_run(shape, "f32").codes_out);
    CHECK_FALSE(sweep_as_run(shape, "bf16").codes_out);
    const auto engine = compiled_sweep_engine(as_run, "int8");
    int timed = 0, readers = 0;
    for (const EngineStep& s : engine->steps()) {
      readers += s.node.rfind(kSweepReaderNode, 0) == 0 && s.op == "Conv";
      if (!sweep_is_op_step(s) || s.op != "Conv") continue;
      ++timed;
      INFO(s.node << " writes " << s.output_layout);
      // u8 after ReLU, s8 after SiLU (negative values).
      CHECK(s.output_layout.find(shape.silu ? ":s8*" : ":u8*") != std::string::npos);
    }
    CHECK(timed == 1);
    CHECK(readers == 1);
    CHECK(sweep_record(as_run, "int8", 1, 1).key.starts_with(kInt8CodesOutKeyPrefix));
  }
  // The weight-reuse points (several copies) keep their float32 outputs and keys.
  SweepShape copies = conv;
  copies.copies = 3;
  CHECK_FALSE(sweep_as_run(copies, "int8").codes_out);
}

// Where oneDNN's int8 matmul repacks its weights on every call, kiln runs int8 Gemm/MatMul as a 1x1
// convolution (kernels/onednn/matmul.cpp): the sweep's int8 gemm points time that, and say so in
// their key, so the points a store holds from the matmul are told apart and superseded.
TEST_CASE("int8 gemm points are keyed by how kiln runs the product here", "[perfmodel][sweep]") {
  SweepShape gemm{SweepOp::gemm, 1};
  gemm.m = 1;
  gemm.k = 1280;
  gemm.n = 1000;
  const std::string as_conv = int8_matmul_packs_weights_per_call() ? kGemmAsConvKeyPrefix : "";
  CHECK(sweep_record(gemm, "int8", 1, 1).key == as_conv + sweep_key(gemm));
  CHECK(sweep_record(gemm, "f32", 1, 4).key == sweep_key(gemm));
  SweepShape rows = gemm;
  rows.rows_input = true;
  CHECK(sweep_record(rows, "int8", 1, 1).key == kGemmRowsInputKeyPrefix + as_conv + sweep_key(gemm));
  CHECK(current_key_prefix("gemm", "int8") == kGemmRowsInputKeyPrefix);
  CHECK(current_key_prefix("conv", "int8") == kInt8CodesOutU8KeyPrefix);
  CHECK(current_key_prefix(kStemConvOp, "int8") == kInt8CodesOutKeyPrefix);
  CHECK(current_key_prefix("convert_precision", "int8").empty());
  CHECK(current_key_prefix("conv", "f32").empty());
  // Max pools run on kiln's own pool over codes in every precision, and say so.
  SweepShape pool{SweepOp::maxpool, 8};
  pool.in_c = pool.out_c = 64;
  pool.h = pool.w = 28;
  pool.kernel = pool.stride = 2;
  CHECK(sweep_record(pool, "bf16", 1, 2).key == kPoolWarmCodesKeyPrefix + sweep_key(pool));
  CHECK(sweep_record(pool, "int8", 1, 1).key == kPoolWarmInt8CodesKeyPrefix + sweep_key(pool));
  CHECK(sweep_record(pool, "f32", 1, 4).key == kPoolWarmCodesKeyPrefix + sweep_key(pool));
  CHECK(current_key_prefix("maxpool", "bf16") == kPoolWarmCodesKeyPrefix);
  CHECK(current_key_prefix("maxpool", "int8") == kPoolWarmInt8CodesKeyPrefix);
  CHECK(current_key_prefix("maxpool", "f32") == kPoolWarmCodesKeyPrefix);
  CHECK(current_key_prefix("avgpool", "f32").empty());
}

// DenseNet's BatchNorm+ReLU over the joined features reads its int8 producers' codes (quantize_int8 gives
// a conv read only by ConcatAffines an output scale): the sweep's int8 ConcatAffine points time that, with
// no conversion before the timed step, and say so in their key; bf16 and float32 points keep theirs.
TEST_CASE("an int8 sweep ConcatAffine reads its producers' codes and is keyed so", "[perfmodel][sweep]") {
  const SweepShape joined{SweepOp::concat_affine, 2, 16, 64, 14, 14, 4};
  const auto engine = compiled_sweep_engine(joined, "int8");
  int timed = 0, conversions = 0;
  for (const EngineStep& s : engine->steps()) {
    conversions += s.op == "ToPlain" && s.node.rfind(kSweepReaderNode, 0) != 0;
    if (sweep_is_op_step(s)) {
      ++timed;
      CHECK(s.op == "ConcatAffine");
    }
    if (s.op == "Conv" && s.node.rfind(kSweepProducerNode, 0) == 0 && cpu_isa_available(CpuIsa::avx512)) {
      INFO(s.node << " writes " << s.output_layout);
      CHECK((s.output_layout.find(":u8*") != std::string::npos || s.output_layout.find(":s8*") != std::string::npos));
    }
  }
  CHECK(timed == 1);
  // Where oneDNN's convs write NHWC (AVX-512; AVX2 picks channel blocks, read through plain floats).
  if (cpu_isa_available(CpuIsa::avx512)) CHECK(conversions == 0);
  CHECK(sweep_record(joined, "int8", 1, 1).key == kConcatAffineCodesKeyPrefix + sweep_key(joined));
  CHECK(sweep_record(joined, "bf16", 1, 2).key == sweep_key(joined));
  CHECK(current_key_prefix("concat_affine", "int8") == kConcatAffineCodesKeyPrefix);
  CHECK(current_key_prefix("concat_affine", "f32").empty());
}

// A ResNet block's residual conv is read by the next block's conv: the sweep's residual points are too, so an
// int8 one writes u8 codes and sums its residual's codes in place (with its output leaving the graph it wrote
// float32 and first dequantized the residual into that buffer: 3.10 vs 1.7-1.9 ms at 128->512 28x28 b8).
TEST_CASE("a residual sweep conv is read by a conv and in int8 writes codes under its own key", "[perfmodel][sweep]") {
  SweepShape sum{SweepOp::conv, 2, 32, 64, 14, 14, 1};
  sum.residual = true;
  const auto engine = compiled_sweep_engine(sum, "int8");
  int timed = 0;
  for (const EngineStep& s : engine->steps()) {
    if (!sweep_is_op_step(s)) continue;
    ++timed;
    CHECK(s.op == "Conv");
    INFO(s.node << " writes " << s.output_layout);
    if (cpu_isa_available(CpuIsa::avx512)) CHECK(s.output_layout.find(":u8*") != std::string::npos);
  }
  CHECK(timed == 1);
  CHECK(sweep_record(sum, "int8", 1, 1).key.starts_with(kResidualChainedKeyPrefix));
  CHECK(sweep_record(sum, "f32", 1, 4).key == kResidualChainedKeyPrefix + sweep_key(sum));
  CHECK(current_key_prefix(std::string("conv") + kResidualSuffix, "bf16") == kResidualChainedKeyPrefix);
  CHECK(current_key_prefix("conv", "f32").empty());
}

TEST_CASE("a measured sweep point has its timing and features", "[perfmodel][sweep]") {
  const TargetFingerprint fp = fingerprint_local();
  BenchPlanOptions options;
  options.quick = true;
  options.threads = {1};
  options.timing = {1, 3, 20, 5};
  std::vector<SkippedBenchmark> skipped;
  std::vector<BenchPoint> points = sweep_points(fp, options, &skipped);
  const auto conv = std::find_if(points.begin(), points.end(), [](const BenchPoint& p) {
    return p.record.op == "conv" && p.record.dtype == "f32";
  });
  REQUIRE(conv != points.end());
  Measurement m = conv->record;
  CHECK(m.macs > 0);
  CHECK(m.bytes > 0);
  CHECK(m.out_h > 0);
  const Status ok = conv->measure(m);
  INFO((ok ? "" : ok.message()));
  REQUIRE(ok);
  CHECK(m.runs >= 3);
  CHECK(m.median_ms > 0);
  CHECK(m.p10_ms <= m.median_ms);
  CHECK(m.median_ms <= m.p90_ms);
  CHECK(m.total_median_ms >= m.median_ms);
  CHECK(m.kernel.find("conv") != std::string::npos);
  CHECK(m.kernel.find("+") == std::string::npos);  // the producer and the fused ReLU are not in it
  CHECK_FALSE(m.backend.empty());
  CHECK(m.throughput > 0);
  // Dtypes this CPU lacks are skipped with a reason, the others planned.
  for (const char* d : {"bf16", "int8"}) {
    const bool planned = std::any_of(points.begin(), points.end(), [&](const BenchPoint& p) { return p.record.dtype == d; });
    const bool said_why = std::any_of(skipped.begin(), skipped.end(), [&](const SkippedBenchmark& s) { return s.dtype == d; });
    CHECK(planned != said_why);
  }
}

// A bf16/int8 Linear inside an MLP reads the previous one's output in its own precision (bfloat16 rows,
// s8 codes): the sweep's interior bf16/int8 gemm points time a MatMul + bias reading a producer MatMul's
// output with nothing converted between (keyed "rows in "); a gemm reading float32 is a border point
// ("gemm_from_f32", keyed "f32in "), in bf16 and int8 only, whose A is converted inside the timed step.
TEST_CASE("bf16/int8 sweep gemms read a producer's rows or codes, float32 A is a border point", "[perfmodel][sweep]") {
  SweepShape gemm{SweepOp::gemm, 64};
  gemm.m = 64;
  gemm.k = 96;
  gemm.n = 128;
  SweepShape rows = gemm;
  rows.rows_input = true;
  for (const char* dtype : {"bf16", "int8"}) {
    INFO(dtype);
    // oneDNN 2.6 has no bf16 matmul below AVX-512; without it, int8 MatMuls run as 1x1 convs (AVX2 without
    // VNNI) whose layouts this test does not pin down: the graph is still built, the keys below still hold.
    if (!cpu_isa_available(CpuIsa::avx512) || (std::string(dtype) == "bf16" && !cpu_has_bf16_compute())) continue;
    const auto engine = compiled_sweep_engine(rows, dtype);
    int timed = 0, conversions = 0;
    std::string read_layout;
    for (const EngineStep& s : engine->steps()) {
      if (s.node.rfind(kSweepProducerNode, 0) == 0) read_layout = s.output_layout;
      if (s.op == "ToPlain" && timed == 0) ++conversions;  // before the timed step: between producer and op
      if (!sweep_is_op_step(s)) continue;
      ++timed;
      CHECK(s.op == "MatMul");
      CHECK(s.kernel == "onednn.matmul");
      INFO("the op writes " << s.output_layout);  // for its reader MatMul, as an MLP's first Linear does
      CHECK(s.output_layout.find(std::string(dtype) == "bf16" ? ":bf16" : ":s8*") != std::string::npos);
    }
    CHECK(timed == 1);  // the bias is fused into the MatMul
    CHECK(conversions == 0);
    INFO("the producer writes " << read_layout);
    CHECK(read_layout.find(std::string(dtype) == "bf16" ? ":bf16" : ":s8*") != std::string::npos);
    CHECK(sweep_record(rows, dtype, 1, 1).key.starts_with(kGemmRowsInputKeyPrefix));
    CHECK(sweep_record(rows, dtype, 1, 1).op == "gemm");
  }
  SweepShape from_float = gemm;
  from_float.float_input = true;
  CHECK(sweep_graph(from_float).nodes.size() == 1);  // a Gemm on the graph input, writing float32
  CHECK(sweep_record(from_float, "bf16", 1, 2).bytes ==
        2.0 * (64 * 96 + 96 * 128) + 4.0 * 64 * 128 + 4.0 * 128);
  CHECK(sweep_record(rows, "bf16", 1, 2).bytes == 2.0 * (64 * 96 + 96 * 128 + 64 * 128) + 4.0 * 128);
  CHECK(sweep_record(from_float, "bf16", 1, 2).op == std::string("gemm") + kFromFloatSuffix);
  CHECK(sweep_record(from_float, "bf16", 1, 2).key == "f32in " + sweep_key(gemm));
  CHECK(sweep_record(from_float, "int8", 1, 1).key.starts_with(kQuantizedFloatInputKeyPrefix));
  // sweep_points times every gemm shape in bf16/int8 on rows, in float32 as it is.
  const TargetFingerprint fp = fingerprint_local();
  BenchPlanOptions options;
  options.quick = true;
  options.threads = {1};
  int rows_points = 0, f32_points = 0;
  for (const BenchPoint& p : sweep_points(fp, options, nullptr)) {
    if (p.record.op != "gemm") continue;
    const bool on_rows = p.record.key.starts_with(kGemmRowsInputKeyPrefix);
    CHECK(on_rows == (p.record.dtype != "f32"));
    ++(on_rows ? rows_points : f32_points);
  }
  int reduced_dtypes = 0;
  for (const char* d : {"bf16", "int8"}) reduced_dtypes += fingerprint_dtype_unsupported(fp, d).empty();
  CHECK(f32_points > 0);
  CHECK(rows_points == f32_points * reduced_dtypes);
}

// ConvNeXt's norm: a Transpose to NHWC rows (a view of the producer's NHWC output), LayerNorm over the
// channels, the next Linear reading it. The sweep times the LayerNorm alone; in bf16 it reads and writes
// bfloat16 rows as in the model, in float32 floats; int8 pipelines keep it in float32 (no int8 points).
TEST_CASE("a sweep LayerNorm reads NHWC rows through a view and writes what its MatMul reads", "[perfmodel][sweep]") {
  const SweepShape norm{SweepOp::layernorm, 2, 96, 96, 14, 14};
  CHECK(sweep_key(norm) == "layernorm 96 14x14 b2");
  CHECK(sweep_record(norm, "bf16", 1, 2).bytes == 2.0 * 2 * (2 * 96 * 14 * 14) + 8.0 * 96);
  for (const char* dtype : {"bf16", "f32"}) {
    INFO(dtype);
    const auto engine = compiled_sweep_engine(norm, dtype);
    int timed = 0;
    std::string read_layout;
    for (const EngineStep& s : engine->steps()) {
      if (s.node.rfind(kSweepProducerNode, 0) == 0) read_layout = s.output_layout;
      if (!sweep_is_op_step(s)) continue;
      ++timed;
      CHECK(s.op == "LayerNormalization");
      if (std::string(dtype) == "bf16" && cpu_isa_available(CpuIsa::avx512)) {
        INFO("reads " << read_layout << ", writes " << s.output_layout);
        CHECK(read_layout.find(":bf16") != std::string::npos);
        CHECK(s.output_layout.find(":bf16") != std::string::npos);
      }
    }
    CHECK(timed == 1);
  }
  const TargetFingerprint fp = fingerprint_local();
  BenchPlanOptions options;
  options.threads = {1};
  std::set<std::string> dtypes;
  for (const BenchPoint& p : sweep_points(fp, options, nullptr))
    if (p.record.op == "layernorm") dtypes.insert(p.record.dtype);
  CHECK(dtypes.count("f32") == 1);
  CHECK(dtypes.count("int8") == 0);
}
