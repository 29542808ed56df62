#include "kernels/core/tensor.h"

#include <cstring>
#include <sstream>
#include <type_traits>

namespace kiln {

Tensor Tensor::zeros(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  const size_t bytes = t.nbytes();
  // 64-byte alignment so that vector kernels may load whole cache lines.
  const size_t padded = (bytes + 63) / 64 * 64 + 64;
  void* p = ::operator new(padded, std::align_val_t{64});
  std::memset(p, 0, padded);
  t.storage_ = std::shared_ptr<const void>(p, [](const void* q) {
    ::operator delete(const_cast<void*>(q), std::align_val_t{64});
  });
  t.data_ = p;
  return t;
}

Tensor Tensor::borrow(DType dtype, Shape shape, const void* data, std::shared_ptr<const void> keep_alive) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.storage_ = std::move(keep_alive);
  t.data_ = const_cast<void*>(data);  // borrowed tensors are treated as read-only by contract
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = zeros(dtype_, shape_);
  if (nbytes() != 0) std::memcpy(t.data_, data_, nbytes());
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  assert(shape_numel(shape) == numel());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

double Tensor::value_as_double(int64_t i) const {
  return visit_dtype(dtype_, [&]<typename T>() -> double {
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
      return static_cast<double>(static_cast<float>(static_cast<const T*>(data_)[i]));
    else
      return static_cast<double>(static_cast<const T*>(data_)[i]);
  });
}

int64_t Tensor::value_as_int(int64_t i) const {
  return visit_dtype(dtype_, [&]<typename T>() -> int64_t {
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
      return static_cast<int64_t>(static_cast<float>(static_cast<const T*>(data_)[i]));
    else
      return static_cast<int64_t>(static_cast<const T*>(data_)[i]);
  });
}

std::string Tensor::describe() const {
  std::ostringstream os;
  os << dtype_name(dtype_) << shape_to_string(shape_);
  return os.str();
}

}  // namespace kiln
