#include "kernels/core/shape.h"

#include <cassert>
#include <sstream>

namespace kiln {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> shape_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

std::string shape_to_string(const Shape& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? "," : "") << shape[i];
  os << ']';
  return os.str();
}

std::string sym_shape_to_string(const SymShape& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) os << ',';
    if (shape[i].known()) os << shape[i].value;
    else os << (shape[i].symbol.empty() ? "?" : shape[i].symbol);
  }
  os << ']';
  return os.str();
}

bool sym_shape_is_concrete(const SymShape& shape) {
  for (const Dim& d : shape)
    if (!d.known()) return false;
  return true;
}

Shape sym_shape_concrete(const SymShape& shape) {
  Shape out;
  out.reserve(shape.size());
  for (const Dim& d : shape) {
    assert(d.known());
    out.push_back(d.value);
  }
  return out;
}

SymShape sym_shape_from(const Shape& shape) { return SymShape(shape.begin(), shape.end()); }

}  // namespace kiln
