// Shapes. Concrete shapes are vectors of int64; symbolic shapes (used by shape inference in the
// IR) have dimensions that are either a known size or a named symbol such as "batch".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);          // 1 for rank 0
std::vector<int64_t> shape_strides(const Shape& shape);  // row-major, in elements
std::string shape_to_string(const Shape& shape);  // "[1,3,224,224]"

// One dimension of a symbolic shape: a known size (value >= 0) or an unknown size, which may
// carry a symbol name ("batch") when it is known to equal a named graph dimension.
struct Dim {
  int64_t value = -1;
  std::string symbol;

  Dim() = default;
  Dim(int64_t v) : value(v) {}  // NOLINT: implicit so that SymShape{1, 3, 224, 224} works
  static Dim named(std::string name) {
    Dim d;
    d.symbol = std::move(name);
    return d;
  }
  static Dim unknown() { return Dim{}; }

  bool known() const { return value >= 0; }
  bool operator==(const Dim& o) const {
    return known() ? value == o.value : (!o.known() && !symbol.empty() && symbol == o.symbol);
  }
};

using SymShape = std::vector<Dim>;

std::string sym_shape_to_string(const SymShape& shape);  // "[batch,3,224,224]", "?" for unknown
bool sym_shape_is_concrete(const SymShape& shape);
Shape sym_shape_concrete(const SymShape& shape);          // asserts concreteness
SymShape sym_shape_from(const Shape& shape);

}  // namespace kiln
