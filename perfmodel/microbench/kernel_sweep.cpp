#include "perfmodel/microbench/kernel_sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <span>

#include "compilers/lower/to_plan.h"
#include "compilers/passes/pass_runner.h"
#include "compilers/passes/pipeline.h"
#include "kernels/engine.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/precision.h"

namespace kiln::perf {

Tensor sweep_random_tensor(Shape shape, uint32_t seed, float lo, float hi) {
  Tensor t = Tensor::zeros(DType::f32, std::move(shape));
  uint64_t state = 0x9E3779B97F4A7C15ull ^ seed;
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = lo + (hi - lo) * static_cast<float>(state >> 40) / static_cast<float>(1ull << 24);
  }
  return t;
}

bool sweep_is_op_step(const EngineStep& s) {
  return s.op != "ToPlain" && s.node.rfind(kSweepProducerNode, 0) != 0 && s.node.rfind(kSweepReaderNode, 0) != 0;
}

namespace {

struct Builder {
  Graph g;
  uint32_t seed = 1;
  ValueId input(const std::string& name, Shape shape) {
    const ValueId id = g.add_value(name, ValueType::of(DType::f32, sym_shape_from(shape)));
    g.inputs.push_back(id);
    return id;
  }
  ValueId weight(const std::string& name, Shape shape, float scale) {
    const ValueId id = g.add_value(name, ValueType::of(DType::f32, sym_shape_from(shape)));
    g.initializers[id] = sweep_random_tensor(std::move(shape), seed++, -scale, scale);
    return id;
  }
  ValueId node(OpKind op, const std::string& out, std::vector<ValueId> inputs, Attrs attrs = {}) {
    const ValueId id = g.add_value(out, ValueType::unranked(DType::f32));
    g.add_node(Node{out, op, std::move(attrs), std::move(inputs), {id}});
    return id;
  }
};

Attrs window_attrs(const SweepShape& s) {
  Attrs a;
  a.set("kernel_shape", std::vector<int64_t>{s.kernel, s.kernel});
  a.set("strides", std::vector<int64_t>{s.stride, s.stride});
  a.set("pads", std::vector<int64_t>{s.pad, s.pad, s.pad, s.pad});
  return a;
}

// The op's input, written by a depthwise 3x3 convolution (9 MACs an element: cheap beside the op)
// instead of coming straight from the graph input, so the op reads the layout and precision a
// previous layer would leave (oneDNN's blocked/NHWC bf16 or int8), as inside a model, and not
// plain float32 that it would convert itself within its own step. With `relu` (fused into it) an
// int8 producer writes u8, as a ReLU network's layers do; without, s8.
// A 3x3 depthwise conv (no bias) of `x`, shaped as `s`'s input, named `name`.
ValueId depthwise(Builder& b, const SweepShape& s, ValueId x, const std::string& name) {
  const ValueId w = b.weight(name + "_w", {s.in_c, 1, 3, 3}, 1.0f / 3.0f);
  Attrs a;
  a.set("kernel_shape", std::vector<int64_t>{3, 3});
  a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  a.set("group", s.in_c);
  return b.node(OpKind::Conv, name, {x, w}, a);
}

// The op's output shape as the input of what reads it (a reader's, a residual producer's).
SweepShape output_as_input(const SweepShape& s) {
  SweepShape out = s;
  out.in_c = s.out_c;
  out.h = sweep_out_h(s);
  out.w = sweep_out_w(s);
  return out;
}

// DenseNet's layer start: Concat(parts) on channels -> BatchNormalization -> Relu (one ConcatAffine once
// fused), its nodes and weights named with `prefix`.
ValueId concat_norm_relu(Builder& b, const std::string& prefix, const std::vector<ValueId>& parts, int64_t channels) {
  Attrs axis;
  axis.set("axis", int64_t{1});
  const ValueId joined = b.node(OpKind::Concat, prefix + "concat", parts, axis);
  const ValueId scale = b.weight(prefix + "bn_scale", {channels}, 1.0f), bias = b.weight(prefix + "bn_bias", {channels}, 0.1f);
  const ValueId mean = b.weight(prefix + "bn_mean", {channels}, 0.1f), var = b.weight(prefix + "bn_var", {channels}, 0.5f);
  // Positive variances: the weights are uniform in [-scale, scale), so shift them up.
  for (float& v : std::span(b.g.initializers[var].data<float>(), static_cast<size_t>(channels))) v += 1.0f;
  const ValueId bn = b.node(OpKind::BatchNormalization, prefix + "bn", {joined, scale, bias, mean, var});
  return b.node(OpKind::Relu, prefix + "relu", {bn});
}

// A narrow MatMul (kRowsProducerWidth columns, not timed) reading `rows` of `width` columns, as the next
// Linear reads an MLP's first one or a LayerNorm: in bf16 and int8 those then write bfloat16 rows or codes.
ValueId row_reader(Builder& b, ValueId rows, int64_t width) {
  const ValueId w = b.weight(std::string(kSweepReaderNode) + "_w", {width, kRowsProducerWidth}, 1.0f / std::sqrt(static_cast<float>(width)));
  return b.node(OpKind::MatMul, kSweepReaderNode, {rows, w});
}

ValueId producer(Builder& b, const SweepShape& s, const std::string& suffix = "", bool relu = false) {
  const ValueId y = depthwise(b, s, b.input("x" + suffix, {s.batch, s.in_c, s.h, s.w}), kSweepProducerNode + suffix);
  return relu ? b.node(OpKind::Relu, kSweepProducerNode + suffix + "_relu", {y}) : y;
}

constexpr int64_t kNarrowProducerChannels = 16;

// The input of a memory-bound op (a pool), written by a 1x1 conv widening kNarrowProducerChannels float32
// channels to the op's: its last write leaves the op's input in the caches, as a model's previous layer
// does. A depthwise producer reads an input as large as it writes, in float32 four times an int8 op's
// input, and evicts most of what it wrote (SqueezeNet's 64x111x111 pool on u8 codes at batch 8, one
// thread: 0.76 ms behind a depthwise producer, 0.30-0.39 in the model).
ValueId widening_producer(Builder& b, const SweepShape& s, bool relu) {
  const int64_t narrow = std::min<int64_t>(kNarrowProducerChannels, s.in_c);
  const ValueId x = b.input("x", {s.batch, narrow, s.h, s.w});
  const ValueId w = b.weight(std::string(kSweepProducerNode) + "_w", {s.in_c, narrow, 1, 1}, 1.0f / std::sqrt(static_cast<float>(narrow)));
  Attrs a;
  a.set("kernel_shape", std::vector<int64_t>{1, 1});
  const ValueId y = b.node(OpKind::Conv, kSweepProducerNode, {x, w}, a);
  return relu ? b.node(OpKind::Relu, std::string(kSweepProducerNode) + "_relu", {y}) : y;
}

Status measure_shape(const SweepShape& shape, const TimingOptions& timing, Measurement& m) {
  Graph g = sweep_graph(shape);
  PassRunOptions options;
  options.check_numerics = false;
  CalibrationSet calibration;
  if (m.dtype == "int8") {
    // One random sample per input: the scales only need to be plausible for timing.
    for (ValueId in : g.inputs) {
      Shape s = sym_shape_concrete(g.value(in).type.shape);
      s[0] = 1;
      calibration.inputs.push_back(sweep_random_tensor(s, 7));
    }
    calibration.source = "random (kiln bench-target)";
    options.int8.calibration = &calibration;
  }
  // A depth-first block is timed as the fused kernel the default pipeline makes of it.
  const bool depth_first = shape.op == SweepOp::depth_first;
  auto records = run_passes(g, depth_first ? pipeline_parse("default") : sweep_pipeline(m.dtype), options);
  if (!records) return records.status().with_context(m.key + " " + m.dtype + ": compiling: ");
  if (depth_first || shape.op == SweepOp::concat_affine) {
    const OpKind fused_op = depth_first ? OpKind::DepthFirstConv : OpKind::ConcatAffine;
    const bool fused = std::any_of(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op == fused_op; });
    KILN_REQUIRE(fused, unsupported, m.key, ": the pipeline left the block unfused");
  }
  // A precision pass may leave an op it cannot take in fp32: then this is not a bf16/int8 point.
  if (m.dtype != "f32") {
    bool lowered = false;
    for (const Node& n : g.nodes) {
      auto p = precision_from_attrs(n.attrs);
      if (p && precision_name(*p) == (m.dtype == "bf16" ? "bf16" : "int8")) lowered = true;
    }
    KILN_REQUIRE(lowered, unsupported, m.key, ": the ", m.dtype, " pipeline left the op in fp32");
  }
  const Plan plan = graph_to_plan(g);
  KILN_ASSIGN(engine, Engine::create(plan, {m.threads, nullptr}));
  std::vector<Tensor> inputs;
  uint32_t seed = 11;
  for (ValueId in : g.inputs) inputs.push_back(sweep_random_tensor(sym_shape_concrete(g.value(in).type.shape), seed++));

