// prune_magnitude: unstructured magnitude pruning, without fine-tuning. Sets to zero the
// smallest-magnitude weights of the eligible layers: with one global threshold over all of them
// (ctx.prune.sparsity of all their weights; layers that matter less lose more), or with
// ctx.prune.per_layer the same fraction in every layer. Exactly round(sparsity * count) weights
// end at zero (ties broken in weight order) unless more already were: weights already that sparse
// are left as they are.
// Eligible: Conv with group 1, Gemm and MatMul whose weight (input 1) is a float32 initializer,
// with at least kPruneMinWeights weights. Skipped: depthwise and grouped convolutions (a few
// weights per output channel, each of them load-bearing, and no sparse kernel takes them) and
// tiny layers such as an image model's first convolution over 1-3 input channels (a negligible
// share of the weights, the most sensitive layer). A weight shared by several nodes counts once.
// Then, per pruned node, it decides whether the sparse kernel (kernels/cpu/sparse_gemm.cpp, CSR)
// runs it: when that kernel takes the node, both it and the dense kernel the engine would select
// are built for the node's shapes (ctx.bindings; a Conv's input in the NHWC layout oneDNN
// convolutions write here, plain when it is a graph input), timed on the spot (alternating
// runs, so both see the same load; medians of 9 after 3 warm-ups) and the node is marked sparse_kernel="csr" only when the sparse one was
// faster. Each layer's sparsity and both times go to ctx.log, marked "(no fine-tuning)".
// Not in the default pipeline, and not exact: it changes the model's function; its accuracy cost
// must be measured (kiln verify with labels). Place: after the fusions whose epilogue a Conv/Gemm
// takes (the kernels see the fused node), before quantize_int8 and mixed_precision_bf16 (a node
// those mark is not run by the float32 sparse kernel).
#pragma once

#include <functional>
#include <string>

#include "compilers/passes/pass.h"
#include "kernels/cpu/cpu_kernels.h"  // kSparseKernelAttr: "csr" where the sparse kernel runs
#include "kernels/kernel.h"

namespace kiln {

inline constexpr int64_t kPruneMinWeights = 1024;

Result<bool> pass_prune_magnitude(Graph& graph, const PassContext& ctx);

// One node's measurement: the median times of the dense kernel (the one kernel_select picks
// without the mark) and of the sparse kernel on the same shapes.
struct SparseTiming {
  std::string dense_kernel;  // e.g. "onednn.gemm"
  std::string sparse_kernel;  // e.g. "cpu.sparse_gemm.avx512"
  double dense_ms = 0;
  double sparse_ms = 0;
};

// The decision: the sparse kernel runs only where it was measured faster.
inline bool sparse_kernel_pays(const SparseTiming& t) { return t.sparse_ms < t.dense_ms; }

// Builds and times both kernels; `sparse` is `dense` with the node marked. An error means the
// node is left dense (with the reason in the log).
using SparseTimer = std::function<Result<SparseTiming>(const KernelBuild& dense, const KernelBuild& sparse)>;

// The real timer: builds both kernels and runs each a few times on random inputs.
Result<SparseTiming> sparse_timing_measure(const KernelBuild& dense, const KernelBuild& sparse);

// The pass with the timer given (tests inject timings so that the decision is deterministic).
Result<bool> prune_magnitude_run(Graph& graph, const PassContext& ctx, const SparseTimer& timer);

}  // namespace kiln
