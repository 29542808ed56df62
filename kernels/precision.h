// The arithmetic precision a compute op (Conv, Gemm, MatMul) runs in on the fast kernels, recorded
// by the mixed-precision and quantization passes as the node attribute "precision" ("fp32" when
// absent, "bf16", "int8": see kernels/quantization.h for the int8 scales beside it).
// The reference kernels ignore it: they are the fp32 oracle the verification stage compares with.
// A bf16 op reads and writes bfloat16 activations in oneDNN layouts, so a region of bf16 ops
// converts once at each border (the engine's conversion to plain float32), not per layer.
#pragma once

#include <string_view>

#include "kernels/core/attrs.h"

namespace kiln {

enum class Precision { fp32, bf16, int8 };

inline constexpr std::string_view kPrecisionAttr = "precision";
// On a float32 op whose every reader is a bf16 op (mixed_precision_bf16; ConcatAffine: DenseNet's
// BatchNorm+ReLU before each conv): 1 = it writes its output in bfloat16, which they read as is.
// Its arithmetic stays float32, so it is not a "precision".
inline constexpr std::string_view kBf16OutputAttr = "bf16_output";

std::string_view precision_name(Precision p);  // "fp32", "bf16", "int8"
// The node's precision; an unknown name is an error naming it.
Result<Precision> precision_from_attrs(const Attrs& attrs);
void precision_to_attrs(Precision p, Attrs& attrs);  // fp32 erases the attribute
// Whether the node has bf16_output set (nonzero); an attribute of the wrong type is an error.
Result<bool> bf16_output_from_attrs(const Attrs& attrs);

}  // namespace kiln
