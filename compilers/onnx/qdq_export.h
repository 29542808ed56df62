// int8 compute nodes (precision="int8", kernels/quantization.h) in the QDQ form ONNX Runtime's
// quantizer writes: X -> QuantizeLinear -> DequantizeLinear -> op, weights as an int8
// initializer -> DequantizeLinear (per output channel), bias float32, and a quantized output as
// QuantizeLinear -> DequantizeLinear after the op's epilogue. Zero points are 0 (kiln quantizes
// symmetrically). Internal to the exporter.
#pragma once

#include <string>

#include "compilers/onnx/op_export.h"

namespace kiln::onnx_detail {

// The name the op reads for its input X (input 0): the DequantizeLinear output of X quantized
// with `q`. An X that another int8 node wrote quantized is read as it is (kiln's kernels use an
// input's own scale when it arrives quantized).
Result<std::string> qdq_activation_input(ExportContext& ctx, const Node& node, const QuantParams& q);

// The name the op reads for its weights (input 1, a float32 initializer): the per-channel
// DequantizeLinear of int8 weights quantized with int8_weight_scales/int8_quantize_weights, the
// numbers kiln's int8 kernels use. Channel axis: 0 for Conv, Gemm's output column axis (0 when
// transB, else 1), MatMul B's last axis.
Result<std::string> qdq_weight(ExportContext& ctx, const Node& node);

// src -> QuantizeLinear(q) -> DequantizeLinear(q) -> dst.
void qdq_output(ExportContext& ctx, const Node& node, const QuantParams& q, const std::string& src,
                const std::string& dst);

}  // namespace kiln::onnx_detail
