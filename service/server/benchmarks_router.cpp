#include "service/server/benchmarks_router.h"

#include "perfmodel/profile_json.h"
#include "service/server/api_error.h"

namespace kiln::server {

BenchmarksRouter::BenchmarksRouter(std::unique_ptr<perf::BenchmarkStore> store, uint64_t max_profile_bytes)
    : store_(std::move(store)), max_profile_bytes_(max_profile_bytes) {}

Result<std::unique_ptr<BenchmarksRouter>> BenchmarksRouter::open(const std::string& store_path, uint64_t max_profile_bytes) {
  KILN_ASSIGN(store, perf::BenchmarkStore::open(store_path));
  return std::unique_ptr<BenchmarksRouter>(new BenchmarksRouter(std::move(store), max_profile_bytes));
}

serve::HttpResponse BenchmarksRouter::handle(const serve::HttpRequest& request) const {
  if (request.method != "POST") {
    serve::HttpResponse r = api_error(405, "bad_request", request.method + " is not allowed on /v1/benchmarks (allowed: POST)");
    r.headers.emplace_back("Allow", "POST");
    return r;
  }
  const std::string type = request.header("content-type");
  if (!type.empty() && type.rfind("application/json", 0) != 0)
    return api_error(415, "unsupported_media_type",
                     "Content-Type '" + type.substr(0, 64) + "': send the JSON that `kiln bench-target --export` wrote as application/json");
  if (request.body.size() > max_profile_bytes_)
    return api_error(413, "limit_exceeded", "the profile has " + std::to_string(request.body.size()) + " bytes; the limit is " +
                                                std::to_string(max_profile_bytes_));
  std::lock_guard lock(mu_);
  auto counts = perf::profile_import_text(*store_, request.body, "profile");
  if (!counts) {
    const bool store_failed = counts.error().code == ErrorCode::io;
    return api_error(store_failed ? 500 : 422, store_failed ? "internal" : "invalid", counts.error().message);
  }
  return api_json(201, {{"targets", counts->targets}, {"measurements", counts->measurements}});
}

}  // namespace kiln::server
