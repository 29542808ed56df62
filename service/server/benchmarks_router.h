// POST /v1/benchmarks (admin scope): imports a target profile that `kiln bench-target --export`
// wrote (perfmodel/profile_json.h) into the service's benchmark store, DATA_DIR/benchmarks.sqlite.
// All or nothing: the whole file is checked before one transaction writes it; a malformed file,
// or one from another profile format version, is answered 422 naming the problem.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "perfmodel/store.h"
#include "service/runtime/serve/v2_router.h"

namespace kiln::server {

class BenchmarksRouter {
 public:
  // Opens (or creates) the store once; requests share it.
  static Result<std::unique_ptr<BenchmarksRouter>> open(const std::string& store_path, uint64_t max_profile_bytes);

  serve::HttpResponse handle(const serve::HttpRequest& request) const;

 private:
  BenchmarksRouter(std::unique_ptr<perf::BenchmarkStore> store, uint64_t max_profile_bytes);

  mutable std::mutex mu_;  // BenchmarkStore is one connection; imports are rare
  std::unique_ptr<perf::BenchmarkStore> store_;
  uint64_t max_profile_bytes_;
};

}  // namespace kiln::server
