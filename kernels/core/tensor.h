// Tensor: a dtype, a concrete shape and a reference-counted buffer (owned, or borrowed from a
// memory mapping that the keep-alive handle holds open). Copies are shallow; clone() is deep.
#pragma once

#include <cassert>
#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "kernels/core/dtype.h"
#include "kernels/core/shape.h"

namespace kiln {

class Tensor {
 public:
  Tensor() = default;

  // A zero-filled tensor that owns its buffer.
  static Tensor zeros(DType dtype, Shape shape);
  // A tensor over memory that someone else owns; `keep_alive` holds that memory alive.
  static Tensor borrow(DType dtype, Shape shape, const void* data, std::shared_ptr<const void> keep_alive);
  // A tensor holding a copy of `count` values.
  template <typename T>
  static Tensor from_values(Shape shape, std::span<const T> values) {
    Tensor t = zeros(dtype_of<T>::value, std::move(shape));
    assert(static_cast<int64_t>(values.size()) == t.numel());
    for (size_t i = 0; i < values.size(); ++i) t.data<T>()[i] = values[i];
    return t;
  }
  template <typename T>
  static Tensor scalar(T value) {
    return from_values<T>({}, std::span<const T>(&value, 1));
  }

  bool defined() const { return data_ != nullptr || numel() == 0; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[static_cast<size_t>(i)]; }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }

  template <typename T>
  T* data() {
    assert(dtype_of<T>::value == dtype_);
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* data() const {
    assert(dtype_of<T>::value == dtype_);
    return static_cast<const T*>(data_);
  }
  void* raw() { return data_; }
  const void* raw() const { return data_; }

  Tensor clone() const;
  // Same buffer, another shape with the same element count.
  Tensor reshaped(Shape shape) const;
  // Reads element i as double / int64 whatever the dtype (for shape arithmetic and tests).
  double value_as_double(int64_t i) const;
  int64_t value_as_int(int64_t i) const;

  std::string describe() const;  // "float32[1,3,224,224]"

 private:
  DType dtype_ = DType::f32;
  Shape shape_;
  std::shared_ptr<const void> storage_;
  void* data_ = nullptr;
};

}  // namespace kiln
