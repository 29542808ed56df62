// Dense vs CSR (kernels/cpu/sparse_gemm.cpp) on real layer shapes at several sparsities: the
// same measurement prune_magnitude makes per node (sparse_timing_measure: the kernel the engine
// would select without the mark vs the marked node, 9 alternating runs after 3 warm-ups, medians).
// Weights are random with a random `sparsity` of them zero. Prints a table; asserts nothing.
// Usage: kiln_sparse_gemm_bench [THREADS]   (default: the CPU quota)
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "compilers/passes/prune_magnitude.h"
#include "kernels/cpu/pixel_order.h"
#include "kernels/engine.h"

using namespace kiln;

namespace {

struct Case {
  const char* name;
  OpKind op;
  Shape x, w;  // Gemm: x [M, K], w [N, K] (transB); Conv: x [N, C, H, W], w [Co, C, 1, 1]
  bool nhwc = false;
};

Tensor random_weight(const Shape& shape, double sparsity, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::uniform_real_distribution<double> keep(0.0, 1.0);
  Tensor t = Tensor::zeros(DType::f32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = keep(rng) < sparsity ? 0.0f : dist(rng);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : cpu_quota_threads();
  const std::vector<Case> cases = {
      {"resnet50 fc 2048->1000, batch 1", OpKind::Gemm, {1, 2048}, {1000, 2048}},
      {"resnet50 fc 2048->1000, batch 16", OpKind::Gemm, {16, 2048}, {1000, 2048}},
      {"1x1 conv 256->64 @56x56, NCHW", OpKind::Conv, {1, 256, 56, 56}, {64, 256, 1, 1}},
      {"1x1 conv 256->64 @56x56, NHWC", OpKind::Conv, {1, 256, 56, 56}, {64, 256, 1, 1}, true},
      {"mbv2 1x1 24->144 @56x56, NHWC", OpKind::Conv, {1, 24, 56, 56}, {144, 24, 1, 1}, true},
      {"mbv2 1x1 144->24 @56x56, NHWC", OpKind::Conv, {1, 144, 56, 56}, {24, 144, 1, 1}, true},
      {"mbv2 1x1 384->64 @14x14, NHWC", OpKind::Conv, {1, 384, 14, 14}, {64, 384, 1, 1}, true},
      {"mbv2 1x1 960->160 @7x7, NHWC", OpKind::Conv, {1, 960, 7, 7}, {160, 960, 1, 1}, true},
      {"mbv2 1x1 320->1280 @7x7, NHWC", OpKind::Conv, {1, 320, 7, 7}, {1280, 320, 1, 1}, true},
  };
  std::printf("threads %d; medians of 9 alternating runs after 3 warm-ups; ms\n", threads);
  std::printf("%-34s %8s  %-16s %9s %9s %8s\n", "layer", "sparsity", "dense kernel", "dense", "csr", "speedup");
  for (const Case& c : cases) {
    for (double sparsity : {0.5, 0.8, 0.9, 0.95}) {
      const Tensor w = random_weight(c.w, sparsity, 42);
      const Tensor bias = random_weight({c.w[0]}, 0.0, 43);
      Attrs dense_attrs;
      if (c.op == OpKind::Gemm) dense_attrs.set("transB", int64_t{1});
      Attrs sparse_attrs = dense_attrs;
      sparse_attrs.set(std::string(kSparseKernelAttr), std::string("csr"));
      KernelBuild b;
      b.op = c.op;
      b.attrs = &dense_attrs;
      b.node_name = c.name;
      b.threads = threads;
      ValueDesc x;
      x.shape = c.x;
      if (c.nhwc) x.layout = cpu::nhwc_layout(c.x, threads);
      ValueDesc wd;
      wd.shape = c.w;
      wd.constant = &w;
      ValueDesc bd;
      bd.shape = {c.w[0]};
      bd.constant = &bias;
      b.inputs = {x, wd, bd};
      ValueDesc y;
      y.shape = c.op == OpKind::Gemm ? Shape{c.x[0], c.w[0]} : Shape{c.x[0], c.w[0], c.x[2], c.x[3]};
      b.outputs = {y};
      KernelBuild s = b;
      s.attrs = &sparse_attrs;
      auto t = sparse_timing_measure(b, s);
      if (!t) {
        std::printf("%-34s %8.2f  error: %s\n", c.name, sparsity, t.error().message.c_str());
        continue;
      }
      std::printf("%-34s %8.2f  %-16s %9.4f %9.4f %7.2fx\n", c.name, sparsity, t->dense_kernel.c_str(), t->dense_ms,
                  t->sparse_ms, t->dense_ms / t->sparse_ms);
    }
  }
  return 0;
}
