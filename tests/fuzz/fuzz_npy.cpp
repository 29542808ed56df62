// libFuzzer target: untrusted bytes through the .npy reader (npy_read_bytes). Whatever it
// accepts must survive a write/read round trip unchanged (same dtype, shape and bytes).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "kernels/io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tensor = kiln::npy_read_bytes(std::span<const uint8_t>(data, size), "fuzz input");
  if (!tensor) return 0;
  const std::vector<uint8_t> written = kiln::npy_write_bytes(*tensor);
  auto again = kiln::npy_read_bytes(written, "round trip");
  if (!again || again->dtype() != tensor->dtype() || again->shape() != tensor->shape() ||
      again->nbytes() != tensor->nbytes() ||
      (tensor->nbytes() != 0 && std::memcmp(again->raw(), tensor->raw(), tensor->nbytes()) != 0))
    std::abort();  // the writer produced something the reader does not give back
  return 0;
}
