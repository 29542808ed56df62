// Typed node attributes (the ONNX attribute kinds kiln uses) with checked accessors.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "kernels/core/status.h"
#include "kernels/core/tensor.h"

namespace kiln {

using AttrValue = std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
                               std::vector<std::string>, Tensor>;

class Attrs {
 public:
  void set(const std::string& name, AttrValue value) { values_[name] = std::move(value); }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  void erase(const std::string& name) { values_.erase(name); }
  const std::map<std::string, AttrValue>& all() const { return values_; }

  // Accessors with a default: return the default when the attribute is absent, and an
  // invalid_argument error naming the attribute when it is present with another kind.
  Result<int64_t> get_int(const std::string& name, int64_t fallback) const;
  Result<float> get_float(const std::string& name, float fallback) const;
  Result<std::string> get_string(const std::string& name, const std::string& fallback) const;
  Result<std::vector<int64_t>> get_ints(const std::string& name, std::vector<int64_t> fallback = {}) const;
  Result<std::vector<float>> get_floats(const std::string& name, std::vector<float> fallback = {}) const;
  Result<std::vector<std::string>> get_strings(const std::string& name, std::vector<std::string> fallback = {}) const;
  // Required tensor attribute: an error when absent.
  Result<Tensor> get_tensor(const std::string& name) const;

 private:
  std::map<std::string, AttrValue> values_;
};

std::string attr_value_to_string(const AttrValue& value);  // for the IR dump

}  // namespace kiln
