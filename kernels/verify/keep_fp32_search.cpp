#include "kernels/verify/keep_fp32_search.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace kiln {
namespace {

double drop_of(const OutputMetrics& o) { return o.has_labels ? o.accuracy_drop : 1.0 - o.top1_agreement; }

KeepFp32Trial summarize(const VerifyReport& report, const AccuracyBound& bound, size_t kept) {
  KeepFp32Trial t;
  t.kept_steps = kept;
  for (const OutputMetrics& o : report.outputs) {
    t.cosine = std::min(t.cosine, o.cosine);
    t.max_rel_error = std::max(t.max_rel_error, o.max_rel_error);
    if (o.classifier) t.accuracy_drop = std::max(t.accuracy_drop, drop_of(o));
  }
  t.met = meets_bound(report, bound);
  return t;
}

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

}  // namespace

bool meets_bound(const VerifyReport& report, const AccuracyBound& bound, std::string* why) {
  const auto miss = [&](const OutputMetrics& o, const std::string& what) {
    if (why) *why = "output '" + o.name + "' " + what;
    return false;
  };
  for (const OutputMetrics& o : report.outputs) {
    if (o.nonfinite > 0) return miss(o, "has " + std::to_string(o.nonfinite) + " non-finite values");
    if (bound.min_cosine && o.cosine < *bound.min_cosine)
      return miss(o, "has a cosine of " + number(o.cosine) + " (at least " + number(*bound.min_cosine) + " asked)");
    if (bound.max_rel_error && o.max_rel_error > *bound.max_rel_error)
      return miss(o, "has a max relative error of " + number(o.max_rel_error) + " (at most " + number(*bound.max_rel_error) + " asked)");
    if (bound.max_accuracy_drop && o.classifier && drop_of(o) > *bound.max_accuracy_drop)
      return miss(o, std::string(o.has_labels ? "loses " : "loses top-1 agreement of ") + number(drop_of(o) * 100) +
                         " points (at most " + number(*bound.max_accuracy_drop * 100) + " asked)");
  }
  return true;
}

std::string describe_bound(const AccuracyBound& bound) {
  std::vector<std::string> parts;
  if (bound.min_cosine) parts.push_back("a cosine of at least " + number(*bound.min_cosine));
  if (bound.max_rel_error) parts.push_back("a max relative error of at most " + number(*bound.max_rel_error));
  if (bound.max_accuracy_drop) parts.push_back("an accuracy drop of at most " + number(*bound.max_accuracy_drop * 100) + " points");
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? "" : " and ") + parts[i];
  return out;
}

Result<KeepFp32Search> search_keep_fp32(const Plan& compiled, const Plan& reference, const VerifyData& data,
                                        DevicePrecision precision, const AccuracyBound& bound, VerifyOptions options,
                                        std::ostream* progress) {
  KILN_REQUIRE(precision != DevicePrecision::fp32, invalid_argument,
               "an fp32 plan computes every step in float32 already: nothing to keep");
  KILN_REQUIRE(bound.any(), invalid_argument, "GPU accuracy control needs a bound (a minimum cosine, a maximum relative error or a "
                                              "maximum accuracy drop)");
  const size_t n = compiled.steps.size();
  KILN_REQUIRE(n > 0, invalid_argument, "the plan has no steps");
  ReferenceCache local_cache;  // the reference runs once, every trial after only the emulation
  if (!options.reference_cache) options.reference_cache = &local_cache;
  options.emulate = precision;
  options.device_options.precision = precision;
  const auto prefix = [&](size_t k) {
    std::vector<std::string> names;
    for (size_t i = 0; i < k; ++i) names.push_back(compiled.steps[i].name);
    return names;
  };
  const std::string p(device_precision_name(precision));
  KeepFp32Search out;
  out.total_steps = n;
  std::optional<VerifyReport> last;
  const auto trial = [&](size_t k) -> Result<bool> {
    options.device_options.keep_fp32 = prefix(k);
    KILN_ASSIGN(report, verify_plans(compiled, reference, data, options));
    const KeepFp32Trial t = summarize(report, bound, k);
    out.trials.push_back(t);
    if (progress) {
      *progress << "  [gpu accuracy] " << p << ", " << (k == 0 ? std::string("no step") : "the first " + std::to_string(k) + " of " + std::to_string(n) + " steps")
                << " in fp32: cosine " << number(t.cosine) << ", max rel " << number(t.max_rel_error);
      if (bound.max_accuracy_drop) *progress << ", drop " << number(t.accuracy_drop * 100) << " points";
      *progress << (t.met ? ": meets" : ": misses") << '\n';
    }
    last = std::move(report);
    return t.met;
  };
  const auto finish = [&](size_t k, VerifyReport report, bool met) {
    out.met = met;
    out.kept_steps = met ? k : n;
    out.keep_fp32 = met ? prefix(k) : std::vector<std::string>{};
    out.report = std::move(report);
    return out;
  };

  KILN_ASSIGN(none_met, trial(0));
  if (none_met) return finish(0, std::move(*last), true);
  KILN_ASSIGN(all_met, trial(n));
  if (!all_met) return finish(n, std::move(*last), false);
  // Invariant: the prefix of `lo` steps misses, that of `hi` meets (`best` is its report).
  size_t lo = 0, hi = n;
  VerifyReport best = std::move(*last);
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    KILN_ASSIGN(met, trial(mid));
    if (met) {
      hi = mid;
      best = std::move(*last);
    } else {
      lo = mid;
    }
  }
  return finish(hi, std::move(best), true);
}

}  // namespace kiln
