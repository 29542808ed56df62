// Erf on a plain float32 value, element by element with the vector erf of kernels/cpu/activation
// (AVX-512) or std::erf, split over the threads. An Erf that no fusion takes (GELU after a MatMul
// whose bias is not constant, or written out in an unrecognized order) stays off the reference
// kernel. Runs in place where the input dies here.
#include <omp.h>

#include <algorithm>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/cpu_kernels.h"

namespace kiln {
namespace {

class ErfKernel final : public Kernel {
 public:
  ErfKernel(int64_t count, int threads, CpuIsa isa) : count_(count), threads_(threads), isa_(isa) {}
  std::vector<Layout> output_layouts() const override { return {Layout{}}; }
  int in_place_input() const override { return 0; }
  Status run(const KernelArgs& args) override {
    const auto* x = static_cast<const float*>(args.inputs[0]);
    auto* y = static_cast<float*>(args.outputs[0]);
    constexpr int64_t kChunk = 16 * 1024;  // values per task: enough work to pay for a thread
    const int64_t chunks = (count_ + kChunk - 1) / kChunk;
#pragma omp parallel for num_threads(threads_) schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kChunk, n = std::min(kChunk, count_ - begin);
      cpu::erf_values(isa_, x + begin, y + begin, n);
    }
    return Status::ok();
  }

 private:
  int64_t count_;
  int threads_;
  CpuIsa isa_;
};

std::optional<std::string> erf_supports(const KernelBuild& b) {
  if (b.op != OpKind::Erf) return "handles Erf only";
  if (b.inputs.size() != 1 || !b.inputs[0].present || b.inputs[0].dtype != DType::f32) return "needs one float32 input";
  if (!b.inputs[0].layout.plain()) return "the input must be plain (has " + b.inputs[0].layout.describe() + ")";
  if (b.outputs.size() != 1 || b.outputs[0].dtype != DType::f32) return "needs one float32 output";
  return std::nullopt;
}

Result<std::unique_ptr<Kernel>> erf_create(const KernelBuild& b) {
  if (auto why = erf_supports(b)) return make_error(ErrorCode::unsupported, *why);
  const CpuIsa isa = cpu_isa_available(CpuIsa::avx512) ? CpuIsa::avx512
                    : cpu_isa_available(CpuIsa::avx2) ? CpuIsa::avx2
                                                      : CpuIsa::portable;
  return std::unique_ptr<Kernel>(
      std::make_unique<ErfKernel>(static_cast<int64_t>(b.inputs[0].bytes() / sizeof(float)), std::max(1, b.threads), isa));
}

}  // namespace

const KernelImpl kCpuErf{"cpu.erf", erf_supports, erf_create};

}  // namespace kiln
