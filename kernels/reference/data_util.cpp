#include "kernels/reference/data_util.h"

namespace kiln::ref::data {

Status require_inputs(const InferContext& ctx, size_t count) {
  for (size_t i = 0; i < count; ++i)
    KILN_REQUIRE(ctx.has_input(i), invalid_argument, "input ", i, " is required but absent");
  return Status::ok();
}

Result<IntInput> read_int_input(const InferContext& ctx, size_t i, const char* name) {
  IntInput in;
  if (!ctx.has_input(i)) return in;
  in.present = true;
  const ValueType& type = ctx.input(i);
  KILN_REQUIRE(type.dtype == DType::i64 || type.dtype == DType::i32, invalid_argument, name,
               " must be int64, got ", dtype_name(type.dtype));
  KILN_REQUIRE(!type.rank_known || type.rank() <= 1, invalid_argument, name, " must be 1-D, got shape ",
               sym_shape_to_string(type.shape));
  if (const Tensor* v = ctx.value(i)) {
    KILN_REQUIRE(v->rank() <= 1, invalid_argument, name, " must be 1-D, got shape ", shape_to_string(v->shape()));
    in.known = true;
    in.values = tensor_to_ints(*v);
    in.length = static_cast<int64_t>(in.values.size());
  } else if (type.rank_known) {
    if (type.rank() == 0) in.length = 1;
    else if (type.shape[0].known()) in.length = type.shape[0].value;
  }
  return in;
}

Result<int64_t> checked_mul(int64_t a, int64_t b, const char* what) {
  if (a == 0 || b == 0) return int64_t{0};
  KILN_REQUIRE(a <= kMaxElements && b <= kMaxElements / a, limit_exceeded, what, " has ", a, " x ", b,
               " elements, more than the supported ", kMaxElements);
  return a * b;
}

Status check_output_shape(const SymShape& shape, const char* what) {
  int64_t total = 1;
  for (const Dim& d : shape) {
    if (!d.known()) continue;
    KILN_REQUIRE(d.value <= kMaxElements, limit_exceeded, what, " ", sym_shape_to_string(shape), " has a dim above ",
                 "the supported ", kMaxElements);
    if (d.value == 0 || total == 0) {
      total = 0;
      continue;
    }
    KILN_REQUIRE(d.value <= kMaxElements / total, limit_exceeded, what, " ", sym_shape_to_string(shape),
                 " has more than the supported ", kMaxElements, " elements");
    total *= d.value;
  }
  return Status::ok();
}

Result<std::vector<int64_t>> normalize_axes(const std::vector<int64_t>& axes, int64_t rank, const char* name) {
  std::vector<int64_t> out;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    KILN_REQUIRE(a >= -rank && a < rank, invalid_argument, name, " ", ints_to_string(axes), ": axis ", a,
                 " is out of range for rank ", rank);
    const int64_t n = a < 0 ? a + rank : a;
    KILN_REQUIRE(!seen[static_cast<size_t>(n)], invalid_argument, name, " ", ints_to_string(axes), ": axis ", a,
                 " appears more than once");
    seen[static_cast<size_t>(n)] = true;
    out.push_back(n);
  }
  return out;
}

void strided_copy(DType dt, const void* src, void* dst, const Shape& shape, const std::vector<int64_t>& strides) {
  const int64_t total = shape_numel(shape);
  if (total == 0) return;
  visit_dtype(dt, [&]<typename T>() {
    const T* s = static_cast<const T*>(src);
    T* d = static_cast<T*>(dst);
    const size_t rank = shape.size();
    if (rank == 0) {
      d[0] = s[0];
      return;
    }
    const int64_t inner = shape[rank - 1];
    const int64_t inner_stride = strides[rank - 1];
    std::vector<int64_t> index(rank, 0);
    int64_t offset = 0;
    for (int64_t o = 0; o < total; o += inner) {
      const T* row = s + offset;
      T* out = d + o;
      if (inner_stride == 1) {
        for (int64_t j = 0; j < inner; ++j) out[j] = row[j];
      } else {
        for (int64_t j = 0; j < inner; ++j) out[j] = row[j * inner_stride];
      }
      for (size_t k = rank - 1; k-- > 0;) {
        ++index[k];
        offset += strides[k];
        if (index[k] < shape[k]) break;
        offset -= strides[k] * shape[k];
        index[k] = 0;
      }
    }
  });
}

int64_t dims_product(const Shape& shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= shape[i];
  return p;
}

}  // namespace kiln::ref::data
