// kiln's own Erf kernel (kernels/cpu/erf.cpp) and the vector erf under it
// (kernels/cpu/activation.cpp): against std::erf over the whole float range that matters, and
// on the engine against the reference kernel (in place and not, sizes with vector tails and more
// than one thread's chunk).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "kernels/cpu/activation.h"
#include "tests/support/plan_builder.h"

using namespace kiln;
using namespace kiln::testing;

TEST_CASE("the vector erf is within 5e-7 of std::erf on every path", "[cpu]") {
  std::vector<float> x;
  for (float v = -12.0f; v <= 12.0f; v += 0.00123f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e30f, -1e30f, INFINITY, -INFINITY}) x.push_back(v);
  for (CpuIsa isa : {CpuIsa::avx512, CpuIsa::avx2, CpuIsa::portable}) {
    if (!cpu_isa_available(isa)) continue;
    std::vector<float> y(x.size());
    cpu::erf_values(isa, x.data(), y.data(), static_cast<int64_t>(x.size()));
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(double(y[i]) - std::erf(double(x[i]))));
    INFO(cpu_isa_name(isa));
    REQUIRE(worst < 5e-7);
  }
}

TEST_CASE("cpu.erf runs Erf on the engine, in place and not", "[cpu]") {
  Builder b;
  const int x = b.input({3, 7, 1001}, -4.0f, 4.0f);  // 21021 values: two chunks and a vector tail
  const int e = b.op(OpKind::Erf, {}, {x});       // x is a graph input: not in place
  b.output(b.op(OpKind::Erf, {}, {b.op(OpKind::Relu, {}, {e})}));  // the Relu's output dies here: in place
  const int small = b.input({5}, -2.0f, 2.0f);
  b.output(b.op(OpKind::Erf, {}, {small}));
  auto engine = check(b);
  REQUIRE(count_kernel(*engine, "cpu.erf") == 3);
}