  const std::vector<EngineStep>& steps = engine->steps();
  std::vector<double> step_ms;
  std::vector<double> totals;
  Status failed = Status::ok();
  const Timing t = time_repeated(
      [&]() -> double {
        const auto start = std::chrono::steady_clock::now();
        auto r = engine->run(inputs, &step_ms);
        totals.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        if (!r) {
          failed = r.status();
          return -1;
        }
        double op_ms = 0;
        for (size_t i = 0; i < steps.size() && i < step_ms.size(); ++i)
          if (sweep_is_op_step(steps[i])) op_ms += step_ms[i];
        return op_ms / static_cast<double>(shape.copies);  // per copy
      },
      timing);
  KILN_TRY(failed);
  KILN_REQUIRE(t.runs > 0, internal, m.key, ": no timed runs");
  std::sort(totals.begin(), totals.end());
  m.median_ms = t.median_ms;
  m.p10_ms = t.p10_ms;
  m.p90_ms = t.p90_ms;
  m.runs = t.runs;
  m.total_median_ms = totals[totals.size() / 2];
  m.throughput = 2.0 * m.macs / (t.median_ms * 1e6);
  std::set<std::string> backends;
  m.kernel.clear();
  for (const EngineStep& s : steps) {
    if (!sweep_is_op_step(s)) continue;
    if (shape.copies > 1 && m.kernel.find(s.kernel) != std::string::npos) continue;  // one copy's kernels
    m.kernel += (m.kernel.empty() ? "" : "+") + s.kernel;
    m.layout = s.output_layout;
    backends.insert(s.kernel.substr(0, s.kernel.find('.')));
  }
  m.backend.clear();
  for (const std::string& b : backends) m.backend += (m.backend.empty() ? "" : "+") + b;
  return Status::ok();
}

}  // namespace

