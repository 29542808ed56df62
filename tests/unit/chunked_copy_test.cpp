// ChunkedCopier (kernels/device/chunked_copy.h): the CUDA engine's parallel copy into its pinned
// staging buffer. Each chunk must be handed back in order and only once all its bytes are there
// (the engine enqueues its transfer to the device right then), with helpers or without, copy after copy.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/device/chunked_copy.h"

namespace kiln {
namespace {

std::vector<unsigned char> random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

}  // namespace

TEST_CASE("chunks are copied whole and handed back in order, with and without helpers", "[device]") {
  const int helpers = GENERATE(0, 1, 3);
  ChunkedCopier copier(helpers);
  CHECK(copier.helpers() == helpers);
  // Below one chunk, exactly two, and many with a ragged end; twice each, through the same helpers.
  for (const size_t bytes : {size_t{1000}, 2 * ChunkedCopier::kChunk, 17 * ChunkedCopier::kChunk + 123, size_t{0},
                             17 * ChunkedCopier::kChunk + 123}) {
    INFO(helpers << " helpers, " << bytes << " bytes");
    const std::vector<unsigned char> from = random_bytes(bytes, static_cast<unsigned>(bytes));
    std::vector<unsigned char> to(bytes, 0);
    size_t next = 0;
    bool whole = true;
    copier.copy(to.data(), from.data(), bytes, [&](size_t at, size_t n) {
      CHECK(at == next);  // in order, contiguous
      CHECK(n == std::min(ChunkedCopier::kChunk, bytes - at));
      whole = whole && std::memcmp(to.data() + at, from.data() + at, n) == 0;
      next = at + n;
    });
    CHECK(whole);
    CHECK(next == bytes);
    CHECK(to == from);
  }
}

}  // namespace kiln
