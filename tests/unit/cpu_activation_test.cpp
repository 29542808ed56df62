// The vector exp, sigmoid and SiLU under kiln's CPU kernels' epilogues and elementwise chains
// (kernels/cpu/activation.cpp), on every ISA path this CPU has, against the C library over the
// range that matters, the float range's ends and the special values.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/activation.h"

using namespace kiln;

namespace {

std::vector<float> samples() {
  std::vector<float> x;
  for (float v = -110.0f; v <= 90.0f; v += 0.0173f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.7f, 88.72f, -87.3f, -103.9f, 1e30f, -1e30f, INFINITY, -INFINITY})
    x.push_back(v);
  x.resize(x.size() + 5, 0.5f);  // a count that leaves a vector tail on both widths
  return x;
}

// |a - b| relative to |b|, with denormal results compared absolutely.
double relative_error(double a, double b) {
  if (std::isinf(b)) return a == b ? 0.0 : 1.0;
  return std::fabs(a - b) / std::max(std::fabs(b), 1e-37);
}

}  // namespace

TEST_CASE("the vector exp is within 1e-6 relative of std::exp on every path", "[cpu]") {
  const std::vector<float> x = samples();
  for (CpuIsa isa : {CpuIsa::avx512, CpuIsa::avx2, CpuIsa::portable}) {
    if (!cpu_isa_available(isa)) continue;
    INFO(cpu_isa_name(isa));
    std::vector<float> y(x.size());
    cpu::exp_values(isa, x.data(), y.data(), static_cast<int64_t>(x.size()));
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double expected = std::exp(static_cast<double>(x[i]));
      if (expected < 1e-37) {  // denormal or zero: absolute
        REQUIRE(std::fabs(y[i] - expected) < 1e-38);
        continue;
      }
      INFO("x = " << x[i] << " gives " << y[i]);
      if (expected > std::numeric_limits<float>::max()) REQUIRE(std::isinf(y[i]));
      else worst = std::max(worst, relative_error(y[i], expected));
    }
    REQUIRE(worst < 1e-6);
    const float special[] = {NAN, INFINITY, -INFINITY};
    float out[3];
    cpu::exp_values(isa, special, out, 3);
    CHECK(std::isnan(out[0]));
    CHECK(out[1] == INFINITY);
    CHECK(out[2] == 0.0f);
  }
}

TEST_CASE("sigmoid and SiLU epilogues match the formula on every path", "[cpu]") {
  const std::vector<float> x = samples();
  for (Activation act : {Activation::sigmoid, Activation::silu}) {
    PostOps post;
    post.activation = act;
    for (CpuIsa isa : {CpuIsa::avx512, CpuIsa::avx2, CpuIsa::portable}) {
      if (!cpu_isa_available(isa)) continue;
      INFO(cpu_isa_name(isa) << (act == Activation::silu ? " silu" : " sigmoid"));
      std::vector<float> y = x;
      cpu::apply_activation(isa, post, y.data(), static_cast<int64_t>(y.size()));
      double worst = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double v = x[i];
        const double s = 1.0 / (1.0 + std::exp(-v));
        const double expected = act == Activation::silu ? v * s : s;
        INFO("x = " << x[i] << " gives " << y[i]);
        if (std::isinf(v)) {  // SiLU is x * sigmoid(x) as the reference computes it: -inf * 0 is NaN there too
          if (act == Activation::sigmoid) REQUIRE(y[i] == (v > 0 ? 1.0f : 0.0f));
          continue;
        }
        worst = std::max(worst, std::fabs(y[i] - expected) / std::max(std::fabs(expected), 1e-30));
        if (std::fabs(expected) < 1e-30) REQUIRE(std::fabs(y[i]) < 1e-30);
      }
      REQUIRE(worst < 2e-6);
    }
  }
}