Graph sweep_graph(const SweepShape& s) {
  Builder b;
  b.g.name = sweep_key(s);
  switch (s.op) {
    case SweepOp::conv:
    case SweepOp::depthwise_conv: {
      const bool dw = s.op == SweepOp::depthwise_conv;
      ValueId x = s.plain_input ? b.input("x", {s.batch, s.in_c, s.h, s.w}) : kNoValue;
      if (s.float_input) {
        // Two producers of half the channels each, joined by a Concat, then a BatchNormalization +
        // ReLU (one float32 ConcatAffine step) that is a graph output too, so it stays float32: read
        // only by int8 convs it would write codes (DenseNet's, since 2026-12-08), and a bare Concat of
        // int8 producers joins theirs. Either way the conv would read u8 with nothing to convert
        // (stores before 2026-12-08: their int8 points timed no conversion).
        SweepShape half = s;
        half.in_c = s.in_c / 2;
        x = concat_norm_relu(b, std::string(kSweepProducerNode) + "_", {producer(b, half), producer(b, half, "_b")}, s.in_c);
        b.g.outputs.push_back(x);
      }
      if (x == kNoValue) x = producer(b, s, "", sweep_reads_u8(s));
      // He-like scale keeps activations in range through the ReLU (int8 calibration sees real ranges).
      const float scale = 1.0f / std::sqrt(static_cast<float>((dw ? 1 : s.in_c) * s.kernel * s.kernel));
      Attrs a = window_attrs(s);
      a.set("group", dw ? s.in_c : int64_t{1});
      const auto conv = [&](const std::string& suffix) {
        const ValueId w = b.weight("w" + suffix, {s.out_c, dw ? 1 : s.in_c, s.kernel, s.kernel}, scale);
        return b.node(OpKind::Conv, "conv" + suffix, {x, w, b.weight("bias" + suffix, {s.out_c}, 0.1f)}, a);
      };
      for (int64_t i = 1; i < s.copies; ++i)  // the copies beside the last: same input, weights of their own
        b.g.outputs.push_back(b.node(OpKind::Relu, "relu" + std::to_string(i), {conv(std::to_string(i))}));
      const ValueId c = conv("");
      const SweepShape out = output_as_input(s);
      if (s.residual) {  // the residual from a producer of the output's shape, summed into the conv by the fusion pass
        // Read by a depthwise conv (not timed), as a ResNet block's output is by the next block: in int8 the
        // conv then writes u8 codes and sums the residual's codes in place, in bf16 it writes bfloat16.
        const ValueId sum = b.node(OpKind::Relu, "relu", {b.node(OpKind::Add, "residual", {c, producer(b, out, "_residual", true)})});
        b.g.outputs.push_back(depthwise(b, out, sum, kSweepReaderNode));
        break;
      }
      const ValueId y = s.silu ? b.node(OpKind::Mul, "silu", {c, b.node(OpKind::Sigmoid, "sigmoid", {c})}) : b.node(OpKind::Relu, "relu", {c});
      // codes_out: read by a depthwise conv (not timed), as the next layer reads a model's conv, so an int8
      // conv writes codes (u8 after ReLU, s8 after SiLU) instead of float32 for the graph's output.
      b.g.outputs.push_back(s.codes_out ? depthwise(b, out, y, kSweepReaderNode) : y);
      break;
    }
    case SweepOp::gemm: {
      if (s.rows_input) {
        // The producer: a MatMul over a narrow input (kRowsProducerWidth columns: cheap beside the op, not
        // timed) read only by the timed MatMul, so in bf16 it writes bfloat16 rows and in int8 s8 codes
        // (mixed_precision_bf16, quantize_int8), which the op reads as they are.
        const ValueId x = b.input("x", {s.m, kRowsProducerWidth});
        const ValueId pw = b.weight(std::string(kSweepProducerNode) + "_w", {kRowsProducerWidth, s.k}, 0.5f);
        const ValueId rows = b.node(OpKind::MatMul, kSweepProducerNode, {x, pw});
        const ValueId w = b.weight("w", {s.k, s.n}, 1.0f / std::sqrt(static_cast<float>(s.k)));
        const ValueId y = b.node(OpKind::Add, "gemm_bias", {b.node(OpKind::MatMul, "gemm", {rows, w}), b.weight("bias", {s.n}, 0.1f)});
        // Read by a MatMul in its precision, so the op writes bfloat16 rows or codes too, as an MLP's first
        // Linear does (where the second writes float32, plan features count its output's bytes so).
        b.g.outputs.push_back(row_reader(b, y, s.n));
        break;
      }
      const ValueId x = b.input("x", {s.m, s.k});
      const ValueId w = b.weight("w", {s.n, s.k}, 1.0f / std::sqrt(static_cast<float>(s.k)));
      const ValueId bias = b.weight("bias", {s.n}, 0.1f);
      Attrs a;
      a.set("transB", int64_t{1});
      b.g.outputs.push_back(b.node(OpKind::Gemm, "gemm", {x, w, bias}, a));
      break;
    }
    case SweepOp::maxpool: {
      // Read by a cheap depthwise conv, as a model's pools are read by a conv: in int8 the pool then
      // passes codes (cpu.max_pool_codes), where a pool whose output leaves the graph runs on floats.
      const ValueId pooled = b.node(OpKind::MaxPool, "pool", {widening_producer(b, s, true)}, window_attrs(s));
      b.g.outputs.push_back(depthwise(b, output_as_input(s), pooled, kSweepReaderNode));
      break;
    }
    case SweepOp::avgpool: {
      const ValueId x = producer(b, s);
      b.g.outputs.push_back(b.node(OpKind::AveragePool, "pool", {x}, window_attrs(s)));
      break;
    }
    case SweepOp::global_avgpool: {
      const ValueId x = producer(b, s);
      b.g.outputs.push_back(b.node(OpKind::GlobalAveragePool, "pool", {x}));
      break;
    }
    case SweepOp::add: {
      const ValueId x = b.input("x", {s.batch, s.in_c, s.h, s.w});
      const ValueId y = b.input("y", {s.batch, s.in_c, s.h, s.w});
      b.g.outputs.push_back(b.node(OpKind::Add, "add", {x, y}));
      break;
    }
    case SweepOp::eltwise: {
      const ValueId x = b.input("x", {s.batch, s.in_c, s.h, s.w});
      if (s.kernel == 5) {  // GELU written out: 0.5 * x * (1 + erf(x / sqrt(2)))
        const ValueId e = b.node(OpKind::Erf, "erf", {b.node(OpKind::Div, "div", {x, b.weight("sqrt2", {1}, 1.5f)})});
        const ValueId h = b.node(OpKind::Mul, "mul", {x, b.node(OpKind::Add, "add", {e, b.weight("one", {1}, 1.0f)})});
        b.g.outputs.push_back(b.node(OpKind::Mul, "gelu", {h, b.weight("half", {1}, 0.5f)}));
      } else {  // SiLU: x * sigmoid(x)
        b.g.outputs.push_back(b.node(OpKind::Mul, "silu", {x, b.node(OpKind::Sigmoid, "sigmoid", {x})}));
      }
      break;
    }
    case SweepOp::depth_first: {
      ValueId e = producer(b, s);
      Attrs pw;
      pw.set("kernel_shape", std::vector<int64_t>{1, 1});
      if (s.expand) {
        const ValueId ew = b.weight("expand_w", {s.mid_c, s.in_c, 1, 1}, 1.0f / std::sqrt(static_cast<float>(s.in_c)));
        e = b.node(OpKind::Relu, "expand_relu", {b.node(OpKind::Conv, "expand", {e, ew, b.weight("expand_b", {s.mid_c}, 0.1f)}, pw)});
      }
      Attrs dw = window_attrs(s);
      dw.set("group", s.mid_c);
      const ValueId dww = b.weight("dw_w", {s.mid_c, 1, s.kernel, s.kernel}, 1.0f / static_cast<float>(s.kernel));
      const ValueId d = b.node(OpKind::Relu, "dw_relu", {b.node(OpKind::Conv, "dw", {e, dww, b.weight("dw_b", {s.mid_c}, 0.1f)}, dw)});
      if (!s.project) {
        b.g.outputs.push_back(d);
        break;
      }
      const ValueId pww = b.weight("project_w", {s.out_c, s.mid_c, 1, 1}, 1.0f / std::sqrt(static_cast<float>(s.mid_c)));
      b.g.outputs.push_back(b.node(OpKind::Conv, "project", {d, pww, b.weight("project_b", {s.out_c}, 0.1f)}, pw));
      break;
    }
    case SweepOp::concat_affine: {
      std::vector<ValueId> parts;
      for (int64_t i = 0; i < s.kernel; ++i) parts.push_back(producer(b, s, "_" + std::to_string(i)));
      // Read by a depthwise conv (not timed), as DenseNet's are by a conv: in bf16 and int8 it then
      // writes what that conv reads (bfloat16, u8 codes) and reads the bf16 producers' output as is.
      b.g.outputs.push_back(depthwise(b, output_as_input(s), concat_norm_relu(b, "", parts, s.out_c), kSweepReaderNode));
      break;
    }
    case SweepOp::layernorm: {
      // ConvNeXt's norm: the producer's output viewed as NHWC rows (a Transpose: a view of what the producer
      // writes in NHWC), normalized over the channels and read by a narrow MatMul (not timed) as by the next
      // Linear, so that in bf16 it reads and writes bfloat16 rows (mixed_precision_bf16), as in the model.
      Attrs perm;
      perm.set("perm", std::vector<int64_t>{0, 2, 3, 1});
      const ValueId rows = b.node(OpKind::Transpose, std::string(kSweepProducerNode) + "_transpose", {producer(b, s)}, perm);
      Attrs norm;
      norm.set("axis", int64_t{-1});
      norm.set("epsilon", 1e-6f);
      const ValueId y = b.node(OpKind::LayerNormalization, "layernorm",
                               {rows, b.weight("ln_scale", {s.in_c}, 1.0f), b.weight("ln_bias", {s.in_c}, 0.1f)}, norm);
      b.g.outputs.push_back(row_reader(b, y, s.in_c));
      break;
    }
    case SweepOp::concat: {
      // Two ReLU producers (an int8 one writes u8, as fire modules' and inception branches' convs do),
      // joined and read by a depthwise conv (not timed), as a model's Concat is by its next conv: in int8
      // the producers then write codes at one scale that the Concat joins as they are, in bf16 bfloat16.
      // With its output leaving the graph an int8 Concat joined floats (stores before 2026-12-07, session 16).
      Attrs a;
      a.set("axis", int64_t{1});
      const ValueId joined = b.node(OpKind::Concat, "concat", {producer(b, s, "", true), producer(b, s, "_b", true)}, a);
      b.g.outputs.push_back(depthwise(b, output_as_input(s), joined, kSweepReaderNode));
      break;
    }
  }
  return b.g;
}

