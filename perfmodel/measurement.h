// One benchmark record: what was measured (kind, op, every shape parameter, dtype, threads),
// the features a latency predictor needs (MACs, bytes moved, backend, kernel, layout) and the
// timing (median, p10, p90, run count). Shared by the micro-benchmarks, the store and the JSON
// profile.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::perf {

// Which micro-benchmark produced a record.
inline constexpr const char* kKindPeak = "peak";            // compute-bound oneDNN matmul
inline constexpr const char* kKindBandwidth = "bandwidth";  // streaming read of a working set
inline constexpr const char* kKindKernel = "kernel";        // a one-op graph on the compiled engine
// A conv timed per copy among `copies` side by side with weights of their own (weight_reuse.h):
// working_set_bytes = every copy's weights as stored. Not a kernel row: the predictor reads the
// time over the one-copy point as the cost of refetching a layer's weights from further away.
inline constexpr const char* kKindWeightReuse = "weight_reuse";
// A GPU's host link: a whole run (inputs copied in from pageable memory, outputs back) less its
// device time; bytes = the inputs' and outputs' bytes (perfmodel/host_link.h).
inline constexpr const char* kKindHostLink = "host_link";
// A kernel row measured at a region border (the sweep's plain_input shapes): its op is the
// interior op's name and this ("conv_from_plain", "depthwise_conv_from_plain").
inline constexpr const char* kFromPlainSuffix = "_from_plain";
// The sweep's float_input shapes: a bf16/int8 conv reading float32 in its own format ("conv_from_f32").
inline constexpr const char* kFromFloatSuffix = "_from_f32";
// The sweep's silu shapes: a conv or depthwise conv with a fused SiLU ("conv_silu").
inline constexpr const char* kSiluSuffix = "_silu";
// The sweep's residual shapes: a conv whose output is summed with a residual input inside the kernel
// (oneDNN's sum post-op, then ReLU: a ResNet block's last conv), "conv_sum".
inline constexpr const char* kResidualSuffix = "_sum";
// The sweep's signed_input shapes: an int8 conv or depthwise conv reading s8 ("conv_from_s8").
inline constexpr const char* kFromSignedSuffix = "_from_s8";
// The key prefix of int8 conv-family points that read u8 (every int8 conv point but the border
// ones that read float32 or s8). Points keyed without it were measured before 2026-11-29, on s8.
inline constexpr const char* kUnsignedInputKeyPrefix = "u8in ";
// The key prefix of int8 gemm points timed as the 1x1 convolution kiln runs them as where oneDNN's
// int8 matmul repacks its weights on every call (int8_matmul_packs_weights_per_call: AVX2 without
// VNNI; since 2026-11-29). Points keyed without it on such a CPU timed the matmul: 1.5-11x slower
// at one to 32 rows.
inline constexpr const char* kGemmAsConvKeyPrefix = "1x1conv ";
// The key prefix of max pool points timed on kiln's own pool over codes (cpu.max_pool_codes: bf16 and
// int8 since 2026-12-06, float32 since 2026-12-07). Points keyed without it timed oneDNN 2.6's pools:
// bf16 converts every element, u8 runs at float32's speed (2-4x slower; GoogLeNet bf16's 13 pools,
// AMX Xeon, 1 thread: 2.0 vs 0.7 ms), float32 1.2-1.6x slower.
inline constexpr const char* kPoolCodesKeyPrefix = "codes ";
// The key prefix of int8 max pool points whose pool an int8 conv reads (since 2026-12-08). Before, the
// pool's output left the sweep graph, so the pool ran on floats (oneDNN's pool after a dequantizing
// producer): ResNet-18's stem pool at batch 8 priced 2.4 ms where the model's pool over codes took 0.5.
inline constexpr const char* kPoolInt8CodesKeyPrefix = "read codes ";
// The key prefixes of max pool points whose input a 1x1 conv widening 16 float32 channels writes, so it is
// warm in the caches as a model's previous layer leaves it (since 2026-12-07, session 17). Before, a depthwise
// producer read an input as large as the pool's (four times it in int8) and evicted most of what it wrote:
// SqueezeNet's 64x111x111 k3 s2 pool at batch 8, one thread, int8: 0.76 ms in the sweep, 0.30-0.39 in the model.
inline constexpr const char* kPoolWarmCodesKeyPrefix = "warm codes ";
inline constexpr const char* kPoolWarmInt8CodesKeyPrefix = "warm read codes ";
// The key prefix of int8 points of a conv reading float32 (float_input: after a float BatchNormalization
// + ReLU, since 2026-12-08). Before, the float input was a bare Concat of int8 producers, which joined
// their codes: the conv read u8 and the points timed no conversion at all.
inline constexpr const char* kQuantizedFloatInputKeyPrefix = "quantized ";
// The key prefix of int8 ConcatAffine points whose parts are their int8 producers' codes (since 2026-12-06,
// session 10: a conv read only by ConcatAffines writes codes, which the ConcatAffine reads with their scale).
// Before, the parts were float32: 4x the bytes read (DenseNet-121 int8 b8, 1 thread: 21.9 vs 15.9 ms).
inline constexpr const char* kConcatAffineCodesKeyPrefix = "codes in ";
// The key prefix of concat points whose Concat a conv reads, as a model's next layer reads its joined
// channels (since 2026-12-07, session 16; every dtype, as bf16 and int8 were first swept then). Before, the
// output left the graph (float32 only): an int8 model's Concat of codes (SqueezeNet's fire modules, 64->128
// 55x55 b8, one thread: 0.43-0.48 ms) was priced from those float32 points at 1.09 ms.
inline constexpr const char* kConcatReadKeyPrefix = "read ";
// Convolutions reading at most kStemMaxChannels channels (an image model's first layer) are their own group: oneDNN
// runs them at a tenth of a wider conv's rate (3->24 3x3 s2 at 224x224, batch 8, one thread: 2.3 ms, ~29 GMAC/s), and
// in the "conv" group they pulled its roofline down (int8 384 -> 362 GMAC/s, six more whole-model misses).
inline constexpr const char* kStemConvOp = "conv_stem";
inline constexpr int64_t kStemMaxChannels = 4;
// The key prefix of residual conv points ("conv_sum") whose output a conv reads, as the next block reads a
// ResNet block's (since 2026-12-07, session 13): an int8 one then writes u8 codes and sums the residual's codes
// in place, a bf16 one writes bfloat16. Before, the output left the graph, so an int8 sum conv wrote float32
// and first dequantized its u8 residual into that buffer (128->512 28x28 b8, one thread: 3.10 ms in the sweep,
// 1.7-1.9 in ResNet-50, whose int8 cases the residual group priced 13-37% slow).
inline constexpr const char* kResidualChainedKeyPrefix = "chained ";
// The key prefix of int8 conv-family points (every op but the residual "conv_sum", keyed kResidualChainedKeyPrefix)
// whose output a depthwise conv reads, so that they write u8/s8 codes as a model's interior convs do (since
// 2026-12-07, session 16; SweepShape::codes_out). Before, their output left the graph and they wrote float32: 4x
// the bytes written (SqueezeNet's 16->64 3x3 55x55 b32, one thread: 3.9-4.0 ms in the sweep, 2.8 in the model).
// The prefix goes before the others: "to codes u8in conv ...", "to codes quantized f32in conv ...".
inline constexpr const char* kInt8CodesOutKeyPrefix = "to codes ";
inline constexpr const char* kInt8CodesOutU8KeyPrefix = "to codes u8in ";            // the interior conv/depthwise_conv
inline constexpr const char* kInt8CodesOutQuantizedKeyPrefix = "to codes quantized ";  // conv_from_f32
// The key prefix of bf16/int8 gemm points whose A is a producer MatMul's output in the gemm's own precision
// (bfloat16 rows, s8 codes), as a transformer's or ConvNeXt's second Linear reads its first's (since
// 2026-12-06, session 11). Before, A was a float32 graph input converted inside the timed step (ConvNeXt-T
// bf16 b8, a stage-1 second Linear: 7.55 ms priced from those, 3.44 measured); such points are now the
// border points "gemm_from_f32" (a classifier after its pooling), keyed "f32in ".
inline constexpr const char* kGemmRowsInputKeyPrefix = "rows in ";
// The group a gemm's float32 A costs beyond the interior gemm when a bf16/int8 Gemm/MatMul converts it in
// its own step (fitted from the "gemm_from_f32" border points; features: M x K elements).
inline constexpr const char* kRowConversionOp = "convert_rows";
// The prefix that marks a point of `op` in `dtype` measured the way this kiln runs it, where points
// of that op and dtype measured otherwise before may be in a store ("" when none: nothing is
// superseded).
inline std::string_view current_key_prefix(std::string_view op, std::string_view dtype) {
  if (op.starts_with("conv") && op.substr(4) == kResidualSuffix) return kResidualChainedKeyPrefix;
  const bool conv_family = op == "conv" || op.starts_with("conv_") || op.starts_with("depthwise_conv");
  if (dtype == "int8" && (op == "conv" || op == "depthwise_conv")) return kInt8CodesOutU8KeyPrefix;
  if (dtype == "int8" && conv_family && op.ends_with(kFromFloatSuffix)) return kInt8CodesOutQuantizedKeyPrefix;
  if (dtype == "int8" && conv_family) return kInt8CodesOutKeyPrefix;
  if ((dtype == "int8" || dtype == "bf16") && op == "gemm") return kGemmRowsInputKeyPrefix;
  if (dtype == "int8" && op.ends_with(kFromFloatSuffix)) return kQuantizedFloatInputKeyPrefix;
  if (op == "maxpool") return dtype == "int8" ? kPoolWarmInt8CodesKeyPrefix : kPoolWarmCodesKeyPrefix;
  if (dtype == "int8" && op == "concat_affine") return kConcatAffineCodesKeyPrefix;
  if (op == "concat") return kConcatReadKeyPrefix;
  return "";
}
// Bytes per element of a compute dtype: "f32" and "tf32" 4 (TF32 stores float32), "bf16" and "f16" 2,
// "int8" 1. A GPU profile's steps carry "f16"; the CPU's never do.
inline double dtype_element_bytes(std::string_view dtype) {
  if (dtype == "f32" || dtype == "tf32") return 4;
  if (dtype == "bf16" || dtype == "f16") return 2;
  return 1;
}

