// Unit tests for the reference executor.
#include <catch2/catch.hpp>

#include <cstring>
#include <optional>
#include <vector>

#include "kernels/executor.h"
#include "tests/support/op_harness.h"

namespace kiln {
namespace {

using namespace test;

bool bit_identical(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data<float>(), b.data<float>(), static_cast<size_t>(a.numel()) * sizeof(float)) == 0;
}

// The oracle must not depend on how many threads computed it: verification compares a compiled
// model with it to the last bit of its float32 outputs, and caches them per batch.
TEST_CASE("Reference Conv, Gemm and MatMul give the same bits on any thread count", "[executor]") {
  struct Case {
    const char* what;
    OpKind op;
    Attrs attrs;
    std::vector<std::optional<Tensor>> inputs;
  };
  // Each is large enough (>= 2^18 multiply-adds) for the kernels to split it among threads.
  const std::vector<Case> cases = {
      {"3x3 conv", OpKind::Conv, attrs_of({{"pads", std::vector<int64_t>{1, 1, 1, 1}}}),
       {test::uniform_f32({2, 16, 20, 20}, 1), test::uniform_f32({32, 16, 3, 3}, 2), test::uniform_f32({32}, 3)}},
      {"grouped strided conv", OpKind::Conv,
       attrs_of({{"group", int64_t{4}}, {"strides", std::vector<int64_t>{2, 2}}}),
       {test::uniform_f32({1, 32, 33, 33}, 4), test::uniform_f32({64, 8, 3, 3}, 5), std::nullopt}},
      {"gemm", OpKind::Gemm, attrs_of({{"transB", int64_t{1}}}),
       {test::uniform_f32({64, 256}, 6), test::uniform_f32({128, 256}, 7), test::uniform_f32({128}, 8)}},
      {"batched matmul", OpKind::MatMul, Attrs{},
       {test::uniform_f32({3, 64, 128}, 9), test::uniform_f32({128, 96}, 10)}},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    ExecuteOptions one, several;
    one.threads = 1;
    several.threads = 3;
    auto serial = run_op(c.op, c.attrs, c.inputs, 1, one);
    auto parallel = run_op(c.op, c.attrs, c.inputs, 1, several);
    REQUIRE(serial.is_ok());
    REQUIRE(parallel.is_ok());
    CHECK(bit_identical((*serial)[0], (*parallel)[0]));
  }
}

}  // namespace
}  // namespace kiln
