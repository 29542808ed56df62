// Spec priors: the common accelerators are there with plausible numbers and a source, and a
// prior is replaced once measured data for its device is stored.
#include <catch2/catch.hpp>

#include "perfmodel/prior_predictor.h"
#include "perfmodel/priors.h"
#include "tests/perfmodel/store_samples.h"

using namespace kiln::perf;

TEST_CASE("priors exist for H100, H200, A100, L4, T4, V100 and a few CPUs", "[perfmodel][priors]") {
  for (const char* id : {"nvidia-h100-sxm", "nvidia-h200-sxm", "nvidia-a100-sxm4-80gb", "nvidia-l4", "nvidia-t4",
                         "nvidia-v100-sxm2-32gb"}) {
    INFO(id);
    const TargetPrior* p = target_prior_find(id);
    REQUIRE(p != nullptr);
    CHECK(p->device == "gpu");
    CHECK(p->memory_bandwidth_gbs > 100);
    CHECK(p->memory_gb >= 16);
    CHECK_FALSE(p->source.empty());
    REQUIRE_FALSE(p->peaks.empty());
    CHECK(p->peaks.front().dtype == "f32");
    for (const PriorPeak& k : p->peaks) CHECK(k.tflops > 0);
  }
  int cpus = 0;
  for (const TargetPrior& p : target_priors()) cpus += p.device == "cpu";
  CHECK(cpus >= 2);
  // Spot checks against the datasheets.
  CHECK(target_prior_find("nvidia-h200-sxm")->memory_gb == 141);
  CHECK(target_prior_find("nvidia-a100-sxm4-80gb")->memory_bandwidth_gbs == 2039);
  CHECK(target_prior_find("no-such-gpu") == nullptr);
}

TEST_CASE("a prior is replaced by measured data for its device", "[perfmodel][priors]") {
  const TargetPrior& h100 = *target_prior_find("nvidia-h100-sxm");
  StoredTarget measured;
  measured.fingerprint = testing::sample_fingerprint("NVIDIA H100 80GB HBM3");
  measured.source = "imported";
  measured.measurements = 0;
  CHECK(prior_replaced_by(h100, {measured}).empty());  // a target without data replaces nothing
  measured.measurements = 12;
  CHECK(prior_replaced_by(h100, {measured}) == measured.fingerprint.id);
  CHECK(prior_replaced_by(*target_prior_find("nvidia-a100-sxm4-80gb"), {measured}).empty());
}

