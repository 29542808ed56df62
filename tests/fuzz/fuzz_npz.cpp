// libFuzzer target: untrusted bytes through the .npz reader (npz_read_file, via libzip). The
// bytes go to a scratch file in /dev/shm (or $TMPDIR, else /tmp), rewritten for every input.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/io/npz.h"

namespace {

std::string g_path;

void remove_scratch() {
  if (!g_path.empty()) std::remove(g_path.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string dir = "/dev/shm";
  if (::access(dir.c_str(), W_OK) != 0) {
    const char* tmp = std::getenv("TMPDIR");
    dir = tmp && *tmp ? tmp : "/tmp";
  }
  g_path = dir + "/kiln-fuzz-npz-" + std::to_string(::getpid()) + ".npz";
  std::atexit(remove_scratch);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(g_path.c_str(), "wb");
  if (!f) std::abort();
  const bool written = std::fwrite(data, 1, size, f) == size;
  if (std::fclose(f) != 0 || !written) std::abort();
  auto entries = kiln::npz_read_file(g_path);
  (void)entries;
  return 0;
}
