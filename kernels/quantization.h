// int8 quantization parameters as the int8 passes record them on a node and the kernels read them.
// Symmetric everywhere (zero point 0): real = scale * q.
//   - activations: u8 (q in [0, 255]) when the calibrated range is non-negative (after ReLU), else
//     s8 (q in [-127, 127]); one scale per tensor, from calibration (compilers/quantize/);
//   - weights: s8, one scale per output channel, max|w| / 127, computed from the constant weights
//     by int8_weight_scales (the QDQ export writes these numbers); on a CPU without an int8 dot
//     product the kernels use max|w| / 63 instead (int8_weight_max_code).
// A node with precision "int8" (kernels/precision.h) carries:
//   int8_input_scale (float), int8_input_type ("u8"|"s8"): how a float32 input X is quantized
//     (an input already in a quantized layout carries its own scale and is used as is);
//   int8_output_scale, int8_output_type: present when the output is written quantized (its
//     layout then carries the scale); absent: the output is float32.
// The reference kernels ignore all of this: they are the fp32 oracle.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kernels/core/attrs.h"

namespace kiln {

enum class QuantType { u8, s8 };

struct QuantParams {
  float scale = 1.0f;  // > 0, finite
  QuantType type = QuantType::s8;
};

inline constexpr std::string_view kInt8InputScale = "int8_input_scale";
inline constexpr std::string_view kInt8InputType = "int8_input_type";
inline constexpr std::string_view kInt8OutputScale = "int8_output_scale";
inline constexpr std::string_view kInt8OutputType = "int8_output_type";

std::string_view quant_type_name(QuantType t);  // "u8", "s8"
int32_t quant_min(QuantType t);                 // 0, -127
int32_t quant_max(QuantType t);                 // 255, 127

// The parameters for a tensor whose calibrated range is [lo, hi]: u8 when lo >= 0, scale = the
// largest magnitude over the type's largest code (a tiny positive scale for an all-zero range).
QuantParams quant_params_for_range(float lo, float hi);

// Reads int8_input_* (which = "input") or int8_output_* ("output"): nullopt when the scale is
// absent; an error naming the attribute when it is malformed (non-positive scale, unknown type).
Result<std::optional<QuantParams>> quant_params_from_attrs(const Attrs& attrs, std::string_view which);
void quant_params_to_attrs(const QuantParams& q, std::string_view which, Attrs& attrs);
void quant_params_erase(std::string_view which, Attrs& attrs);

// The largest weight code the int8 kernels use on this CPU: 127 with an int8 dot product (VNNI);
// 63 without one, where oneDNN sums pairs of u8 x s8 products in saturating 16 bits
// (2 x 255 x 127 overflows, 2 x 255 x 63 does not): ONNX Runtime's reduce_range, for the same reason.
// (oneDNN's own non-VNNI convolutions halve the weights of an s8 input themselves.)
int32_t int8_weight_max_code();

// Per-output-channel symmetric s8 scales of weights laid out [channels, per_channel...] (Conv's
// [M, C/g, k...]): max|w| / max_code over each channel, 1 where a channel is all zeros.
std::vector<float> int8_weight_scales(const float* weights, int64_t channels, int64_t per_channel, int32_t max_code = 127);
// round(w / scale[c]) clamped to [-max_code, max_code], same layout.
std::vector<int8_t> int8_quantize_weights(const float* weights, int64_t channels, int64_t per_channel,
                                          const std::vector<float>& scales, int32_t max_code = 127);

}  // namespace kiln
