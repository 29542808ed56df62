// Plan features: a compiled sweep graph (depthwise producer + Conv + ReLU) gives one record per
// Engine step, its kernels mapped to the sweep's ops with the MACs analysis/ counts and the bytes
// the sweep records for the same shape.
#include <catch2/catch.hpp>

#include <algorithm>

#include "compilers/analysis/model_stats.h"
#include "compilers/ir/shape_inference.h"
#include "compilers/lower/to_plan.h"
#include "compilers/passes/pass_runner.h"
#include "compilers/passes/pipeline.h"
#include "kernels/cpu/isa.h"
#include "kernels/engine.h"
#include "kernels/precision.h"
#include "kernels/quantization.h"
#include "perfmodel/microbench/kernel_sweep.h"
#include "perfmodel/plan_features.h"
#include "tests/support/plan_builder.h"

using namespace kiln;
using namespace kiln::perf;

namespace {

// A sweep shape's graph through the fp32 sweep pipeline, as a plan.
Plan compiled_sweep(const SweepShape& shape, const std::string& dtype = "f32") {
  Graph g = sweep_graph(shape);
  PassRunOptions options;
  options.check_numerics = false;
  CalibrationSet calibration;
  for (ValueId in : g.inputs) {
    Shape sample = sym_shape_concrete(g.value(in).type.shape);
    sample[0] = 1;
    calibration.inputs.push_back(sweep_random_tensor(sample, 7));
  }
  options.int8.calibration = &calibration;
  REQUIRE(run_passes(g, sweep_pipeline(dtype), options));
  return graph_to_plan(g);
}

std::vector<StepFeatures> features_of(const Plan& plan) {
  auto engine = Engine::create(plan, {1, nullptr});
  REQUIRE(engine);
  return plan_features(plan, (*engine)->steps(), 1);
}

}  // namespace

TEST_CASE("plan features of a small plan: ops, MACs and bytes as the sweep and analysis count them", "[perfmodel][predictor]") {
  const SweepShape conv{SweepOp::conv, 2, 16, 32, 14, 14, 3, 2, 1};
  Graph g = sweep_graph(conv);
  REQUIRE(graph_infer_shapes(g));
  const int64_t graph_macs = model_stats(g).macs;
  PassRunOptions options;
  options.check_numerics = false;
  REQUIRE(run_passes(g, sweep_pipeline("f32"), options));
  const Plan plan = graph_to_plan(g);
  auto engine = Engine::create(plan, {1, nullptr});
  REQUIRE(engine);
  const std::vector<StepFeatures> f = plan_features(plan, (*engine)->steps(), 1);
  REQUIRE(f.size() == (*engine)->steps().size());

  double macs = 0;
  const StepFeatures* op = nullptr;
  for (const StepFeatures& s : f) {
    macs += s.m.macs;
    CHECK(s.m.threads == 1);
    if (s.node == "conv" || s.node == "relu") op = &s;
  }
  CHECK(macs == Approx(static_cast<double>(graph_macs)));
  REQUIRE(op != nullptr);  // the conv with its fused ReLU is one kernel
  CHECK(op->m.op == "conv");
  CHECK(op->m.dtype == "f32");
  CHECK(op->m.batch == 2);
  CHECK(op->m.in_c == 16);
  CHECK(op->m.out_c == 32);
  CHECK(op->m.out_h == 7);
  CHECK(op->m.kernel_h == 3);
  CHECK(op->m.stride == 2);
  CHECK(op->m.macs == Approx(sweep_macs(conv)));
  CHECK(op->m.bytes == Approx(sweep_bytes(conv, 4)));
  CHECK(f[0].m.op == "depthwise_conv");  // the producer
  // The output leaves in oneDNN's layout: a conversion to plain closes the plan, priced as the
  // reverse of a plain-input conversion, so it carries the value's shape and dtype.
  CHECK(f.back().op == "ToPlain");
  CHECK(f.back().m.op.empty());
  CHECK(f.back().m.bytes == Approx(2 * 32 * 7 * 7 * (4.0 + 4.0)));
  CHECK(f.back().input_conversion == "from layout");
  CHECK(f.back().m.batch == 2);
  CHECK(f.back().m.in_c == 32);
  CHECK(f.back().m.in_h == 7);
  CHECK(f.back().m.in_w == 7);
  CHECK(f.back().m.dtype == "f32");
}

