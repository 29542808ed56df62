// libFuzzer target: untrusted bytes through the .kiln loader (plan_read_file). The bytes go to a
// scratch file in /dev/shm (or $TMPDIR, else /tmp), rewritten for every input.
//
// The header carries CRC-32s of itself, the metadata and the weights, so nearly every mutation
// would stop at a checksum. When the input is long enough to hold a header whose offsets lie
// inside it, the checksums are recomputed before the file is written, so mutations reach the
// JSON metadata and the tensor references. Inputs whose first byte of `reserved` (offset 12, which
// the loader ignores) is 1 are left as they are, so the checksum checks themselves stay covered.
//
// Whatever loads must survive a write/read round trip with the same steps, slots and constants.
#include <unistd.h>
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/plan_file.h"

namespace {

std::string g_path;
std::string g_copy_path;

void remove_scratch() {
  if (!g_path.empty()) std::remove(g_path.c_str());
  if (!g_copy_path.empty()) std::remove(g_copy_path.c_str());
}

uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void store_crc(uint8_t* p, const uint8_t* data, uint64_t n) {
  const auto c = static_cast<uint32_t>(crc32_z(0L, data, static_cast<z_size_t>(n)));
  std::memcpy(p, &c, sizeof c);
}

// Header layout (plan_file.cpp): magic[8] version u32 reserved u32, metadata offset/bytes u64,
// weights offset/bytes u64, metadata crc u32 @48, weights crc u32 @52, padding u32, header crc @60.
void repair_checksums(std::vector<uint8_t>& b) {
  if (b.size() < 64 || b[12] == 1) return;
  const uint64_t size = b.size();
  const uint64_t mo = load_u64(&b[16]), mb = load_u64(&b[24]), wo = load_u64(&b[32]), wb = load_u64(&b[40]);
  if (mo <= size && mb <= size - mo) store_crc(&b[48], b.data() + mo, mb);
  if (wo <= size && wb <= size - wo) store_crc(&b[52], b.data() + wo, wb);
  store_crc(&b[60], b.data(), 60);
}

bool same_plan(const kiln::Plan& a, const kiln::Plan& b) {
  if (a.num_slots != b.num_slots || a.steps.size() != b.steps.size() || a.constants.size() != b.constants.size() ||
      a.inputs.size() != b.inputs.size() || a.outputs != b.outputs)
    return false;
  for (size_t i = 0; i < a.steps.size(); ++i) {
    const kiln::PlanStep& x = a.steps[i];
    const kiln::PlanStep& y = b.steps[i];
    if (x.op != y.op || x.name != y.name || x.inputs != y.inputs || x.outputs != y.outputs) return false;
  }
  for (size_t i = 0; i < a.constants.size(); ++i) {
    const kiln::Tensor& x = a.constants[i].second;
    const kiln::Tensor& y = b.constants[i].second;
    if (a.constants[i].first != b.constants[i].first || x.dtype() != y.dtype() || x.shape() != y.shape() ||
        (x.nbytes() != 0 && std::memcmp(x.raw(), y.raw(), x.nbytes()) != 0))
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string dir = "/dev/shm";
  if (::access(dir.c_str(), W_OK) != 0) {
    const char* tmp = std::getenv("TMPDIR");
    dir = tmp && *tmp ? tmp : "/tmp";
  }
  const std::string stem = dir + "/kiln-fuzz-plan-" + std::to_string(::getpid());
  g_path = stem + ".kiln";
  g_copy_path = stem + "-copy.kiln";
  std::atexit(remove_scratch);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  repair_checksums(bytes);
  std::FILE* f = std::fopen(g_path.c_str(), "wb");
  if (!f) std::abort();
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (std::fclose(f) != 0 || !written) std::abort();

  auto loaded = kiln::plan_read_file(g_path);
  if (!loaded) return 0;
  if (!kiln::plan_write_file(g_copy_path, loaded->plan, loaded->info)) std::abort();
  auto again = kiln::plan_read_file(g_copy_path);
  if (!again || !same_plan(loaded->plan, again->plan)) std::abort();  // the writer lost or changed something
  return 0;
}
