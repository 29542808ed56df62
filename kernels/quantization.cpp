#include "kernels/quantization.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cpu/isa.h"

namespace kiln {

std::string_view quant_type_name(QuantType t) { return t == QuantType::u8 ? "u8" : "s8"; }
int32_t quant_min(QuantType t) { return t == QuantType::u8 ? 0 : -127; }
int32_t quant_max(QuantType t) { return t == QuantType::u8 ? 255 : 127; }

QuantParams quant_params_for_range(float lo, float hi) {
  QuantParams q;
  q.type = lo >= 0.0f ? QuantType::u8 : QuantType::s8;
  const float magnitude = std::max(std::fabs(lo), std::fabs(hi));
  // An all-zero tensor still needs a valid scale; any positive one represents 0 exactly.
  q.scale = magnitude > 0.0f && std::isfinite(magnitude) ? magnitude / static_cast<float>(quant_max(q.type)) : 1e-8f;
  return q;
}

namespace {
std::string attr_name(std::string_view which, std::string_view field) {
  return "int8_" + std::string(which) + "_" + std::string(field);
}
}  // namespace

Result<std::optional<QuantParams>> quant_params_from_attrs(const Attrs& attrs, std::string_view which) {
  const std::string scale_name = attr_name(which, "scale"), type_name = attr_name(which, "type");
  if (!attrs.has(scale_name)) return std::optional<QuantParams>{};
  KILN_ASSIGN(scale, attrs.get_float(scale_name, 0.0f));
  KILN_REQUIRE(scale > 0.0f && std::isfinite(scale), invalid_argument, "attribute ", scale_name,
               " must be a positive finite scale, got ", scale);
  KILN_ASSIGN(type, attrs.get_string(type_name, ""));
  QuantParams q;
  q.scale = scale;
  if (type == "u8") q.type = QuantType::u8;
  else if (type == "s8") q.type = QuantType::s8;
  else return make_error(ErrorCode::invalid_argument, "attribute ", type_name, " must be u8 or s8, got '", type, "'");
  return std::optional<QuantParams>{q};
}

void quant_params_to_attrs(const QuantParams& q, std::string_view which, Attrs& attrs) {
  attrs.set(attr_name(which, "scale"), q.scale);
  attrs.set(attr_name(which, "type"), std::string(quant_type_name(q.type)));
}

void quant_params_erase(std::string_view which, Attrs& attrs) {
  attrs.erase(attr_name(which, "scale"));
  attrs.erase(attr_name(which, "type"));
}

int32_t int8_weight_max_code() { return cpu_has_int8_dot_product() ? 127 : 63; }

std::vector<float> int8_weight_scales(const float* weights, int64_t channels, int64_t per_channel, int32_t max_code) {
  std::vector<float> scales(static_cast<size_t>(channels), 1.0f);
  for (int64_t c = 0; c < channels; ++c) {
    float m = 0.0f;
    const float* w = weights + c * per_channel;
    for (int64_t i = 0; i < per_channel; ++i) m = std::max(m, std::fabs(w[i]));
    if (m > 0.0f) scales[static_cast<size_t>(c)] = m / static_cast<float>(max_code);
  }
  return scales;
}

std::vector<int8_t> int8_quantize_weights(const float* weights, int64_t channels, int64_t per_channel,
                                          const std::vector<float>& scales, int32_t max_code) {
  const float limit = static_cast<float>(max_code);
  std::vector<int8_t> q(static_cast<size_t>(channels * per_channel));
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < per_channel; ++i) {
      const float v = std::nearbyint(weights[c * per_channel + i] / scales[static_cast<size_t>(c)]);
      q[static_cast<size_t>(c * per_channel + i)] = static_cast<int8_t>(std::clamp(v, -limit, limit));
    }
  return q;
}

}  // namespace kiln