TEST_CASE("layout element sizes", "[perfmodel][predictor]") {
  CHECK(layout_element_bytes("plain") == 4);
  CHECK(layout_element_bytes("onednn:aBcd16b:bf16") == 2);
  CHECK(layout_element_bytes("onednn:acdb:u8*0.5") == 1);
}

// In every precision: an int8 Concat joins its producers' codes and is priced as the sweep's int8 concat
// (priced from float32 ones, SqueezeNet int8 b8's 8 Concats: 3.06 ms, measured 1.08).
TEST_CASE("plan features of a channel concat: the sweep's concat, its elements and bytes", "[perfmodel][predictor]") {
  const SweepShape concat{SweepOp::concat, 2, 24, 48, 9, 9};
  for (const char* dtype : {"f32", "bf16", "int8"}) {
    INFO(dtype);
    const std::vector<StepFeatures> f = features_of(compiled_sweep(concat, dtype));
    const StepFeatures* op = nullptr;
    int producers = 0;
    for (const StepFeatures& s : f) {
      if (s.node == "concat") op = &s;
      producers += s.m.op == "depthwise_conv" && s.node.rfind(kSweepProducerNode, 0) == 0 ? 1 : 0;
    }
    CHECK(producers == 2);
    REQUIRE(op != nullptr);
    CHECK(op->m.op == "concat");
    CHECK(op->m.out_c == 48);
    CHECK(op->m.in_c == 24);
    CHECK(op->m.macs == Approx(sweep_macs(concat)));
    CHECK(op->m.macs == Approx(2 * 48 * 9 * 9));
    CHECK(op->weight_bytes == 0);
    // The layout the Concat writes says its precision (bfloat16 only where oneDNN computes it).
    const std::string stored = std::string(dtype) == "bf16" && !cpu_has_bf16_compute() ? "f32" : dtype;
    INFO(op->m.layout);
    CHECK(op->m.dtype == stored);
    CHECK(op->m.bytes == Approx(sweep_bytes(concat, dtype_element_bytes(stored))));
  }
}

TEST_CASE("plan features of elementwise chains and of fused transcendental epilogues", "[perfmodel][predictor]") {
  for (int64_t ops : {2, 5}) {  // SiLU and GELU written out: one ElementwiseChain each
    const SweepShape chain{SweepOp::eltwise, 2, 16, 16, 7, 9, ops};
    const std::vector<StepFeatures> f = features_of(compiled_sweep(chain));
    REQUIRE(f.size() == 1);
    INFO(f[0].op);
    CHECK(f[0].m.op == "eltwise");
    CHECK(f[0].m.macs == Approx(sweep_macs(chain)));
    CHECK(f[0].m.macs == Approx(2 * 16 * 7 * 9 * ops));
    CHECK(f[0].m.bytes == Approx(sweep_bytes(chain, 4)));
  }
  // A chain of cheap ops only streams its bytes as the sweep's Add does (ConvNeXt's x * gamma + r): SiLU's
  // program with its sigmoid made an abs.
  Plan cheap = compiled_sweep({SweepOp::eltwise, 2, 16, 16, 7, 9, 2});
  int chains = 0;
  for (PlanStep& s : cheap.steps) {
    auto ops = s.attrs.get_strings("ops");
    if (s.op != OpKind::ElementwiseChain || !ops) continue;
    std::vector<std::string> renamed = *ops;
    for (std::string& op : renamed)
      if (op == "sigmoid") op = "abs";
    s.attrs.set("ops", renamed);
    ++chains;
  }
  REQUIRE(chains == 1);
  const std::vector<StepFeatures> streamed = features_of(cheap);
  REQUIRE(streamed.size() == 1);
  CHECK(streamed[0].m.op == "add");
  CHECK(streamed[0].m.macs == Approx(2 * 16 * 7 * 9));
  CHECK(streamed[0].m.bytes == Approx(sweep_bytes({SweepOp::eltwise, 2, 16, 16, 7, 9, 2}, 4)));
  // A conv whose fused activation is SiLU: its output elements x 2 on top of the conv.
  Plan plan = compiled_sweep({SweepOp::conv, 1, 16, 32, 14, 14, 3, 1, 1});
  for (PlanStep& s : plan.steps)
    if (s.op == OpKind::Conv && s.name != "producer") s.attrs.set("activation", std::string("silu"));
  double epilogue = 0;
  for (const StepFeatures& s : features_of(plan)) epilogue += s.epilogue_ops;
  CHECK(epilogue == Approx(2.0 * 32 * 14 * 14));
}

