#include "perfmodel/priors.h"

#include <algorithm>
#include <cctype>

namespace kiln::perf {
namespace {

// Dense throughput (no 2:4 sparsity), the boost-clock figures the vendors publish.
const std::vector<TargetPrior>& priors() {
  static const std::vector<TargetPrior> table = {
      // NVIDIA H100 Tensor Core GPU datasheet (SXM5): FP32 67 TF, TF32 495, BF16/FP16 989.5,
      // INT8 1979 TOPS (dense), HBM3 3.35 TB/s, 80 GB.
      {"nvidia-h100-sxm", "NVIDIA H100 SXM5 80GB", "gpu", {"h100"},
       {{"f32", 67}, {"tf32", 494.7}, {"bf16", 989.4}, {"f16", 989.4}, {"int8", 1978.9}}, 3350, 80,
       "NVIDIA H100 Tensor Core GPU datasheet (SXM5, dense; PCIe Gen5 x16)", 0, 64},
      // NVIDIA H200 Tensor Core GPU datasheet (SXM): the H100's compute, HBM3e 4.8 TB/s, 141 GB.
      {"nvidia-h200-sxm", "NVIDIA H200 SXM 141GB", "gpu", {"h200"},
       {{"f32", 67}, {"tf32", 494.7}, {"bf16", 989.4}, {"f16", 989.4}, {"int8", 1978.9}}, 4800, 141,
       "NVIDIA H200 Tensor Core GPU datasheet (SXM, dense; PCIe Gen5 x16)", 0, 64},
      // NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB): FP32 19.5 TF, TF32 156, BF16/FP16 312,
      // INT8 624 TOPS (dense), HBM2e 2039 GB/s.
      {"nvidia-a100-sxm4-80gb", "NVIDIA A100 SXM4 80GB", "gpu", {"a100"},
       {{"f32", 19.5}, {"tf32", 156}, {"bf16", 312}, {"f16", 312}, {"int8", 624}}, 2039, 80,
       "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB, dense; PCIe Gen4 x16)", 0, 32},
      // NVIDIA L4 datasheet: FP32 30.3 TF, TF32 60, BF16/FP16 121, INT8 242.5 TOPS (dense: half the
      // sparse figures printed), GDDR6 300 GB/s, 24 GB.
      {"nvidia-l4", "NVIDIA L4 24GB", "gpu", {"nvidia l4", " l4"},
       {{"f32", 30.3}, {"tf32", 60}, {"bf16", 121}, {"f16", 121}, {"int8", 242.5}}, 300, 24,
       "NVIDIA L4 Tensor Core GPU datasheet (dense; PCIe Gen4 x16)", 0, 32},
      // NVIDIA T4 datasheet: FP32 8.1 TF, mixed FP16/FP32 65 TF, INT8 130 TOPS, GDDR6 320 GB/s,
      // 16 GB. Turing has no bf16.
      {"nvidia-t4", "NVIDIA T4 16GB", "gpu", {"tesla t4", "nvidia t4"},
       {{"f32", 8.1}, {"f16", 65}, {"int8", 130}}, 320, 16, "NVIDIA T4 Tensor Core GPU datasheet (PCIe Gen3 x16)", 0, 16},
      // NVIDIA V100 datasheet (SXM2 32GB): FP32 15.7 TF, tensor FP16 125 TF, HBM2 900 GB/s. Volta
      // has neither bf16 nor int8 tensor cores.
      {"nvidia-v100-sxm2-32gb", "NVIDIA V100 SXM2 32GB", "gpu", {"v100"},
       {{"f32", 15.7}, {"f16", 125}}, 900, 32, "NVIDIA V100 Tensor Core GPU datasheet (SXM2; PCIe Gen3 x16)", 0, 16},
      // AMD EPYC 9654 product page: 96 Zen 4 cores, 2.4 GHz base, 12 channels DDR5-4800
      // (12 x 38.4 = 460.8 GB/s). Peaks derived per core and cycle: two 256-bit FMA pipes = 32 f32
      // FLOP, AVX512_BF16 64, AVX512-VNNI 128 int8 ops, at the base clock.
      {"amd-epyc-9654", "AMD EPYC 9654 (96 cores, Zen 4)", "cpu", {"epyc 9654"},
       {{"f32", 7.37}, {"bf16", 14.7}, {"int8", 29.5}}, 460.8, 768,
       "AMD EPYC 9654 product page (cores, base clock, DDR5-4800 x 12); FLOP/cycle from the Zen 4 core", 96},
      // Intel Xeon Platinum 8480+ (ark.intel.com): 56 Sapphire Rapids cores, 2.0 GHz base, 8
      // channels DDR5-4800 (307 GB/s). Per core and cycle: two AVX-512 FMA = 64 f32 FLOP, AMX 1024
      // bf16 FLOP and 2048 int8 ops, at the base clock.
      {"intel-xeon-8480plus", "Intel Xeon Platinum 8480+ (56 cores, Sapphire Rapids)", "cpu", {"8480"},
       {{"f32", 7.17}, {"bf16", 114.7}, {"int8", 229.4}}, 307.2, 512,
       "Intel ark (cores, base clock, DDR5-4800 x 8); FLOP/cycle from Intel's AMX documentation", 56},
  };
  return table;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::span<const TargetPrior> target_priors() { return priors(); }

const TargetPrior* target_prior_find(const std::string& id) {
  for (const TargetPrior& p : priors())
    if (p.id == id) return &p;
  return nullptr;
}

std::string prior_replaced_by(const TargetPrior& prior, const std::vector<StoredTarget>& stored) {
  for (const StoredTarget& t : stored) {
    if (t.measurements == 0) continue;
    std::string model(" ");  // a leading space lets " l4" match at the start
    model += lower(t.fingerprint.cpu_model);
    for (const std::string& m : prior.match)
      if (model.find(m) != std::string::npos) return t.fingerprint.id;
  }
  return {};
}

const TargetPrior* prior_replaced(const StoredTarget& target) {
  for (const TargetPrior& p : priors())
    if (prior_replaced_by(p, {target}) == target.fingerprint.id) return &p;
  return nullptr;
}

}  // namespace kiln::perf