Measurement sweep_record(const SweepShape& shape, const std::string& dtype, int threads, double element_bytes) {
  Measurement m;
  m.kind = kKindKernel;
  m.op = sweep_record_op(shape);
  m.key = sweep_key(shape);
  if (dtype == "int8" && shape.op == SweepOp::gemm && int8_matmul_packs_weights_per_call()) m.key = kGemmAsConvKeyPrefix + m.key;
  if (dtype == "int8" && sweep_reads_u8(shape)) m.key = kUnsignedInputKeyPrefix + m.key;
  if (dtype == "int8" && shape.float_input) m.key = kQuantizedFloatInputKeyPrefix + m.key;
  if (shape.rows_input) m.key = kGemmRowsInputKeyPrefix + m.key;
  if (shape.op == SweepOp::maxpool) m.key = std::string(current_key_prefix("maxpool", dtype)) + m.key;
  if (shape.op == SweepOp::concat_affine) m.key = std::string(current_key_prefix("concat_affine", dtype)) + m.key;
  if (shape.op == SweepOp::concat) m.key = std::string(current_key_prefix("concat", dtype)) + m.key;
  if (shape.residual) m.key = std::string(current_key_prefix(m.op, dtype)) + m.key;
  if (shape.codes_out) m.key = kInt8CodesOutKeyPrefix + m.key;
  m.dtype = dtype;
  m.threads = threads;
  m.batch = shape.op == SweepOp::gemm ? shape.m : shape.batch;
  if (shape.op == SweepOp::gemm) {
    m.m = shape.m;
    m.k = shape.k;
    m.n = shape.n;
  } else {
    m.in_c = shape.in_c;
    m.in_h = shape.h;
    m.in_w = shape.w;
    m.out_c = shape.out_c;
    m.out_h = sweep_out_h(shape);
    m.out_w = sweep_out_w(shape);
    m.kernel_h = m.kernel_w = shape.kernel;
    m.stride = shape.stride;
    m.pad = shape.pad;
    m.groups = shape.op == SweepOp::depthwise_conv ? shape.in_c : 1;
  }
  m.macs = sweep_macs(shape);
  m.bytes = sweep_bytes(shape, element_bytes);
  return m;
}