TEST_CASE("a conv's input conversion: plain float32 from the graph input, nothing from a producer in its layout",
          "[perfmodel][predictor]") {
  SweepShape border{SweepOp::conv, 2, 16, 32, 14, 14, 1, 1, 0};
  border.plain_input = true;
  const std::vector<StepFeatures> plain = features_of(compiled_sweep(border));
  const StepFeatures* conv = nullptr;
  for (const StepFeatures& s : plain)
    if (s.m.op == "conv") conv = &s;
  REQUIRE(conv != nullptr);
  if (conv->kernel.rfind("onednn", 0) == 0 && conv->m.layout != "plain") CHECK(conv->input_conversion == "layout");

  SweepShape interior = border;
  interior.plain_input = false;
  int convs = 0;
  for (const StepFeatures& s : features_of(compiled_sweep(interior))) {
    if (s.node.rfind(kSweepProducerNode, 0) == 0) continue;  // the producer reads the plain graph input
    convs += s.m.op == "conv";
    if (s.op != "ToPlain") CHECK(s.input_conversion.empty());  // the output's own conversion closes the plan
  }
  CHECK(convs == 1);
}

TEST_CASE("a bf16/int8 gemm converts float32 A in its step, not a producer MatMul's rows or codes", "[perfmodel][predictor]") {
  SweepShape gemm{SweepOp::gemm, 32};
  gemm.m = 32, gemm.k = 64, gemm.n = 48;
  SweepShape rows = gemm;
  rows.rows_input = true;
  for (const char* dtype : {"bf16", "int8", "f32"}) {
    INFO(dtype);
    const auto timed = [](const std::vector<StepFeatures>& steps) {
      std::vector<StepFeatures> out;
      for (const StepFeatures& s : steps)
        if (s.m.op == "gemm" && s.node.rfind(kSweepProducerNode, 0) != 0 && s.node.rfind(kSweepReaderNode, 0) != 0)
          out.push_back(s);
      REQUIRE(out.size() == 1);
      return out[0];
    };
    const StepFeatures from_float = timed(features_of(compiled_sweep(gemm, dtype)));
    CHECK(from_float.m.dtype == dtype);
    CHECK(from_float.input_conversion == (std::string(dtype) == "f32" ? "" : "precision"));
    // Rows in the MatMul's own precision where oneDNN runs it so (bf16: AVX-512; int8 codes: checked there too).
    const bool native = std::string(dtype) == "f32" ||
                        (cpu_isa_available(CpuIsa::avx512) && (std::string(dtype) == "int8" || cpu_has_bf16_compute()));
    if (!native) continue;
    const StepFeatures from_rows = timed(features_of(compiled_sweep(rows, dtype)));
    CHECK(from_rows.input_conversion.empty());
    CHECK(from_rows.m.m == 32);
    CHECK(from_rows.m.k == 64);
    // Its bytes as the sweep records them: the output in the dtype it writes for the reader MatMul; the
    // float-input one writes float32, as its record counts it.
    CHECK(from_rows.m.bytes == Approx(sweep_record(rows, dtype, 1, dtype_element_bytes(dtype)).bytes));
    SweepShape border = gemm;
    border.float_input = std::string(dtype) != "f32";
    CHECK(from_float.m.bytes == Approx(sweep_record(border, dtype, 1, dtype_element_bytes(dtype)).bytes));
  }
}

TEST_CASE("a LayerNorm's features: the sweep's layernorm, in the dtype it writes, at the bytes it moves", "[perfmodel][predictor]") {
  const SweepShape norm{SweepOp::layernorm, 2, 96, 96, 14, 14};
  for (const char* dtype : {"f32", "bf16"}) {
    INFO(dtype);
    int found = 0;
    for (const StepFeatures& s : features_of(compiled_sweep(norm, dtype))) {
      if (s.op != "LayerNormalization") continue;
      ++found;
      CHECK(s.m.op == "layernorm");
      CHECK(s.m.batch == 2);
      CHECK(s.m.in_c == 96);
      CHECK(s.m.out_h * s.m.out_w == 14 * 14);
      CHECK(s.m.macs == sweep_macs(norm));
      // Where bf16 runs natively the norm reads and writes bfloat16 rows: priced as the bf16 points.
      const std::string written = s.m.layout.find(":bf16") != std::string::npos ? "bf16" : "f32";
      CHECK(s.m.dtype == written);
      CHECK(s.m.bytes == Approx(sweep_record(norm, written, 1, dtype_element_bytes(written)).bytes));
    }
    CHECK(found == 1);
  }
}

