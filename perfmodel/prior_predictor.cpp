#include "perfmodel/prior_predictor.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "perfmodel/measurement.h"

namespace kiln::perf {
namespace {

bool is_gpu(const TargetPrior& p) { return p.device == "gpu"; }

// The dtype the prior's table lists for a step's dtype: plain float32 math on a GPU runs on the
// CUDA cores (kiln's default CUDA precision is fp32, not TF32).
std::string table_dtype(const std::string& dtype) { return dtype == "fp16" ? "f16" : dtype; }

}  // namespace

PriorPredictor::PriorPredictor(const TargetPrior& prior, PriorAssumptions assumptions)
    : prior_(prior), assumptions_(assumptions) {}

double PriorPredictor::peak_flops_per_ms(const std::string& dtype) const {
  const std::string d = table_dtype(dtype);
  for (const PriorPeak& p : prior_.peaks)
    if (p.dtype == d) return p.tflops * 1e9;  // 1 TFLOP/s = 1e9 FLOP/ms
  // No native path: float32 math (bf16/int8 emulated through f32 on such a device).
  for (const PriorPeak& p : prior_.peaks)
    if (p.dtype == "f32") return p.tflops * 1e9;
  return 0;
}

bool PriorPredictor::supports(const std::string& dtype) const {
  const std::string d = table_dtype(dtype);
  return std::any_of(prior_.peaks.begin(), prior_.peaks.end(), [&](const PriorPeak& p) { return p.dtype == d; });
}

double PriorPredictor::step_ms(const StepFeatures& step, int threads) const {
  if (step.view) return 0;
  const Measurement& m = step.m;
  const bool gpu = is_gpu(prior_);
  const bool tensor_cores = gpu && m.dtype != "f32" && supports(m.dtype);
  double compute = peak_flops_per_ms(m.dtype) * (tensor_cores ? assumptions_.tensor_core_efficiency : assumptions_.compute_efficiency);
  double bandwidth = prior_.memory_bandwidth_gbs * 1e6 * assumptions_.memory_efficiency;  // GB/s -> bytes/ms
  if (!gpu && prior_.cores > 0) {
    const double share = std::clamp(static_cast<double>(std::max(threads, 1)) / prior_.cores, 0.0, 1.0);
    compute *= share;
    bandwidth *= std::min(1.0, share * assumptions_.core_bandwidth_share);
  }
  const double flops = 2.0 * (m.macs + step.epilogue_ops);
  const double compute_ms = compute > 0 ? flops / compute : 0;
  const double memory_ms = bandwidth > 0 ? m.bytes / bandwidth : 0;
  const double overhead = gpu ? assumptions_.gpu_graph_launch_ms : assumptions_.cpu_step_overhead_ms;
  return overhead + std::max(compute_ms, memory_ms);
}

double PriorPredictor::run_ms(const std::vector<StepFeatures>& steps, int threads, double io_bytes) const {
  double total = 0;
  for (const StepFeatures& s : steps) total += step_ms(s, threads);
  return total + host_copy_ms(io_bytes);
}

double PriorPredictor::host_copy_ms(double io_bytes) const {
  if (!is_gpu(prior_) || !(prior_.host_link_gbs > 0)) return 0;
  return io_bytes / (prior_.host_link_gbs * 1e6 * assumptions_.host_copy_efficiency);  // GB/s -> bytes/ms
}

std::string PriorPredictor::describe() const {
  char buf[512];
  if (is_gpu(prior_))
    std::snprintf(buf, sizeof buf,
                  "%s from its datasheet (prior, not measured): each kernel %.0f%% of the dense peak (%.0f%% on tensor cores) "
                  "or %.0f%% of %.0f GB/s, "
                  "plus %.0f us per launch in a CUDA Graph, inputs and outputs copied at %.0f%% of %.0f GB/s",
                  prior_.name.c_str(), 100 * assumptions_.compute_efficiency, 100 * assumptions_.tensor_core_efficiency,
                  100 * assumptions_.memory_efficiency, prior_.memory_bandwidth_gbs, 1000 * assumptions_.gpu_graph_launch_ms,
                  100 * assumptions_.host_copy_efficiency, prior_.host_link_gbs);
  else
    std::snprintf(buf, sizeof buf,
                  "%s from its spec sheet (prior, not measured): each kernel %.0f%% of the peak of the cores it runs on or "
                  "%.0f%% of %.0f GB/s (at most %.0fx a core's share), plus %.0f us per kernel",
                  prior_.name.c_str(), 100 * assumptions_.compute_efficiency, 100 * assumptions_.memory_efficiency,
                  prior_.memory_bandwidth_gbs, assumptions_.core_bandwidth_share, 1000 * assumptions_.cpu_step_overhead_ms);
  return buf;
}

std::vector<StepFeatures> steps_on_gpu(const std::vector<StepFeatures>& cpu_fp32_steps, const std::string& dtype,
                                       const std::vector<std::string>& keep_fp32) {
  const std::set<std::string> kept(keep_fp32.begin(), keep_fp32.end());
  std::vector<StepFeatures> out;
  out.reserve(cpu_fp32_steps.size());
  for (const StepFeatures& s : cpu_fp32_steps) {
    if (s.op == "ToPlain") continue;  // oneDNN's layout conversions; the CUDA engine runs NCHW throughout
    const std::string at = kept.count(s.node) ? "f32" : dtype;
    const double scale = dtype_element_bytes(at) / 4.0;  // the CPU fp32 plan's bytes at the GPU dtype's width
    StepFeatures g = s;
    g.m.dtype = at;
    g.m.bytes *= scale;
    g.weight_bytes *= scale;
    g.m.threads = 1;
    out.push_back(std::move(g));
  }
  return out;
}

std::string gpu_precision_dtype(const std::string& precision) {
  return precision == "fp16" ? "f16" : precision == "bf16" ? "bf16" : "f32";
}

std::optional<std::string> cuda_precision_refusal(const std::string& precision) {
  if (precision != "fp32" && precision != "fp16" && precision != "bf16") return "kiln's CUDA backend runs fp32, TF32, fp16 and bf16 only";
  return std::nullopt;
}

std::optional<std::string> gpu_precision_refusal(const std::string& precision, const PriorPredictor& prior) {
  if (auto why = cuda_precision_refusal(precision)) return why;
  if (precision != "fp32" && !prior.supports(gpu_precision_dtype(precision))) return prior.prior().name + " has no " + precision + " units";
  return std::nullopt;
}

}  // namespace kiln::perf