// A whole model as `kiln optimize` measured it (key "<model sha256> <precision> b<batch> t<threads>",
// kernel = the model's sha256). Never fitted on: it corrects later predictions of that same model.
inline constexpr const char* kKindModel = "model";

struct Measurement {
  std::string kind;   // kKindPeak, kKindBandwidth, kKindKernel
  std::string key;    // the point's identity within (kind, dtype, threads): "conv k3 s1 64->64 56x56 b1"
  std::string op;     // "conv", "depthwise_conv", "gemm", "maxpool", "avgpool", "global_avgpool", "add",
                      // "matmul" (peak), "read" (bandwidth)
  std::string dtype;  // "f32", "bf16", "int8"
  int threads = 1;
  int64_t batch = 1;
  // Shape parameters (0 where they do not apply): activations NCHW in and out, the kernel window,
  // stride, padding per side, groups; a Gemm is M (= batch) x K -> N.
  int64_t in_c = 0, in_h = 0, in_w = 0, out_c = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 0, kernel_w = 0, stride = 0, pad = 0, groups = 0;
  int64_t m = 0, n = 0, k = 0;
  int64_t working_set_bytes = 0;  // bandwidth: the buffer read
  double macs = 0;                // multiply-accumulates (peak, conv, gemm); comparisons/adds for pooling
  double bytes = 0;               // inputs + weights + outputs in the dtype they are stored in
  std::string backend;            // "onednn", "cpu" (kiln's own), "reference"
  std::string kernel;             // the engine's implementation name(s), "+"-joined
  std::string layout;             // the main step's output layout
  double median_ms = 0, p10_ms = 0, p90_ms = 0;
  int runs = 0;
  double total_median_ms = 0;  // kernel: the whole one-op graph including the layout conversions at its borders
  double throughput = 0;       // peak: GFLOP/s (Gop/s for int8); bandwidth: GB/s; kernel: GFLOP/s from macs
  std::string measured_at;     // UTC, ISO 8601
  // The load while measured: the threads used plus the CPUs other processes kept busy
  // (microbench/foreign_load.h). Rows from before 2026-11-24 hold the 1-minute load average, which
  // counts the benchmark's own threads too. Above threads + kLoadSlack: a shared, noisy core.
  double load_avg = 0;
};

// How far a point's load may exceed its threads and still count as quiet: jiffy resolution of the
// foreign-load meter, and old rows' load average lagging behind the benchmark's own threads.
constexpr double kLoadSlack = 0.5;

// Whether a point was measured under load: the fit drops it, and a re-measurement never averages with it.
inline bool measured_under_load(const Measurement& m) { return m.load_avg > m.threads + kLoadSlack; }

// Every field of Measurement, in one list: the store's columns and the JSON profile's keys are
// generated from it, so a field added here is stored and exported everywhere.
#define KILN_MEASUREMENT_FIELDS(X)                                                                         \
  X(kind) X(key) X(op) X(dtype) X(threads) X(batch) X(in_c) X(in_h) X(in_w) X(out_c) X(out_h) X(out_w)    \
  X(kernel_h) X(kernel_w) X(stride) X(pad) X(groups) X(m) X(n) X(k) X(working_set_bytes) X(macs) X(bytes) \
  X(backend) X(kernel) X(layout) X(median_ms) X(p10_ms) X(p90_ms) X(runs) X(total_median_ms)           \
  X(throughput) X(measured_at) X(load_avg)

}  // namespace kiln::perf