TEST_CASE("plan features of fused blocks: ConcatAffine and a depth-first block in the sweep's terms", "[perfmodel][predictor]") {
  const SweepShape joined{SweepOp::concat_affine, 2, 16, 64, 14, 14, 4};
  bool found = false;
  for (const StepFeatures& s : features_of(compiled_sweep(joined))) {
    if (s.op != "ConcatAffine") continue;
    found = true;
    CHECK(s.m.op == "concat_affine");
    CHECK(s.m.kernel_h == 4);  // inputs
    CHECK(s.m.in_c == 16);
    CHECK(s.m.macs == Approx(sweep_macs(joined)));
    CHECK(s.m.bytes == Approx(sweep_bytes(joined, 4)));
  }
  CHECK(found);
  // In bf16 and int8 it writes what its conv reads (bfloat16, u8 codes), reading the bf16 producers'
  // bfloat16 or the int8 producers' codes: priced in that dtype at the bytes it moves.
  if (cpu_has_bf16_compute() && cpu_isa_available(CpuIsa::avx512)) {
    const double elements = sweep_macs(joined);
    for (const auto& [dtype, bytes_per_element] : {std::pair<std::string, double>{"bf16", 2.0 + 2.0}, {"int8", 1.0 + 1.0}}) {
      INFO(dtype);
      bool priced = false;
      for (const StepFeatures& s : features_of(compiled_sweep(joined, dtype))) {
        if (s.op != "ConcatAffine") continue;
        priced = true;
        CHECK(s.m.dtype == dtype);
        CHECK(s.m.bytes == Approx(elements * bytes_per_element));
      }
      CHECK(priced);
    }
  }

  // Depth-first fusion runs on AVX-512 only and needs an intermediate past the caches.
  SweepShape block{SweepOp::depth_first, 32, 16, 24, 56, 56, 3, 2, 1};
  block.mid_c = 96;
  Graph g = sweep_graph(block);
  PassRunOptions options;
  options.check_numerics = false;
  REQUIRE(run_passes(g, pipeline_parse("default"), options));
  const bool fused = std::any_of(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return n.op == OpKind::DepthFirstConv; });
  if (!fused) return;  // not an AVX-512 machine
  for (const StepFeatures& s : features_of(graph_to_plan(g))) {
    if (s.op != "DepthFirstConv") continue;
    CHECK(s.m.op == "depth_first");
    CHECK(s.m.stride == 2);
    CHECK(s.m.macs == Approx(sweep_macs(block)));
    CHECK(s.m.bytes == Approx(sweep_bytes(block, 4)));
    CHECK(s.epilogue_ops == 0);  // ReLU costs nothing beside the kernel
  }
}

TEST_CASE("a Transpose that moves the innermost axis carries its NCHW dims, to be priced as a conversion",
          "[perfmodel][predictor]") {
  // ConvNeXt's permutes: NCHW -> NHWC and back; ShuffleNet's channel shuffle keeps rows whole.
  const auto transpose_features = [](const Shape& shape, std::vector<int64_t> perm) {
    kiln::testing::Builder b;
    const int x = b.input(shape);
    b.output(b.op(OpKind::Transpose, kiln::testing::attrs({{"perm", perm}}), {x}));
    for (const StepFeatures& f : features_of(b.plan))
      if (f.op == "Transpose") return f;
    FAIL("no Transpose step");
    return StepFeatures{};
  };
  const StepFeatures to_nhwc = transpose_features({2, 24, 7, 5}, {0, 2, 3, 1});
  CHECK(to_nhwc.input_conversion == "transpose");
  CHECK((to_nhwc.m.batch == 2 && to_nhwc.m.in_c == 24 && to_nhwc.m.in_h == 7 && to_nhwc.m.in_w == 5));
  CHECK(to_nhwc.m.dtype == "f32");
  // NHWC -> NCHW of a plain value is a view (cpu.transpose_view, priced as nothing); the plain
  // graph output is then the conversion from its NHWC layout.
  kiln::testing::Builder b;
  b.output(b.op(OpKind::Transpose, kiln::testing::attrs({{"perm", std::vector<int64_t>{0, 3, 1, 2}}}), {b.input({2, 7, 5, 24})}));
  const auto steps = features_of(b.plan);
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].op == "Transpose");
  CHECK(steps[0].view);
  CHECK(steps[0].m.bytes == 0);
  CHECK(steps[1].op == "ToPlain");
  CHECK(steps[1].m.bytes > 0);
  CHECK(transpose_features({2, 2, 12, 7, 7}, {0, 2, 1, 3, 4}).input_conversion.empty());  // a stream of rows
}

