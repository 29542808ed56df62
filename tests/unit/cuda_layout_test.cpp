// The CUDA backend's host-side arithmetic, checked without a GPU: the row-major Gemm handed to
// column-major cuBLASLt (emulated here by its definition, D = op(first) op(second) over
// column-major storage) against the reference Gemm, and the broadcast strides of the binary
// kernel (emulated by its index walk) against the reference Add.
#include <catch2/catch.hpp>

#include "kernels/cuda/broadcast_shape.h"
#include "kernels/cuda/gemm_layout.h"
#include "tests/support/plan_builder.h"

namespace kiln {
namespace {

using cuda::LtOperand;

// Element (r, c) of op(stored), column-major with leading dimension ld.
float lt_element(const float* data, const LtOperand& o, int64_t r, int64_t c) {
  return o.transpose ? data[c + r * o.ld] : data[r + c * o.ld];
}

// cuBLASLt's product D = op(first) op(second) with the layouts given, on the CPU.
Tensor emulate_lt_gemm(const Tensor& a, const Tensor& b, int64_t m, int64_t k, int64_t n, bool trans_a, bool trans_b) {
  const cuda::GemmLayout g = cuda::gemm_layout(m, k, n, trans_a, trans_b);
  // op(first) is N x K and op(second) K x M whatever the flags.
  REQUIRE((g.first.transpose ? g.first.cols : g.first.rows) == n);
  REQUIRE((g.second.transpose ? g.second.rows : g.second.cols) == m);
  Tensor y = Tensor::zeros(DType::f32, {m, n});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += static_cast<double>(lt_element(b.data<float>(), g.first, i, p)) * lt_element(a.data<float>(), g.second, p, j);
      y.data<float>()[i + j * g.out.ld] = static_cast<float>(acc);
    }
  return y;
}

}  // namespace

TEST_CASE("the row-major Gemm given to column-major cuBLASLt computes the reference Gemm", "[cuda]") {
  const bool trans_a = GENERATE(false, true);
  const bool trans_b = GENERATE(false, true);
  const int64_t m = 3, k = 5, n = 4;
  INFO("transA " << trans_a << ", transB " << trans_b);
  testing::Builder b;
  const int a = b.input(trans_a ? Shape{k, m} : Shape{m, k});
  const int w = b.weight(trans_b ? Shape{n, k} : Shape{k, n});
  b.output(b.op(OpKind::Gemm, testing::attrs({{"transA", int64_t{trans_a}}, {"transB", int64_t{trans_b}}}), {a, w}));
  auto want = execute_reference(b.plan, b.inputs);
  REQUIRE(want);
  const Tensor got = emulate_lt_gemm(b.inputs[0], *b.constant_value(w), m, k, n, trans_a, trans_b);
  testing::require_close(got, want->outputs[0]);
}

TEST_CASE("broadcast strides walk both inputs as numpy broadcasting does", "[cuda]") {
  struct Case {
    Shape a, b;
  };
  const Case c = GENERATE(Case{{2, 13, 5, 5}, {1, 13, 1, 1}}, Case{{1, 13, 1, 1}, {2, 13, 5, 5}}, Case{{2, 3}, {3}},
                          Case{{13, 1, 1}, {2, 13, 5, 5}}, Case{{4, 1, 6}, {1, 5, 1}}, Case{{7}, {}});
  testing::Builder b;
  const int x = b.input(c.a);
  const int y = b.input(c.b);
  b.output(b.op(OpKind::Add, {}, {x, y}));
  auto want = execute_reference(b.plan, b.inputs);
  REQUIRE(want);
  const Shape out = want->outputs[0].shape();
  const cuda::BroadcastShape shape = cuda::broadcast_shape(c.a, c.b, out);
  REQUIRE(shape.rank == static_cast<int>(out.size()));
  // The binary kernel's walk (elementwise.cu): split the flat output index into coordinates.
  Tensor got = Tensor::zeros(DType::f32, out);
  for (int64_t i = 0; i < got.numel(); ++i) {
    int64_t rest = i, at_a = 0, at_b = 0;
    for (int d = shape.rank - 1; d >= 0; --d) {
      const int64_t coord = rest % shape.dims[d];
      rest /= shape.dims[d];
      at_a += coord * shape.a_strides[d];
      at_b += coord * shape.b_strides[d];
    }
    got.data<float>()[i] = b.inputs[0].data<float>()[at_a] + b.inputs[1].data<float>()[at_b];
  }
  testing::require_close(got, want->outputs[0]);
}

}  // namespace kiln
