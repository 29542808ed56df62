// Per-kernel features of a compiled plan, in the sweep's terms (perfmodel/measurement.h): one
// record per step the Engine runs (a fused group -- Conv + bias + activation + residual,
// DepthFirstConv, ElementwiseChain -- is one step, as nn-Meter counts kernels), with the op mapped
// to the sweep's ops (conv, depthwise_conv, gemm, maxpool, avgpool, global_avgpool, add), NCHW
// shapes, MACs, bytes moved, dtype, threads, batch and layout. Steps the sweep has no counterpart
// for (layout conversions, concat, softmax, elementwise chains, batch norm...) keep `op` empty and
// carry only the bytes they move, for a bandwidth estimate.
// Requires: a plan with concrete shapes (compiled for one batch) and the Engine's steps for it.
#pragma once

#include <string>
#include <vector>

#include "kernels/engine.h"
#include "kernels/plan.h"
#include "perfmodel/measurement.h"

namespace kiln::perf {

struct StepFeatures {
  std::string node;    // the plan step's name, or "<value> to plain"
  std::string op;      // the plan op ("Conv", "ToPlain", ...)
  std::string kernel;  // the Engine's implementation
  bool view = false;   // runs no kernel of its own (a view, an in-place reshape)
  double weight_bytes = 0;  // the part of m.bytes read from constants: it does not grow with the batch
  // A transcendental activation fused into a Conv/Gemm/MatMul (SiLU, sigmoid, GELU, tanh): its
  // output elements x the ops of its written-out form (as the sweep's eltwise counts them). The
  // sweep's convolutions fuse ReLU, which costs nothing beside them; these do.
  double epilogue_ops = 0;
  // A residual summed into a Conv's output inside the kernel (oneDNN's sum post-op): its elements.
  // Priced from the sweep's residual convs (the "residual" groups) where the profile has them; else its
  // bytes count in the step's like any input's.
  double residual_elements = 0;
  // A oneDNN conv whose input arrives in another format ("layout": plain float32 after a Slice or
  // Transpose, or the model's input) or only in another precision ("precision": float32 NHWC from
  // a Concat into an int8 conv) converts the input (m.in_c x in_h x in_w per sample) inside its
  // own step. "" when it reads what it computes in, as the sweep's interior points do. A ToPlain
  // of a 4-D value in a oneDNN format: "from layout"; a 4-D Transpose that moves the innermost axis:
  // "transpose" (both: m.in_c/in_h/in_w as NCHW and m.dtype, what it reads; priced as a conversion).
  // A bf16/int8 gemm reading float32 A: "precision" too (its m.m x m.k elements; the "convert_rows" group).
  std::string input_conversion;
  // An int8 Conv reading s8 from its producer (no ReLU before it: a linear bottleneck, SiLU,
  // LayerNorm); one reading u8 is what the sweep's interior int8 points time.
  bool signed_input = false;
  Measurement m;       // kind "kernel"; m.op empty when the sweep has no counterpart
};

// Bytes per element a layout stores ("...:bf16" 2, ":u8"/":s8" 1, else 4).
double layout_element_bytes(const std::string& layout);

// Bytes of the plan's inputs and outputs (what a GPU run copies to and from the host).
int64_t plan_io_bytes(const Plan& plan);

// One record per Engine step, in execution order. `threads` is what the Engine runs with.
std::vector<StepFeatures> plan_features(const Plan& plan, const std::vector<EngineStep>& steps, int threads);

}  // namespace kiln::perf
