// bench_target_run while the host slows multi-thread work down (perfmodel/bench_target.h,
// settle_seconds): multi-thread points are put off behind the one-thread points and measured once
// the slowdown ends; a slowdown that outlasts the wait is measured anyway and flagged as loaded.
// The thread pace probe is stood in for, so that the host's mode is the test's to set.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "perfmodel/bench_target.h"
#include "tests/perfmodel/temp_dir.h"

using namespace kiln;
using namespace kiln::perf;
using namespace kiln::perf::testing;

namespace {

struct SweepRun {
  BenchTargetSummary summary;
  std::vector<Measurement> stored;
  std::string progress;
};

SweepRun quick_sweep(const TempDir& dir, double settle_seconds, std::function<double(int, bool)> host_lost_cpus) {
  auto store = BenchmarkStore::open(dir.file("store.sqlite"));
  REQUIRE(store);
  std::ostringstream progress;
  BenchTargetOptions options;
  options.quick = true;
  options.only = {kSectionSweep};
  options.threads = {1, 2};
  options.settle_seconds = settle_seconds;
  options.host_lost_cpus = std::move(host_lost_cpus);
  options.progress = &progress;
  auto summary = bench_target_run(**store, options);
  INFO(progress.str());
  REQUIRE(summary);
  auto stored = (*store)->measurements(summary->fingerprint.id);
  REQUIRE(stored);
  return {*summary, *stored, progress.str()};
}

int64_t two_thread_points(const std::vector<Measurement>& stored) {
  int64_t n = 0;
  for (const Measurement& m : stored) n += m.threads == 2;
  return n;
}

// CPUs the stand-in says the host takes: more than other processes can (the meter stops at the
// online CPUs), so a point's load_avg tells whether it was counted.
constexpr double kLost = 10;

// Position of the first and last progress line of a point measured at `threads`.
std::pair<size_t, size_t> lines_at(const std::string& progress, int threads) {
  const std::string tag = " t" + std::to_string(threads) + ": ";
  return {progress.find(tag), progress.rfind(tag)};
}

}  // namespace

TEST_CASE("bench-target puts two-thread points off while the host slows threads, and measures them once it stops",
          "[perfmodel][unit]") {
  TempDir dir;
  bool slowed = true;  // until the run asks for a fresh reading: the host lets go at the first wait
  const SweepRun run = quick_sweep(dir, 0.3, [&](int threads, bool fresh) {
    CHECK(threads == 2);
    if (fresh) slowed = false;
    return slowed ? kLost : 0.0;
  });
  INFO(run.progress);
  const int64_t two = two_thread_points(run.stored);
  REQUIRE(two > 0);
  CHECK(run.summary.measured == static_cast<int64_t>(run.stored.size()));
  CHECK(run.summary.deferred == two);
  CHECK(run.summary.settle_waited_seconds == Approx(0.3));
  // Every one-thread point went first.
  CHECK(lines_at(run.progress, 1).second < lines_at(run.progress, 2).first);
  CHECK_THAT(run.progress, Catch::Contains("putting 2-thread points off"));
  // Measured after the slowdown: none counts the host's CPUs as lost (other processes may add load).
  for (const Measurement& m : run.stored)
    if (m.threads == 2) CHECK(m.load_avg < 2 + kLost);
}

TEST_CASE("bench-target measures and flags the put-off points when the slowdown outlasts --settle", "[perfmodel][unit]") {
  TempDir dir;
  int fresh_readings = 0;
  const SweepRun run = quick_sweep(dir, 0.2, [&](int, bool fresh) {
    fresh_readings += fresh;
    return kLost;
  });
  INFO(run.progress);
  const int64_t two = two_thread_points(run.stored);
  CHECK(run.summary.deferred == two);
  CHECK(run.summary.settle_waited_seconds == Approx(0.2));
  CHECK(fresh_readings == 1);  // one wait of 0.2 s, then the budget is spent
  CHECK(run.summary.loaded >= two);
  for (const Measurement& m : run.stored)
    if (m.threads == 2) CHECK(m.load_avg >= 2 + kLost);
}

TEST_CASE("bench-target --settle 0 neither waits nor reorders: slowed points are flagged at once", "[perfmodel][unit]") {
  TempDir dir;
  const SweepRun run = quick_sweep(dir, 0, [](int, bool fresh) {
    CHECK_FALSE(fresh);
    return kLost;
  });
  INFO(run.progress);
  CHECK(run.summary.deferred == 0);
  CHECK(run.summary.settle_waited_seconds == 0);
  CHECK(lines_at(run.progress, 2).first < lines_at(run.progress, 1).second);
  for (const Measurement& m : run.stored)
    if (m.threads == 2) CHECK(m.load_avg >= 2 + kLost);
}
