// kiln's float32 -> int8 codes loop (kernels/cpu/quantize_codes.cpp), which an int8 conv reading a
// float32 input in its own element order uses instead of oneDNN's scaled reorder: it must write the
// reorder's very codes (round half to even, saturation at the type's ends, u8 clamping negatives to 0)
// on every ISA path and thread split, and an int8 conv on such an input must no longer run a reorder.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/quantize_codes.h"
#include "kernels/onednn/onednn_common.h"

using namespace kiln;
using kiln::onednn::cpu_engine;
using kiln::onednn::scaled_reorder;

namespace {

// Values around every code and exactly halfway between codes (x * inv_scale = k + 0.5), out of
// range on both sides, negatives and -0: the cases where rounding or saturation could differ.
std::vector<float> tricky_values(int64_t count, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> code(-300, 300);
  std::uniform_real_distribution<float> frac(-0.6f, 0.6f);
  std::vector<float> x(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int k = code(rng);
    switch (i % 4) {
      case 0: x[static_cast<size_t>(i)] = (static_cast<float>(k) + 0.5f) * scale; break;  // a tie
      case 1: x[static_cast<size_t>(i)] = (static_cast<float>(k) + frac(rng)) * scale; break;
      case 2: x[static_cast<size_t>(i)] = i % 8 == 2 ? -0.0f : static_cast<float>(k) * scale; break;
      default: x[static_cast<size_t>(i)] = static_cast<float>(k) * 3.0f * scale; break;  // far out of range
    }
  }
  return x;
}

// oneDNN's reorder of `count` elements of `from_type` at `x` into `type`: scale * x + zero_point.
std::vector<uint8_t> onednn_codes(const void* x, int64_t count, dnnl::memory::data_type from_type, float scale,
                                  dnnl::memory::data_type type, int32_t zero_point = 0) {
  const dnnl::memory::dims dims = {count};
  const dnnl::memory::desc from(dims, from_type, dnnl::memory::format_tag::a);
  const dnnl::memory::desc to(dims, type, dnnl::memory::format_tag::a);
  std::vector<uint8_t> y(static_cast<size_t>(count));
  dnnl::memory src(from, cpu_engine(), const_cast<void*>(x)), dst(to, cpu_engine(), y.data());
  dnnl::stream s(cpu_engine());
  dnnl::reorder(scaled_reorder(from, to, scale, zero_point)).execute(s, src, dst);
  s.wait();
  return y;
}

std::vector<uint8_t> onednn_codes(const std::vector<float>& x, float inv_scale, dnnl::memory::data_type type) {
  return onednn_codes(x.data(), static_cast<int64_t>(x.size()), dnnl::memory::data_type::f32, inv_scale, type);
}

// Where `got` (with one guard byte past the end) first differs from `expected`, and how often.
void check_codes(std::vector<uint8_t> got, const std::vector<uint8_t>& expected) {
  CHECK(got.back() == 0xAB);
  got.pop_back();
  REQUIRE(got.size() == expected.size());
  int64_t mismatches = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != expected[i]) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++mismatches;
    }
  INFO("first mismatch at " << first);
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("float32 to codes equals oneDNN's scaled reorder on every path and split", "[cpu][quantize]") {
  const float scale = 0.0371f;
  // Under one thread's share, a ragged tail, and several shares split between threads.
  for (int64_t count : {int64_t{37}, int64_t{1000}, int64_t{3 * 65536 + 77}}) {
    const std::vector<float> x = tricky_values(count, scale, static_cast<uint32_t>(count));
    for (QuantType type : {QuantType::u8, QuantType::s8}) {
      const auto dt = type == QuantType::u8 ? dnnl::memory::data_type::u8 : dnnl::memory::data_type::s8;
      const std::vector<uint8_t> expected = onednn_codes(x, 1.0f / scale, dt);
      for (const char* isa : {"", "portable"}) {
        for (int threads : {1, 2, 3}) {
          INFO("count " << count << " " << quant_type_name(type) << " isa '" << isa << "' threads " << threads);
          if (*isa) setenv("KILN_CPU_ISA", isa, 1);
          std::vector<uint8_t> got(x.size() + 1, 0xAB);  // one guard byte past the end
          cpu::quantize_to_codes(x.data(), got.data(), count, 1.0f / scale, type, threads);
          if (*isa) unsetenv("KILN_CPU_ISA");
          CHECK(got.back() == 0xAB);
          got.pop_back();
          int64_t mismatches = 0, first = -1;
          for (int64_t i = 0; i < count; ++i)
            if (got[static_cast<size_t>(i)] != expected[static_cast<size_t>(i)]) {
              if (first < 0) first = i;
              ++mismatches;
            }
          INFO("first mismatch at " << first << ": x " << (first >= 0 ? x[static_cast<size_t>(first)] : 0.0f));
          CHECK(mismatches == 0);
        }
      }
    }
  }
}

// An int8 product reads a signed input as u8 (code + 128, kernels/onednn/matmul.cpp): kiln's loops
// must write what oneDNN's reorder with zero point 128 writes, from float32 and from stored s8 codes.
TEST_CASE("float32 and s8 codes to shifted u8 codes equal oneDNN's reorder with zero point 128", "[cpu][quantize]") {
  const float scale = 0.0371f;
  const auto f32 = dnnl::memory::data_type::f32, u8 = dnnl::memory::data_type::u8, s8 = dnnl::memory::data_type::s8;
  for (int64_t count : {int64_t{37}, int64_t{1000}, int64_t{3 * 65536 + 77}}) {
    const std::vector<float> x = tricky_values(count, scale, static_cast<uint32_t>(count) + 1);
    const std::vector<uint8_t> shifted = onednn_codes(x.data(), count, f32, 1.0f / scale, u8, 128);
    std::vector<int8_t> codes(static_cast<size_t>(count));
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<int8_t>(static_cast<int>(i % 256) - 128);
    const std::vector<uint8_t> codes_shifted = onednn_codes(codes.data(), count, s8, 1.0f, u8, 128);
    for (const char* isa : {"", "portable"}) {
      for (int threads : {1, 2, 3}) {
        INFO("count " << count << " isa '" << isa << "' threads " << threads);
        if (*isa) setenv("KILN_CPU_ISA", isa, 1);
        std::vector<uint8_t> got(x.size() + 1, 0xAB), got_codes(x.size() + 1, 0xAB);
        cpu::quantize_to_shifted_codes(x.data(), got.data(), count, 1.0f / scale, threads);
        cpu::shift_s8_codes(codes.data(), got_codes.data(), count, threads);
        if (*isa) unsetenv("KILN_CPU_ISA");
        {
          INFO("from float32");
          check_codes(got, shifted);
        }
        INFO("from s8 codes");
        check_codes(got_codes, codes_shifted);
      }
    }
  }
}