TEST_CASE("the prior predictor is a datasheet roofline with stated efficiencies", "[perfmodel][priors]") {
  const TargetPrior& h100 = *target_prior_find("nvidia-h100-sxm");
  const PriorPredictor gpu(h100);
  const PriorAssumptions& a = gpu.assumptions();
  StepFeatures conv;
  conv.op = "Conv";
  conv.m.op = "conv";
  conv.m.dtype = "f16";
  conv.m.batch = 64;  // replayed in a CUDA Graph like every batch
  conv.m.macs = 1e12;
  conv.m.bytes = 1e6;
  // Compute-bound on tensor cores: launch + 2 x MACs / (989.4 TFLOP/s x tensor-core efficiency).
  const double compute_ms = 2e12 / (989.4e9 * a.tensor_core_efficiency);
  CHECK(gpu.step_ms(conv, 1) == Approx(a.gpu_graph_launch_ms + compute_ms).epsilon(1e-9));
  conv.m.dtype = "f32";  // CUDA cores, 67 TFLOP/s
  CHECK(gpu.step_ms(conv, 1) == Approx(a.gpu_graph_launch_ms + 2e12 / (67e9 * a.compute_efficiency)).epsilon(1e-9));
  // Memory-bound.
  StepFeatures copy;
  copy.op = "Transpose";
  copy.m.dtype = "f16";
  copy.m.batch = 1;
  copy.m.bytes = 3350e6;  // one millisecond at the datasheet's 3350 GB/s
  CHECK(gpu.step_ms(copy, 1) == Approx(a.gpu_graph_launch_ms + 1.0 / a.memory_efficiency).epsilon(1e-9));
  StepFeatures view = copy;
  view.view = true;
  CHECK(gpu.step_ms(view, 1) == 0);
  // A run adds the host copies of its inputs and outputs.
  const double io = 64e6;
  CHECK(gpu.run_ms({copy, view}, 1, io) ==
        Approx(gpu.step_ms(copy, 1) + io / (h100.host_link_gbs * 1e6 * a.host_copy_efficiency)).epsilon(1e-9));
  CHECK(gpu.supports("f16"));
  CHECK_FALSE(PriorPredictor(*target_prior_find("nvidia-v100-sxm2-32gb")).supports("bf16"));
  CHECK(gpu.describe().find("prior, not measured") != std::string::npos);

  // A CPU prior: the cores a run uses get their share of the socket's peak, and of its bandwidth
  // up to core_bandwidth_share times their fair share.
  const TargetPrior& epyc = *target_prior_find("amd-epyc-9654");
  REQUIRE(epyc.cores == 96);
  const PriorPredictor cpu(epyc);
  StepFeatures gemm;
  gemm.op = "Gemm";
  gemm.m.op = "gemm";
  gemm.m.dtype = "f32";
  gemm.m.macs = 1e9;
  gemm.m.bytes = 1;
  const double one_core = cpu.step_ms(gemm, 1) - a.cpu_step_overhead_ms;
  CHECK(one_core == Approx(2e9 / (7.37e9 / 96 * a.compute_efficiency)).epsilon(1e-9));
  CHECK(cpu.step_ms(gemm, 8) - a.cpu_step_overhead_ms == Approx(one_core / 8).epsilon(1e-9));
  StepFeatures stream = copy;
  stream.m.bytes = 460.8e6;
  const double all_cores = cpu.step_ms(stream, 96) - a.cpu_step_overhead_ms;
  CHECK(all_cores == Approx(1.0 / a.memory_efficiency).epsilon(1e-9));
  CHECK(cpu.step_ms(stream, 1) - a.cpu_step_overhead_ms == Approx(all_cores * 96 / a.core_bandwidth_share).epsilon(1e-9));
}

TEST_CASE("steps_on_gpu drops the CPU's layout conversions and stores at the precision's width", "[perfmodel][priors]") {
  StepFeatures conv, to_plain;
  conv.op = "Conv";
  conv.m.dtype = "f32";
  conv.m.bytes = 400;
  conv.weight_bytes = 100;
  conv.m.threads = 4;
  to_plain.op = "ToPlain";
  const auto half = steps_on_gpu({conv, to_plain}, "f16");
  REQUIRE(half.size() == 1);
  CHECK(half[0].m.dtype == "f16");
  CHECK(half[0].m.bytes == 200);
  CHECK(half[0].weight_bytes == 50);
  CHECK(half[0].m.threads == 1);
  CHECK(steps_on_gpu({conv}, "f32")[0].m.bytes == 400);
}

TEST_CASE("GPU precisions: their dtypes, and why a GPU cannot run one", "[perfmodel][priors]") {
  CHECK(gpu_precision_dtype("fp32") == "f32");
  CHECK(gpu_precision_dtype("fp16") == "f16");
  CHECK(gpu_precision_dtype("bf16") == "bf16");
  CHECK(steps_on_gpu({StepFeatures{}}, gpu_precision_dtype("bf16"))[0].m.dtype == "bf16");
  const PriorPredictor h100(*target_prior_find("nvidia-h100-sxm"));
  const PriorPredictor t4(*target_prior_find("nvidia-t4"));
  const PriorPredictor v100(*target_prior_find("nvidia-v100-sxm2-32gb"));
  for (const char* p : {"fp32", "fp16", "bf16"}) CHECK_FALSE(gpu_precision_refusal(p, h100));
  CHECK_FALSE(gpu_precision_refusal("fp16", t4));
  CHECK(gpu_precision_refusal("bf16", t4) == "NVIDIA T4 16GB has no bf16 units");
  CHECK(gpu_precision_refusal("bf16", v100) == "NVIDIA V100 SXM2 32GB has no bf16 units");
  CHECK_FALSE(gpu_precision_refusal("fp32", v100));  // every GPU runs fp32
  CHECK(gpu_precision_refusal("int8", h100) == "kiln's CUDA backend runs fp32, TF32, fp16 and bf16 only");
}
