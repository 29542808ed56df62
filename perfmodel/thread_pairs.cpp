#include "perfmodel/thread_pairs.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace kiln::perf {
namespace {

bool pairable(const Measurement& m) { return (m.op == "conv" || m.op == "gemm") && m.macs >= kThreadPairMinMacs; }

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int repair_contradicting_thread_pairs(std::vector<Measurement>& kernels) {
  // (op, dtype, key) -> threads -> index in kernels.
  std::map<std::tuple<std::string, std::string, std::string>, std::map<int, size_t>> by_shape;
  for (size_t i = 0; i < kernels.size(); ++i)
    if (pairable(kernels[i])) by_shape[{kernels[i].op, kernels[i].dtype, kernels[i].key}][kernels[i].threads] = i;

  struct Pair {
    size_t one, many;
    double ratio;  // one-thread time / T-thread time
  };
  std::map<std::tuple<std::string, std::string, int>, std::vector<Pair>> pairs;  // (op, dtype, T)
  for (const auto& [shape, at] : by_shape) {
    const auto one = at.find(1);
    if (one == at.end()) continue;
    for (const auto& [threads, many] : at)
      if (threads > 1)
        pairs[{std::get<0>(shape), std::get<1>(shape), threads}].push_back(
            {one->second, many, kernels[one->second].median_ms / kernels[many].median_ms});
  }

  int repaired = 0;
  for (const auto& [group, list] : pairs) {
    const int threads = std::get<2>(group);
    const double lowest = kThreadPairLowest * threads, highest = kThreadPairHighest * threads;
    std::vector<double> agreeing;
    for (const Pair& p : list)
      if (p.ratio >= lowest && p.ratio <= highest) agreeing.push_back(p.ratio);
    if (static_cast<int>(agreeing.size()) < kThreadPairMinAgreeing) continue;
    const double typical = median_of(agreeing);
    for (const Pair& p : list) {
      Measurement& one = kernels[p.one];
      Measurement& many = kernels[p.many];
      if (p.ratio < lowest) many.median_ms = one.median_ms / typical, ++repaired;     // T threads ran slow
      else if (p.ratio > highest) one.median_ms = many.median_ms * typical, ++repaired;  // one thread ran slow
    }
  }
  return repaired;
}

}  // namespace kiln::perf
