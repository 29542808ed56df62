// The fit's check of one-thread against two-thread sweep points (perfmodel/thread_pairs.h): a pair whose
// readings contradict each other (one taken 2.4x slow, as AMX hosts do for minutes) has its slow reading
// priced again from the other; agreeing pairs, small work and groups without enough agreeing pairs stay.
#include <catch2/catch.hpp>

#include <map>

#include "perfmodel/predictor.h"
#include "perfmodel/thread_pairs.h"
#include "tests/perfmodel/synthetic_profile.h"

using namespace kiln::perf;
using kiln::perf::testing::synthetic_sweep;

namespace {

// One-thread and two-thread conv points on rooflines 1.8x apart.
std::vector<Measurement> conv_pairs(const std::string& dtype) {
  std::vector<Measurement> rows = synthetic_sweep({0.005, 30e6, 15e6}, "conv", dtype, 1);
  for (const Measurement& m : synthetic_sweep({0.005, 30e6 * 1.8, 15e6 * 1.8}, "conv", dtype, 2)) rows.push_back(m);
  return rows;
}

}  // namespace

TEST_CASE("a thread pair whose readings contradict each other is priced from the other reading", "[perfmodel][predictor]") {
  const std::vector<Measurement> truth = conv_pairs("bf16");
  std::vector<Measurement> rows = truth;
  // Of the large shapes, every third slow at two threads, every seventh (another) slow at one; one small
  // point slow too (left alone).
  std::map<std::string, int> shape_index;
  std::map<size_t, bool> slowed;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].macs < kThreadPairMinMacs) continue;
    const int k = shape_index.emplace(rows[i].key, static_cast<int>(shape_index.size())).first->second;
    if ((rows[i].threads == 2 && k % 3 == 0) || (rows[i].threads == 1 && k % 7 == 1)) {
      rows[i].median_ms *= 2.4;
      slowed[i] = true;
    }
  }
  size_t small = 0;
  while (rows[small].macs >= kThreadPairMinMacs || rows[small].threads != 2) ++small;
  rows[small].median_ms *= 2.4;
  REQUIRE(slowed.size() >= 6);

  std::vector<Measurement> repaired = rows;
  CHECK(repair_contradicting_thread_pairs(repaired) == static_cast<int>(slowed.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    INFO(rows[i].key << " t" << rows[i].threads);
    if (slowed.count(i)) CHECK(repaired[i].median_ms == Approx(truth[i].median_ms).epsilon(0.1));
    else CHECK(repaired[i].median_ms == rows[i].median_ms);  // agreeing pairs and the small point untouched
  }

  // The fit does the same and says so; a slowed step is priced as if it had not been slowed.
  auto clean = LatencyPredictor::fit(truth, {false, 4, "roofline"});
  auto fitted = LatencyPredictor::fit(rows, {false, 4, "roofline"});
  REQUIRE(clean);
  REQUIRE(fitted);
  CHECK(fitted->summary().points_repaired == static_cast<int>(slowed.size()));
  CHECK(clean->summary().points_repaired == 0);
  StepFeatures step = {};
  step.m = truth[slowed.begin()->first];
  CHECK(fitted->predict({step}).total_ms == Approx(clean->predict({step}).total_ms).epsilon(0.1));
}

TEST_CASE("thread pairs are left alone without enough agreeing pairs to take the ratio from", "[perfmodel][predictor]") {
  std::vector<Measurement> rows = conv_pairs("int8");
  int slowed = 0;
  for (Measurement& m : rows)
    if (m.threads == 2 && m.macs >= kThreadPairMinMacs) m.median_ms *= 2.4, ++slowed;  // every large pair contradicts
  REQUIRE(slowed >= kThreadPairMinAgreeing);
  const std::vector<Measurement> before = rows;
  CHECK(repair_contradicting_thread_pairs(rows) == 0);
  for (size_t i = 0; i < rows.size(); ++i) CHECK(rows[i].median_ms == before[i].median_ms);
}
