// Host copy throughput of ChunkedCopier (kernels/device/chunked_copy.h), the CUDA engine's copy of
// an input into its pinned staging buffer, by helper count: what the end-to-end latency on a GPU
// pays before the transfer. Plain (pageable) memory on both sides here; the engine's destination
// is pinned, which copies at the same speed. Usage: kiln_chunked_copy_bench [MB (38.5)] [max helpers (7)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/device/chunked_copy.h"

int main(int argc, char** argv) {
  const double mb = argc > 1 ? std::atof(argv[1]) : 38.5;  // ResNet-50's float32 input at batch 64
  const int max_helpers = argc > 2 ? std::atoi(argv[2]) : 7;
  const size_t bytes = static_cast<size_t>(mb * 1e6);
  std::vector<unsigned char> from(bytes, 1), to(bytes, 0);
  std::printf("copy of %.1f MB into another buffer, median of 21 after 3 warm-ups\n", mb);
  std::printf("%8s %10s %10s\n", "helpers", "ms", "GB/s");
  for (int helpers = 0; helpers <= max_helpers; helpers = helpers == 0 ? 1 : helpers * 2 + 1) {
    kiln::ChunkedCopier copier(helpers);
    std::vector<double> ms;
    for (int i = 0; i < 24; ++i) {
      const auto start = std::chrono::steady_clock::now();
      size_t handed = 0;
      copier.copy(to.data(), from.data(), bytes, [&](size_t, size_t n) { handed += n; });
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (handed != bytes) return 1;
      if (i >= 3) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    std::printf("%8d %10.3f %10.2f\n", helpers, median, static_cast<double>(bytes) / median / 1e6);
  }
  return 0;
}
