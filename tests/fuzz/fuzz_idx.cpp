// libFuzzer target: untrusted bytes through the IDX reader (idx_read_bytes: raw or gzip), then
// the two conversions `kiln verify` and calibration apply to what it accepts (uint8 images to
// float32, rank-1 integer labels to int64). Whatever is accepted must keep its element count.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "kernels/io/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tensor = kiln::idx_read_bytes(std::span<const uint8_t>(data, size), "fuzz input");
  if (!tensor) return 0;
  if (auto images = kiln::idx_images_to_float(*tensor, {}, "fuzz input"); images && images->numel() != tensor->numel())
    std::abort();  // a conversion that changed the element count
  if (auto labels = kiln::idx_labels_to_int64(*tensor, "fuzz input"); labels && labels->numel() != tensor->numel())
    std::abort();
  return 0;
}
