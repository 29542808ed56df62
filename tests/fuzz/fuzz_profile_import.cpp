// libFuzzer target: target-profile imports (`kiln bench-target --import`, later POST /v1/benchmarks)
// from untrusted bytes, into a fresh in-memory benchmark store. A crash, sanitizer report or
// uncaught exception is a bug: a bad profile must come back as an error, with nothing imported.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "perfmodel/profile_json.h"
#include "perfmodel/store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::perf;
  auto store = BenchmarkStore::open(":memory:");
  if (!store) __builtin_trap();  // an in-memory store always opens
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto imported = profile_import_text(**store, text, "fuzz.json");
  if (!imported) {
    (void)imported.error().message;
    // All or nothing: a refused profile leaves the store empty.
    auto targets = (*store)->targets();
    if (!targets || !targets->empty()) __builtin_trap();
  }
  return 0;
}
