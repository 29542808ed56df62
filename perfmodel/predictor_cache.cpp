#include "perfmodel/predictor_cache.h"

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "perfmodel/cache_file.h"

namespace kiln::perf {
namespace {

constexpr int kFitCacheVersion = 12;  // 2: the "convert" groups; 3: groups_only_loaded; 4: channel-waste features; 5: u8-keyed int8 convs, "_signed" groups; 6: 1x1conv-keyed int8 gemm; 7: weight_reuse tables; 8: bf16/int8 max pools keyed "codes "; 9: f32 ones too; 10: thread pairs repaired; 11: int8 ConcatAffine points on codes; 12: bf16/int8 gemm points on rows, "convert_rows"  // bumped when the fit or its JSON changes meaning

// FNV-1a, 64 bits: a cache key, not a security boundary (a collision costs a wrong prediction of
// one's own profile, and needs two profiles differing in timing only).
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  void str(const std::string& s) { bytes(s.data(), s.size() + 1); }  // the NUL separates fields
  template <typename T>
  void num(T v) { bytes(&v, sizeof v); }
};

}  // namespace

std::string predictor_fit_digest(const std::vector<Measurement>& rows, const FitOptions& options) {
  Fnv f;
  f.num(kFitCacheVersion);
  f.num(options.keep_loaded);
  f.num(options.neighbours);
  f.str(options.method);
  for (const Measurement& m : rows) {
    if (m.kind != kKindKernel && m.kind != kKindBandwidth) continue;  // what the fit reads: model runs do not refit
    f.str(m.kind), f.str(m.key), f.str(m.op), f.str(m.dtype);
    f.num(m.threads), f.num(m.batch), f.num(m.macs), f.num(m.bytes), f.num(m.working_set_bytes);
    f.num(m.median_ms), f.num(m.load_avg);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(f.h));
  return hex;
}

Result<LatencyPredictor> predictor_fit_cached(const std::vector<Measurement>& rows, const FitOptions& options,
                                              const std::string& cache_dir, bool* from_cache) {
  const std::string dir = cache_dir.empty() ? kiln_cache_dir() + "/predictor" : cache_dir;
  const std::string path = dir + "/fit-" + predictor_fit_digest(rows, options) + "-v" + std::to_string(kFitCacheVersion) + ".json";
  if (from_cache) *from_cache = false;
  if (auto text = cache_file_read(path)) {
    const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded())
      if (auto cached = LatencyPredictor::from_json(j)) {
        if (from_cache) *from_cache = true;
        return cached;
      }
  }
  KILN_ASSIGN(fitted, LatencyPredictor::fit(rows, options));
  (void)cache_file_write(path, fitted.to_json().dump());  // best effort: a miss next time only costs a refit
  return fitted;
}

}  // namespace kiln::perf