bool sweep_reads_u8(const SweepShape& s) {
  return (s.op == SweepOp::conv || s.op == SweepOp::depthwise_conv) && !s.plain_input && !s.float_input && !s.signed_input;
}

std::vector<std::string> sweep_pipeline(const std::string& dtype) {
  std::vector<std::string> passes = pipeline_parse(dtype == "bf16"   ? "default+mixed_precision_bf16"
                                                   : dtype == "int8" ? "default+quantize_int8"
                                                                     : "default");
  // Depth-first fusion would merge the producer into the op; whether to fuse is the planner's
  // choice between measured single ops, so it is left out here.
  std::erase(passes, "fuse_depth_first");
  return passes;
}

SweepShape sweep_as_run(const SweepShape& shape, const std::string& dtype) {
  SweepShape as_run = shape;
  as_run.rows_input = shape.op == SweepOp::gemm && dtype != "f32" && !shape.float_input;
  as_run.codes_out = (shape.op == SweepOp::conv || shape.op == SweepOp::depthwise_conv) && dtype == "int8" && !shape.residual &&
                     shape.copies == 1;
  return as_run;
}

BenchPoint sweep_point(const SweepShape& shape, const std::string& dtype, int threads, const TimingOptions& timing) {
  BenchPoint p;
  p.record = sweep_record(shape, dtype, threads, dtype_element_bytes(dtype));
  p.measure = [shape, timing](Measurement& out) { return measure_shape(shape, timing, out); };
  return p;
}