// Pooling carries no precision attribute: in an int8 region it reads and writes the region's u8
// layout, and is priced at one byte per element, not as float32 (ResNet-18 int8's max pool at batch 8
// ran in 0.8 ms where its float32 price was 6.2).
TEST_CASE("a max pool between int8 convolutions has the region's dtype and one-byte elements", "[perfmodel][predictor]") {
  testing::Builder b;
  const int x = b.input({2, 16, 16, 16});
  const Attrs conv_attrs = testing::attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"activation", std::string("relu")}});
  const int c1 = b.op(OpKind::Conv, conv_attrs, {x, b.weight({32, 16, 3, 3}, 0.2f), b.weight({32}, 0.1f)});
  const int pool = b.op(OpKind::MaxPool, testing::attrs({{"kernel_shape", std::vector<int64_t>{2, 2}},
                                                         {"strides", std::vector<int64_t>{2, 2}}}), {c1});
  const int c2 = b.op(OpKind::Conv, conv_attrs, {pool, b.weight({32, 32, 3, 3}, 0.2f), b.weight({32}, 0.1f)});
  b.output(c2);
  // Both convs int8; the first writes u8 (after its ReLU), which the pool reads and writes as is.
  for (PlanStep& step : b.plan.steps) {
    if (step.op != OpKind::Conv) continue;
    precision_to_attrs(Precision::int8, step.attrs);
    quant_params_to_attrs(quant_params_for_range(step.outputs[0] == c1 ? -1.0f : 0.0f, 4.0f), "input", step.attrs);
    if (step.outputs[0] == c1) quant_params_to_attrs(quant_params_for_range(0.0f, 4.0f), "output", step.attrs);
  }
  const std::vector<StepFeatures> f = features_of(b.plan);
  const StepFeatures* p = nullptr;
  for (const StepFeatures& s : f)
    if (s.m.op == "maxpool") p = &s;
  REQUIRE(p != nullptr);
  INFO(p->m.layout);
  CHECK(layout_element_bytes(p->m.layout) == 1);  // the u8 layout flowed through (onednn_int8_test)
  CHECK(p->m.dtype == "int8");
  CHECK(p->m.bytes == Approx(2 * 32 * (16 * 16 + 8 * 8) * 1.0));
}

TEST_CASE("an int8 conv reading s8 (no ReLU before it) is marked signed, one reading u8 is not", "[perfmodel][predictor]") {
  for (const bool relu : {false, true}) {
    testing::Builder b;
    const int x = b.input({1, 16, 14, 14});
    const Attrs pads = testing::attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    Attrs first = pads;
    if (relu) first.set("activation", std::string("relu"));
    const int c1 = b.op(OpKind::Conv, first, {x, b.weight({16, 16, 3, 3}, 0.2f), b.weight({16}, 0.1f)});
    const int c2 = b.op(OpKind::Conv, pads, {c1, b.weight({16, 16, 3, 3}, 0.2f), b.weight({16}, 0.1f)});
    b.output(c2);
    for (PlanStep& step : b.plan.steps) {
      precision_to_attrs(Precision::int8, step.attrs);
      const bool second = step.outputs[0] == c2;
      quant_params_to_attrs(quant_params_for_range(second && relu ? 0.0f : -1.0f, 4.0f), "input", step.attrs);
      if (!second) quant_params_to_attrs(quant_params_for_range(relu ? 0.0f : -1.0f, 4.0f), "output", step.attrs);
    }
    const std::vector<StepFeatures> f = features_of(b.plan);
    std::vector<const StepFeatures*> convs;
    for (const StepFeatures& s : f)
      if (s.m.op == "conv") convs.push_back(&s);
    REQUIRE(convs.size() == 2);
    INFO("relu " << relu << ": " << convs[0]->m.layout);
    CHECK(convs[0]->m.layout.find(relu ? ":u8" : ":s8") != std::string::npos);
    CHECK_FALSE(convs[0]->signed_input);  // it converts the plain float32 input itself
    CHECK(convs[1]->input_conversion.empty());
    CHECK(convs[1]->signed_input == !relu);
  }
}
