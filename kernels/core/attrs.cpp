#include "kernels/core/attrs.h"

#include <sstream>

namespace kiln {
namespace {

template <typename T>
Result<T> get_as(const std::map<std::string, AttrValue>& values, const std::string& name, T fallback,
                 const char* kind) {
  auto it = values.find(name);
  if (it == values.end()) return fallback;
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  return make_error(ErrorCode::invalid_argument, "attribute '", name, "' must be ", kind);
}

}  // namespace

Result<int64_t> Attrs::get_int(const std::string& name, int64_t fallback) const {
  return get_as<int64_t>(values_, name, fallback, "an int");
}
Result<float> Attrs::get_float(const std::string& name, float fallback) const {
  return get_as<float>(values_, name, fallback, "a float");
}
Result<std::string> Attrs::get_string(const std::string& name, const std::string& fallback) const {
  return get_as<std::string>(values_, name, fallback, "a string");
}
Result<std::vector<int64_t>> Attrs::get_ints(const std::string& name, std::vector<int64_t> fallback) const {
  return get_as<std::vector<int64_t>>(values_, name, std::move(fallback), "a list of ints");
}
Result<std::vector<float>> Attrs::get_floats(const std::string& name, std::vector<float> fallback) const {
  return get_as<std::vector<float>>(values_, name, std::move(fallback), "a list of floats");
}
Result<std::vector<std::string>> Attrs::get_strings(const std::string& name, std::vector<std::string> fallback) const {
  return get_as<std::vector<std::string>>(values_, name, std::move(fallback), "a list of strings");
}
Result<Tensor> Attrs::get_tensor(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return make_error(ErrorCode::invalid_argument, "missing tensor attribute '", name, "'");
  if (const Tensor* t = std::get_if<Tensor>(&it->second)) return *t;
  return make_error(ErrorCode::invalid_argument, "attribute '", name, "' must be a tensor");
}

std::string attr_value_to_string(const AttrValue& value) {
  std::ostringstream os;
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::string>) {
          os << '"' << v << '"';
        } else if constexpr (std::is_same_v<V, Tensor>) {
          os << "tensor " << v.describe();
        } else if constexpr (std::is_same_v<V, int64_t> || std::is_same_v<V, float>) {
          os << v;
        } else {
          os << '[';
          for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
          os << ']';
        }
      },
      value);
  return os.str();
}

}  // namespace kiln