std::vector<BenchPoint> sweep_points(const TargetFingerprint& fp, const BenchPlanOptions& options,
                                     std::vector<SkippedBenchmark>* skipped) {
  std::vector<std::string> dtypes;
  for (const char* d : kSweepDtypes) {
    const std::string why = fingerprint_dtype_unsupported(fp, d);
    if (why.empty()) dtypes.push_back(d);
    else if (skipped) skipped->push_back({kKindKernel, d, why});
  }
  TimingOptions timing = options.timing;
  timing.budget_ms = options.quick ? 10 : 60;
  timing.min_runs = options.quick ? 3 : 5;
  timing.warmup = 1;
  std::vector<BenchPoint> points;
  std::vector<SweepShape> shapes = sweep_grid(options.quick);
  for (const SweepShape& s : sweep_border_grid(options.quick)) shapes.push_back(s);
  const bool avx512 = std::find(fp.isa.begin(), fp.isa.end(), "avx512f") != fp.isa.end();
  for (const SweepShape& shape : shapes) {
    if (shape.op == SweepOp::depth_first && !avx512) continue;  // fuse_depth_first runs on AVX-512 only
    const bool reduced_only = shape.float_input;  // a float32 conv reading float32 converts nothing
    for (const std::string& dtype : dtypes) {
      if (dtype != "f32" && !sweep_op_has_precisions(shape.op)) continue;
      if (dtype == "f32" && reduced_only) continue;
      if (dtype != "int8" && shape.signed_input) continue;  // signedness is int8's alone
      // An int8 pipeline keeps LayerNorm in float32, as the f32 points time it.
      if (dtype == "int8" && shape.op == SweepOp::layernorm) continue;
      const SweepShape as_run = sweep_as_run(shape, dtype);
      for (int threads : options.threads) points.push_back(sweep_point(as_run, dtype, threads, timing));
    }
  }
  return points;
}

}  // namespace kiln::perf
